/**
 * The tests of a test policy's answer, read as Code-A1's release reads them
 * (code/rl/reward.py: extract_testcase_from_response, extract_asserts, process_assert_node and
 * the line reading in evaluate), so that every part of crucible counts the same tests:
 *
 * - When the answer holds a ```python ... ``` block (closed), the tests come from the blocks'
 *   code only, joined: lines are gathered into statements by bracket balance (strings and
 *   comments ignored; a new `assert ` line restarts a statement left open), each statement
 *   parsed on its own; a simple assignment `name = value` is remembered, and a later assert's
 *   bare-name arguments are replaced by the remembered values; an assert whose test is a
 *   comparison with a call on its left is a test. Every other assert (and every statement of a
 *   group that does not parse) is dropped without counting anywhere.
 * - Otherwise every line of the answer that starts with `assert` counts: a line that parses as an
 *   assert of that form is a test, any other is a malformed test, counted in invalid_t and in the
 *   total.
 * crucible reads one thing differently, on purpose: the release takes a comparison's first
 * comparator as the expected value whatever the operator, so `assert f(x) != y` (or `<`, `in`,
 * `is`, a chain) becomes `assert f(x) == y`; here only a single `==` is a test, and the others
 * are treated like any other assert that is not a test (dropped in a fence, counted outside).
 *
 * Parsing is lexical (src/core/python-text.ts): what Python's parser would refuse is judged by
 * tokens, brackets and the order of operands and operators.
 */
import { isExpression, isExpressionTokens, oneLine, readAssertComparison, tokenize, type AssertCall, type Token } from './python-text.js';

export interface ReadStatement {
  /** The test to run, `assert <call> == <expected>` as written (names substituted, message
   * dropped); for a malformed line, the line as written. */
  text: string;
  /** Its call and stated expected value; null for a malformed line (counted invalid). */
  form: AssertCall | null;
  /** Why a malformed line is not a test. */
  reason?: string;
}

export interface DroppedStatement {
  text: string;
  reason: string;
}

export interface ResponseTests {
  /** fenced: read from the ```python blocks; bare: the answer's `assert` lines. */
  source: 'fenced' | 'bare';
  /** Every test of the answer, in order, malformed lines included: their number is the total. */
  statements: ReadStatement[];
  /** Asserts in the blocks that are not tests, dropped without counting (for the record). */
  dropped: DroppedStatement[];
}

const FENCE = /```python([\s\S]*?)```/g;
/** The release's clean pattern: string literals on one line, and comments. */
const CLEAN = /("[^"\\]*(?:\\.[^"\\]*)*"|'[^'\\]*(?:\\.[^'\\]*)*'|#.*)/g;

/** The tests of a test policy's answer, as the release reads them (see the file comment). */
export function readResponseTests(response: string): ResponseTests {
  const blocks = [...response.matchAll(FENCE)].map((m) => m[1]!);
  if (blocks.length > 0) return readFenced(blocks.join('\n'));
  const statements: ReadStatement[] = [];
  for (const raw of pyStrip(response).split('\n')) {
    const line = pyStrip(raw);
    if (!line.startsWith('assert')) continue;
    statements.push(readBareLine(line));
  }
  return { source: 'bare', statements, dropped: [] };
}

/** Python's str.strip(): whitespace at both ends. */
function pyStrip(s: string): string {
  return s.replace(/^\s+|\s+$/g, '');
}

/** One `assert` line outside a fence: the whole line must parse, and its first statement must
 * be an assert whose test compares a call (with a single `==`, crucible's reading). */
function readBareLine(line: string): ReadStatement {
  const stmts = parseStatements(line);
  if (stmts === null) return { text: line, form: null, reason: 'the line does not parse' };
  const first = stmts[0];
  if (first?.kind !== 'assert') return { text: line, form: null, reason: 'not an assert statement' };
  const r = readAssertComparison(first.text);
  if (r === null) return { text: line, form: null, reason: 'the assert does not compare a call with an expected value' };
  if (r.op !== '==' || r.chained) return { text: line, form: null, reason: notEqualsReason(r.op, r.chained) };
  return { text: `assert ${r.call} == ${r.expected}`, form: { call: r.call, expected: r.expected } };
}

function notEqualsReason(op: string, chained: boolean): string {
  return chained ? 'a chained comparison (the release keeps its first comparator as ==)' : `the comparison is ${op}, not == (the release reads it as ==)`;
}

function readFenced(code: string): ResponseTests {
  const statements: ReadStatement[] = [];
  const dropped: DroppedStatement[] = [];
  const env = new Map<string, string>();
  let buffer: string[] = [];
  let balance = 0;
  for (const line of code.split('\n')) {
    const stripped = pyStrip(line);
    if (stripped === '') continue;
    if (balance < 0 || (balance > 0 && stripped.startsWith('assert '))) {
      buffer = [];
      balance = 0;
    }
    buffer.push(line);
    const clean = stripped.replace(CLEAN, '');
    for (const ch of clean) {
      if (ch === '(' || ch === '[' || ch === '{') balance++;
      else if (ch === ')' || ch === ']' || ch === '}') balance--;
    }
    if (balance !== 0 || stripped.endsWith('\\')) continue;
    const block = pyStrip(buffer.join('\n'));
    buffer = [];
    const stmts = parseStatements(block);
    if (stmts === null) {
      if (/(^|[\s;])assert\b/.test(block)) dropped.push({ text: block, reason: 'the statement does not parse' });
      continue;
    }
    for (const st of stmts) {
      if (st.kind === 'assign') env.set(st.name, st.value);
      if (st.kind !== 'assert') continue;
      const r = readAssertComparison(st.text);
      if (r === null) dropped.push({ text: st.text, reason: 'the assert does not compare a call with an expected value' });
      else if (r.op !== '==' || r.chained) dropped.push({ text: st.text, reason: notEqualsReason(r.op, r.chained) });
      else {
        const call = substitute(r.call, env);
        statements.push({ text: `assert ${call} == ${r.expected}`, form: { call, expected: r.expected } });
      }
    }
  }
  return { source: 'fenced', statements, dropped };
}

type Statement = { kind: 'assert'; text: string } | { kind: 'assign'; name: string; value: string } | { kind: 'other' };

const COMPOUND = new Set(['if', 'for', 'while', 'with', 'def', 'class', 'try', 'async']);
const CLAUSE = new Set(['elif', 'else', 'except', 'finally']);
const SIMPLE = new Set(['pass', 'break', 'continue', 'return', 'raise', 'del', 'global', 'nonlocal', 'import', 'from', 'yield']);
const AUGMENTED = new Set(['+=', '-=', '*=', '/=', '//=', '%=', '**=', '>>=', '<<=', '&=', '|=', '^=', '@=']);

/**
 * The statements of a group of lines, as `ast.parse` would give its top level; null when it
 * would raise a SyntaxError. Statements are split at `;` and at line ends outside brackets;
 * asserts, simple assignments and the rest are told apart.
 */
export function parseStatements(text: string): Statement[] | null {
  const tokens = tokenize(text);
  if (tokens === null) return null;
  const pieces: Token[][] = [[]];
  let depth = 0;
  for (const t of tokens) {
    if (t.kind === 'open') depth++;
    else if (t.kind === 'close') depth--;
    if (depth === 0 && (t.kind === 'newline' || (t.kind === 'op' && t.text === ';'))) {
      // Two separators in a row (`;;`), or one before anything, do not parse.
      if (pieces[pieces.length - 1]!.length === 0) return null;
      pieces.push([]);
    } else pieces[pieces.length - 1]!.push(t);
  }
  if (pieces[pieces.length - 1]!.length === 0) pieces.pop(); // a trailing `;`
  const out: Statement[] = [];
  for (const piece of pieces) {
    const st = statementOf(text, piece);
    if (st === null) return null;
    out.push(st);
  }
  return out.length > 0 ? out : null;
}

/** Top-level operators of `tokens` with their indexes. */
function topOps(tokens: readonly Token[], which: (t: Token) => boolean): number[] {
  const out: number[] = [];
  let depth = 0;
  tokens.forEach((t, k) => {
    if (t.kind === 'open') depth++;
    else if (t.kind === 'close') depth--;
    else if (depth === 0 && which(t)) out.push(k);
  });
  return out;
}

function statementOf(text: string, tokens: Token[]): Statement | null {
  const first = tokens[0]!;
  const slice = (from: number, to = tokens.length) => (from >= to ? '' : text.slice(tokens[from]!.at, tokens[to - 1]!.at + tokens[to - 1]!.text.length));
  const source = slice(0);
  if (first.kind === 'name' && first.text === 'assert') {
    const comma = topOps(tokens, (t) => t.kind === 'op' && t.text === ',')[0];
    const test = tokens.slice(1, comma ?? tokens.length);
    if (!isExpressionTokens(test)) return null;
    if (comma !== undefined && !isExpressionTokens(tokens.slice(comma + 1))) return null;
    return { kind: 'assert', text: source };
  }
  if (first.kind === 'name' && CLAUSE.has(first.text)) return null; // a clause without its statement
  if (first.kind === 'name' && COMPOUND.has(first.text)) {
    // A compound statement parses on one line only with its body after the colon.
    const colon = topOps(tokens, (t) => t.kind === 'op' && t.text === ':');
    return colon.length > 0 && colon[colon.length - 1]! < tokens.length - 1 ? { kind: 'other' } : null;
  }
  if (first.kind === 'name' && SIMPLE.has(first.text)) return { kind: 'other' };
  const assigns = topOps(tokens, (t) => t.kind === 'op' && t.text === '=');
  if (assigns.length > 0) {
    // target = ... = value: every part an expression (targets may be tuples).
    const bounds = [-1, ...assigns, tokens.length];
    for (let k = 0; k + 1 < bounds.length; k++) {
      if (!isExpressionTokens(tokens.slice(bounds[k]! + 1, bounds[k + 1]!), true)) return null;
    }
    // Only `name = value` (one target, a bare name) is remembered, as the release does.
    if (assigns.length === 1 && assigns[0] === 1 && first.kind === 'name') return { kind: 'assign', name: first.text, value: oneLine(slice(2)) };
    return { kind: 'other' };
  }
  const aug = topOps(tokens, (t) => t.kind === 'op' && AUGMENTED.has(t.text));
  if (aug.length > 0)
    return aug.length === 1 && isExpressionTokens(tokens.slice(0, aug[0])) && isExpressionTokens(tokens.slice(aug[0]! + 1), true) ? { kind: 'other' } : null;
  const annotation = topOps(tokens, (t) => t.kind === 'op' && t.text === ':');
  if (annotation.length === 1 && isExpressionTokens(tokens.slice(0, annotation[0])) && isExpressionTokens(tokens.slice(annotation[0]! + 1)))
    return { kind: 'other' };
  return isExpressionTokens(tokens, true) ? { kind: 'other' } : null;
}

/** The call with each bare-name argument (positional, keyword value or `**name`) of its last
 * argument list replaced by the value last assigned to that name, as process_assert_node does. */
function substitute(call: string, env: ReadonlyMap<string, string>): string {
  if (env.size === 0) return call;
  const tokens = tokenize(call);
  if (tokens === null) return call;
  // The last argument list: from the '(' matching the final ')'.
  let depth = 0;
  let open = -1;
  for (let k = tokens.length - 1; k >= 0; k--) {
    const t = tokens[k]!;
    if (t.kind === 'close') depth++;
    else if (t.kind === 'open') {
      depth--;
      if (depth === 0) {
        open = k;
        break;
      }
    }
  }
  if (open < 0) return call;
  const args: [number, number][] = [];
  let start = open + 1;
  depth = 0;
  for (let k = open + 1; k < tokens.length - 1; k++) {
    const t = tokens[k]!;
    if (t.kind === 'open') depth++;
    else if (t.kind === 'close') depth--;
    else if (depth === 0 && t.kind === 'op' && t.text === ',') {
      args.push([start, k]);
      start = k + 1;
    }
  }
  if (start < tokens.length - 1) args.push([start, tokens.length - 1]);
  // Replacements, last first so that earlier offsets stay right.
  let out = call;
  for (const [from, to] of args.reverse()) {
    const arg = tokens.slice(from, to);
    let name: Token | undefined;
    if (arg.length === 1 && arg[0]!.kind === 'name') name = arg[0];
    else if (arg.length === 3 && arg[0]!.kind === 'name' && arg[1]!.text === '=' && arg[2]!.kind === 'name') name = arg[2];
    else if (arg.length === 2 && arg[0]!.text === '**' && arg[1]!.kind === 'name') name = arg[1];
    if (!name || !env.has(name.text)) continue;
    const value = env.get(name.text)!;
    // A tuple without parentheses (`x = 1, 2`) stays one argument.
    const text = isExpression(value) ? value : `(${value})`;
    out = out.slice(0, name.at) + text + out.slice(name.at + name.text.length);
  }
  return out;
}
