/**
 * Test text helpers shared by Code-A1 validation and the Mistake Book: a canonical key for a
 * test statement, and the `assert <call> == <expr>` form check. Both are lexical (string
 * literals, comments and brackets are respected) rather than a Python parser: they run in the
 * Judge without a Python process, and the key only has to be stable, not executable.
 */

const IDENT = /[A-Za-z0-9_]/;

function isIdentChar(ch: string | undefined): boolean {
  if (ch === undefined) return false;
  return IDENT.test(ch) || ch.charCodeAt(0) >= 0x80;
}

/** Index just past the string literal whose opening quote is at `i` (or text.length if it is
 * unterminated). A backslash always protects the next character from ending the literal, raw
 * strings included, which is what Python's tokenizer does. */
function skipString(text: string, i: number): number {
  const q = text[i] as string;
  const triple = text.startsWith(q.repeat(3), i);
  const close = triple ? q.repeat(3) : q;
  let j = i + close.length;
  while (j < text.length) {
    const ch = text[j];
    if (ch === '\\') {
      j += 2;
      continue;
    }
    if (!triple && ch === '\n') return j; // unterminated single-quoted literal: stop at line end
    if (text.startsWith(close, j)) return j + close.length;
    j++;
  }
  return text.length;
}

/**
 * Canonical key of a test statement: comments removed, string literals kept verbatim, every run
 * of whitespace outside literals (newlines and backslash continuations included) dropped, except
 * one space where it separates two identifier characters (`not x`, `1 if c else 2`).
 * So `assert f(1, 2)==[1,2]  # x` and `assert f(1,2) == [1, 2]` share a key.
 */
export function normalizeTestKey(text: string): string {
  let out = '';
  let pendingSpace = false;
  let i = 0;
  const emit = (s: string): void => {
    if (pendingSpace && out.length > 0 && isIdentChar(out[out.length - 1]) && isIdentChar(s[0])) out += ' ';
    pendingSpace = false;
    out += s;
  };
  while (i < text.length) {
    const ch = text[i] as string;
    if (ch === "'" || ch === '"') {
      const end = skipString(text, i);
      emit(text.slice(i, end));
      i = end;
    } else if (ch === '#') {
      while (i < text.length && text[i] !== '\n') i++;
      pendingSpace = true;
    } else if (ch === '\\' && (text[i + 1] === '\n' || (text[i + 1] === '\r' && text[i + 2] === '\n'))) {
      i += text[i + 1] === '\n' ? 2 : 3;
      pendingSpace = true;
    } else if (/\s/.test(ch)) {
      i++;
      pendingSpace = true;
    } else {
      emit(ch);
      i++;
    }
  }
  return out;
}

interface TopLevelScan {
  /** Positions (in the scanned text) of characters at bracket depth 0 outside literals. */
  topLevel: boolean[];
  balanced: boolean;
}

function scanTopLevel(text: string): TopLevelScan {
  const topLevel: boolean[] = new Array<boolean>(text.length).fill(false);
  const stack: string[] = [];
  const match: Record<string, string> = { ')': '(', ']': '[', '}': '{' };
  let i = 0;
  let balanced = true;
  while (i < text.length) {
    const ch = text[i] as string;
    if (ch === "'" || ch === '"') {
      const end = skipString(text, i);
      if (end >= text.length && !text.endsWith(ch)) balanced = false;
      i = end;
      continue;
    }
    if (ch === '(' || ch === '[' || ch === '{') {
      if (stack.length === 0) topLevel[i] = true;
      stack.push(ch);
    } else if (ch === ')' || ch === ']' || ch === '}') {
      if (stack.pop() !== match[ch]) balanced = false;
      if (stack.length === 0) topLevel[i] = true;
    } else if (stack.length === 0) {
      topLevel[i] = true;
    }
    i++;
  }
  if (stack.length !== 0) balanced = false;
  return { topLevel, balanced };
}

/** True when `expr` (normalized) is a call: an identifier followed by attribute, subscript and
 * call trailers, the last trailer being a call: `f(x)`, `m.f(x)`, `Solution().twoSum(a, b)`. */
function isCallExpression(expr: string): boolean {
  if (expr.length === 0 || !/^[A-Za-z_]/.test(expr) || !expr.endsWith(')')) return false;
  const { topLevel, balanced } = scanTopLevel(expr);
  if (!balanced) return false;
  // At depth 0 only identifier characters, dots and bracket delimiters may appear.
  for (let i = 0; i < expr.length; i++) {
    if (!topLevel[i]) continue;
    const ch = expr[i] as string;
    if (!(isIdentChar(ch) || ch === '.' || '()[]{}'.includes(ch))) return false;
    if (ch === '{') return false; // a dict/set display cannot be a trailer
  }
  // The final ')' closes a group opened right after a callee (not after an operator).
  let depth = 0;
  for (let i = expr.length - 1; i >= 0; i--) {
    if (!topLevel[i] && depth === 0) continue;
    const ch = expr[i] as string;
    if (ch === ')') depth++;
    else if (ch === '(') {
      depth--;
      if (depth === 0) {
        const before = expr[i - 1];
        return i > 0 && (isIdentChar(before) || before === ')' || before === ']');
      }
    }
  }
  return false;
}

export interface AssertCall {
  /** The call, normalized (`f(1,2)`). */
  call: string;
  /** The stated expected value, normalized. */
  expected: string;
}

/**
 * Parse a Code-A1 test `assert <call> == <expr>` (an optional `, message` is ignored, as
 * Python would). Returns null when the statement is not of that form: not an assert, a
 * non-call left side (`f(x)[0]`, `-f(x)`), another first comparison (`!=`, `<`, `is`, `in`),
 * a boolean or conditional expression around the comparison, or a second statement.
 * Stricter than Code-A1's released parser, which also accepted `assert f(x) != y` and rewrote
 * it as `==`.
 */
export function parseAssertCall(text: string): AssertCall | null {
  let s = normalizeTestKey(text);
  if (!/^assert(?![A-Za-z0-9_])/.test(s)) return null;
  s = s.slice('assert'.length).replace(/^ /, '');
  let { topLevel, balanced } = scanTopLevel(s);
  if (!balanced || s.length === 0) return null;
  // Drop a trailing `, message` at depth 0.
  const comma = s.split('').findIndex((ch, i) => ch === ',' && topLevel[i]);
  if (comma >= 0) s = s.slice(0, comma);
  // One level of parentheses around the whole test: `assert (f(1) == 2)`.
  if (s.startsWith('(') && s.endsWith(')')) {
    const inner = s.slice(1, -1);
    const scan = scanTopLevel(inner);
    if (scan.balanced && !isCallExpression(s)) {
      const opensAtStartClosesAtEnd = scanTopLevel(s).topLevel.filter(Boolean).length === 2;
      if (opensAtStartClosesAtEnd) s = inner;
    }
  }
  ({ topLevel, balanced } = scanTopLevel(s));
  if (!balanced) return null;
  for (let i = 0; i < s.length; i++) {
    if (topLevel[i] && s[i] === ';') return null;
  }
  // First top-level comparison operator.
  let opAt = -1;
  let op = '';
  for (let i = 0; i < s.length && opAt < 0; i++) {
    if (!topLevel[i]) continue;
    const two = s.slice(i, i + 2);
    const ch = s[i] as string;
    if (two === '==' || two === '!=' || two === '<=' || two === '>=') {
      opAt = i;
      op = two;
    } else if ((ch === '<' || ch === '>') && s[i + 1] !== ch && s[i - 1] !== ch && s[i + 1] !== '=') {
      opAt = i;
      op = ch;
    }
  }
  if (opAt < 0 || op !== '==') return null;
  const call = s.slice(0, opAt).trim();
  const expected = s.slice(opAt + 2).trim();
  if (!isCallExpression(call) || expected.length === 0) return null;
  // `f(x) == a or b`, `f(x) == a if c else b` are not comparisons at the top.
  const { topLevel: rt } = scanTopLevel(expected);
  const words = expected
    .split('')
    .map((ch, i) => (rt[i] ? ch : '\u0000'))
    .join('')
    .split(/[^A-Za-z0-9_]+/);
  if (words.some((w) => w === 'and' || w === 'or' || w === 'if' || w === 'is' || w === 'in' || w === 'not' || w === 'lambda')) {
    return null;
  }
  return { call, expected };
}

/** The GT-corrected statement: the call with the oracle's output as the expected value. */
export function correctedStatement(call: string, oracleRepr: string): string {
  return normalizeTestKey(`assert ${call} == ${oracleRepr}`);
}
