"""What runs in an oracle's child: an assert test's body, or a checker.

The body runs here with Python's own semantics; the program stays in the candidate's process.
The names the body may reach in the program are the entry point (as `candidate`, and under its
own name) and the functions and classes the program defines that the body names: never a
builtin, never a module the harness imports. A program's function is a proxy whose calls run
in the candidate's process, in order, with arguments and results through the codec; a
program's class is a local class whose construction, attributes and methods run there too, so
`isinstance`, `except` of a program's exception (or of the builtin it derives from) and
`ListNode(1, ListNode(2))` work. Comparisons run here, on decoded values; a program's object is
equal to another only when it is the same object or has the same class and equal attributes.

Record (fd 9), parsed by the server: ok | assert_fail | cand_exc (the candidate raised and the
test did not catch it) | exc (the test's own error) | memory | cand_gone | cand_broken |
cand_oversize | cand_load | value (checkers).
"""
import ast
import builtins
import json
import os
import sys

from . import channel, codec, harness

_type = type
_isinstance = isinstance
_BOUND = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
BUILTIN_NAMES = frozenset(vars(builtins))


def free_names(tree):
    """Names a test reads but never binds."""
    loads, bound = set(), set()
    for node in ast.walk(tree):
        if _isinstance(node, ast.Name):
            (loads if _isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif _isinstance(node, _BOUND):
            bound.add(node.name)
        elif _isinstance(node, ast.arg):
            bound.add(node.arg)
        elif _isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split('.')[0])
        elif _isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return loads - bound


def wanted_names(free):
    """Free names of a test that may be the program's: not builtins, not harness modules."""
    return sorted(n for n in free if n not in BUILTIN_NAMES and n not in harness.HARNESS_MODULES and n != 'candidate')


def make_test_globals():
    g = {'__name__': '__test__', '__builtins__': builtins}
    exec(harness.PRELUDE_CODE, g)
    return g


TEST_BASE = []


def test_globals():
    """Fresh globals for a test body: the prelude's names, made once in the server, copied."""
    if not TEST_BASE:
        TEST_BASE.append(make_test_globals())
    return dict(TEST_BASE[0])


def prepare_test(source):
    """In the coordinator (trusted, never forks): the test compiled, and the names it may
    reach in the program. -> (code, free names) or an error record."""
    try:
        tree = ast.parse(source, '<test>', 'exec')
        return compile(tree, '<test>', 'exec'), sorted(free_names(tree)), None
    except (SyntaxError, ValueError, MemoryError, RecursionError, OverflowError) as e:
        return None, None, {'s': 'exc', 'type': _type(e).__name__, 'message': 'the test does not compile: ' + _message(e)}


def _message(e):
    try:
        return BaseException.__str__(e)[:500]
    except Exception:  # noqa: BLE001
        return ''


class _Missing:
    """`candidate` when the program has no such entry point: calling it raises what resolving it
    raised in the program's process (a NameError there is the program's failure)."""

    def __init__(self, err, peer):
        self.err, self.peer = err, peer

    def __call__(self, *a, **k):
        e = self.peer._exception({'id': -1, 'n': self.err.get('type', 'NameError'), 'm': 'builtins', 'h': 0,
                                  'b': [{'builtin': self.err.get('type', 'NameError')}], 'x': True},
                                 [self.err.get('message', '')])
        self.peer.raised.append(e)
        raise e


def run_assert(header, fd=7):
    """-> the record of one assert test."""
    peer = channel.Peer(fd, header['limit'], frozenset(('call',)))
    peer.raised = []
    exc_factory = peer._exception

    def tracked(desc, args):
        e = exc_factory(desc, args)
        peer.raised.append(e)
        return e
    peer._exception = tracked
    code, free = header['test_code'], frozenset(header['free'])
    entry = header.get('entry') or ''
    state = {}
    try:
        peer.send(['hello', wanted_names(free), entry])
        ready = peer.recv()
        if ready[0] == 'load_error':
            return {'s': 'cand_load'}
        if ready[0] != 'ready' or len(ready) != 4 or _type(ready[1]) is not dict:
            return {'s': 'cand_broken', 'why': 'the candidate did not answer hello'}
        d = peer.decoder()
        exports = {}
        for name, tag in ready[1].items():
            if _type(name) is str and name in free:
                exports[name] = d.value(tag)
        cand = d.value(ready[2]) if ready[2] is not None else None
    except codec.DecodeError as e:
        return {'s': 'cand_broken', 'why': str(e)[:200]}
    except channel.ChannelClosed:
        return {'s': 'cand_gone'}
    except channel.ChannelBroken as e:
        return {'s': 'cand_oversize'} if e.oversize else {'s': 'cand_broken', 'why': e.why[:200]}
    if cand is None:
        cand = _Missing(ready[3] if _type(ready[3]) is dict else {'type': 'NameError', 'message': 'no entry point'}, peer)
    g = test_globals()
    g.update(exports)
    if entry:
        g['candidate'] = cand
        if '.' not in entry and entry not in exports and entry in free and entry not in BUILTIN_NAMES:
            g[entry] = cand
    try:
        exec(code, g)
        check = g.get('check')
        if entry and _type(check).__name__ == 'function' and 'check' not in free:
            check(cand)  # HumanEval: the test defines check(candidate) for the harness to call
        state['outcome'] = {'s': 'ok'}
    except channel.ChannelClosed:
        state['outcome'] = {'s': 'cand_gone'}
    except channel.ChannelBroken as e:
        state['outcome'] = {'s': 'cand_oversize'} if e.oversize else {'s': 'cand_broken', 'why': e.why[:200]}
    except BaseException as e:  # noqa: BLE001
        if any(x is e for x in peer.raised):
            state['outcome'] = {'s': 'cand_exc', 'type': _type(e).__name__, 'message': _message(e)}
        elif _isinstance(e, AssertionError):
            state['outcome'] = {'s': 'assert_fail', 'message': _message(e) or 'assertion failed'}
        elif _isinstance(e, MemoryError):
            state['outcome'] = {'s': 'memory'}
        else:
            state['outcome'] = {'s': 'exc', 'type': _type(e).__name__, 'message': _message(e)}
    # A body that swallowed the candidate's end (a bare except) still lost its candidate.
    if peer.failure is not None and state['outcome']['s'] in ('ok', 'assert_fail', 'exc'):
        state['outcome'] = peer.failure
    _end(peer)
    return state['outcome']


def _end(peer):
    try:
        peer.send(['end'])
    except BaseException:  # noqa: BLE001
        pass


def run_check(header):
    """A checker: check(input, output, expected) -> bool, in a process of its own."""
    g = {'__name__': '__checker__', '__builtins__': builtins}
    exec(compile(header['checker'], '<checker>', 'exec'), g)
    ok = g['check'](header.get('input'), header.get('output'), header.get('expected'))
    return {'s': 'value', 'value': bool(ok)}


def main():
    """The oracle child's life after its setup. Never returns."""
    header, test_code = harness.read_data(8)
    header['test_code'] = test_code
    try:
        rec = run_assert(header) if header['kind'] == 'assert' else run_check(header)
    except MemoryError:
        rec = {'s': 'memory'}
    except BaseException as e:  # noqa: BLE001
        rec = harness.exc_record(e)
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except BaseException:  # noqa: BLE001
            pass
    try:
        os.write(9, json.dumps(rec).encode())
    except BaseException:  # noqa: BLE001
        os._exit(3)
    os._exit(0)
