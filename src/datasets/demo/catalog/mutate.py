"""AST mutants of a reference program, for the catalog policy's candidate programs.

Reads {"program": str} on stdin, writes {"reference": normalized, "mutants": [{"op", "source"}]}.
Deterministic: nodes are visited in ast.walk order and operators in a fixed order; sources are
normalized with ast.unparse and deduplicated; mutants that do not compile are dropped.
Validation asserts are left alone: mutating them only changes behaviour on invalid inputs.
"""
import ast
import copy
import json
import sys

BINOP_SWAPS = {
    ast.Add: [ast.Sub], ast.Sub: [ast.Add], ast.Mult: [ast.Add], ast.FloorDiv: [ast.Mult, ast.Mod],
    ast.Mod: [ast.FloorDiv], ast.Div: [ast.Mult],
}
CMP_SWAPS = {
    ast.Lt: [ast.LtE, ast.Gt], ast.LtE: [ast.Lt, ast.GtE], ast.Gt: [ast.GtE, ast.Lt],
    ast.GtE: [ast.Gt, ast.LtE], ast.Eq: [ast.NotEq], ast.NotEq: [ast.Eq],
}
CALL_SWAPS = {"max": "min", "min": "max"}


def in_assert(tree):
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            for sub in ast.walk(node):
                skip.add(id(sub))
    return skip


def mutations(node):
    """(op name, function that mutates this node in place or returns a replacement)."""
    out = []
    if isinstance(node, ast.BinOp):
        for new in BINOP_SWAPS.get(type(node.op), []):
            out.append(("binop:%s->%s" % (type(node.op).__name__, new.__name__),
                        lambda n, new=new: setattr(n, "op", new())))
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        for new in CMP_SWAPS.get(type(node.ops[0]), []):
            out.append(("cmp:%s->%s" % (type(node.ops[0]).__name__, new.__name__),
                        lambda n, new=new: setattr(n, "ops", [new()])))
    if isinstance(node, ast.BoolOp):
        new = ast.Or if isinstance(node.op, ast.And) else ast.And
        out.append(("boolop", lambda n, new=new: setattr(n, "op", new())))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        out.append(("drop-not", lambda n: n.operand))
    if isinstance(node, ast.Constant) and type(node.value) is int:
        for d in (1, -1):
            out.append(("const%+d" % d, lambda n, d=d: setattr(n, "value", n.value + d)))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id in CALL_SWAPS:
            out.append(("call:%s" % node.func.id,
                        lambda n: setattr(n.func, "id", CALL_SWAPS[n.func.id])))
        if node.func.id == "range" and node.args:
            last = len(node.args) - 1 if len(node.args) < 3 else 1
            for d, op in ((1, ast.Add), (-1, ast.Sub)):
                out.append(("range-bound%+d" % d, lambda n, op=op, last=last: n.args.__setitem__(
                    last, ast.BinOp(left=n.args[last], op=op(), right=ast.Constant(1)))))
    if isinstance(node, ast.If):
        if node.orelse:
            out.append(("drop-if-branch", lambda n: n.orelse))
        else:
            out.append(("drop-if", lambda n: ast.Pass()))
    return out


class Apply(ast.NodeTransformer):
    def __init__(self, target, fn):
        self.target, self.fn, self.i = target, fn, -1

    def generic_visit(self, node):
        return super().generic_visit(node)

    def visit(self, node):
        self.i += 1
        if self.i == self.target:
            replaced = self.fn(node)
            return node if replaced is None else replaced
        return super().visit(node)


def preorder(tree):
    nodes = []

    class Collect(ast.NodeVisitor):
        def visit(self, node):
            nodes.append(node)
            super().visit(node)

    Collect().visit(tree)
    return nodes


def main():
    req = json.load(sys.stdin)
    tree = ast.parse(req["program"])
    reference = ast.unparse(tree)
    skip = in_assert(tree)
    seen = {reference}
    mutants = []
    for index, node in enumerate(preorder(tree)):
        if id(node) in skip:
            continue
        for op, fn in mutations(node):
            mutated = Apply(index, fn).visit(copy.deepcopy(tree))
            ast.fix_missing_locations(mutated)
            try:
                source = ast.unparse(mutated)
                compile(source, "<mutant>", "exec")
            except (SyntaxError, ValueError, TypeError, AttributeError):
                continue
            if source in seen:
                continue
            seen.add(source)
            mutants.append({"op": "%s@%d" % (op, getattr(node, "lineno", 0)), "source": source})
    json.dump({"reference": reference, "mutants": mutants}, sys.stdout)


if __name__ == "__main__":
    main()
