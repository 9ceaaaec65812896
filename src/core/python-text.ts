/**
 * Python source read lexically, without a Python process: string literals, comments, brackets,
 * tokens. Enough to tell a test statement's parts and whether a line would parse, which the
 * policies (reading a model's answer), the rewards and the Judge all need; a Python parser would
 * need a process. Where it cannot be exact it errs on the side Python's parser takes for the
 * statements models write.
 */

const IDENT = /[A-Za-z0-9_]/;

export function isIdentChar(ch: string | undefined): boolean {
  if (ch === undefined) return false;
  return IDENT.test(ch) || ch.charCodeAt(0) >= 0x80;
}

/** The string literal whose opening quote is at `i`: the index just past it (or where an
 * unterminated one stops: the line end for a single-quoted literal, the text's end for a
 * triple-quoted one), and whether it was closed. A backslash always protects the next character
 * from ending the literal, raw strings included, which is what Python's tokenizer does. */
export function scanString(text: string, i: number): { end: number; closed: boolean } {
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
    if (!triple && ch === '\n') return { end: j, closed: false };
    if (text.startsWith(close, j)) return { end: j + close.length, closed: true };
    j++;
  }
  return { end: text.length, closed: false };
}

/** Index just past the string literal whose opening quote is at `i` (see scanString). */
export function skipString(text: string, i: number): number {
  return scanString(text, i).end;
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

export interface TopLevelScan {
  /** Positions (in the scanned text) of characters at bracket depth 0 outside literals. */
  topLevel: boolean[];
  balanced: boolean;
}

export function scanTopLevel(text: string): TopLevelScan {
  const topLevel: boolean[] = new Array<boolean>(text.length).fill(false);
  const stack: string[] = [];
  const match: Record<string, string> = { ')': '(', ']': '[', '}': '{' };
  let i = 0;
  let balanced = true;
  while (i < text.length) {
    const ch = text[i] as string;
    if (ch === "'" || ch === '"') {
      const { end, closed } = scanString(text, i);
      if (!closed) balanced = false;
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
export function isCallExpression(expr: string): boolean {
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

// ---------------------------------------------------------------------------------------------
// Tokens, and whether a piece of text is one Python expression

export type TokenKind = 'name' | 'number' | 'string' | 'op' | 'open' | 'close' | 'newline';
export interface Token {
  kind: TokenKind;
  text: string;
  /** Offset in the tokenized text. */
  at: number;
}

const KEYWORDS = new Set([
  'False',
  'None',
  'True',
  'and',
  'as',
  'assert',
  'async',
  'await',
  'break',
  'class',
  'continue',
  'def',
  'del',
  'elif',
  'else',
  'except',
  'finally',
  'for',
  'from',
  'global',
  'if',
  'import',
  'in',
  'is',
  'lambda',
  'nonlocal',
  'not',
  'or',
  'pass',
  'raise',
  'return',
  'try',
  'while',
  'with',
  'yield',
]);
export const isKeyword = (name: string): boolean => KEYWORDS.has(name);

const STRING_PREFIX = /^(?:[rRuUbBfF]|[bB][rR]|[rR][bB]|[fF][rR]|[rR][fF])$/;
const OPERATORS = [
  '**=',
  '//=',
  '>>=',
  '<<=',
  '...',
  '->',
  ':=',
  '**',
  '//',
  '<<',
  '>>',
  '<=',
  '>=',
  '==',
  '!=',
  '+=',
  '-=',
  '*=',
  '/=',
  '%=',
  '&=',
  '|=',
  '^=',
  '@=',
  '+',
  '-',
  '*',
  '/',
  '%',
  '@',
  '&',
  '|',
  '^',
  '~',
  '<',
  '>',
  '=',
  '.',
  ',',
  ':',
  ';',
];
const NUMBER = /^(?:0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d[\d_]*)?[jJ]?)/;

/**
 * Python tokens of `text` (comments dropped, backslash continuations joined; a newline outside
 * brackets is a `newline` token). Null when the text cannot be tokenized: an unterminated
 * string, a stray character, unmatched brackets.
 */
export function tokenize(text: string): Token[] | null {
  const out: Token[] = [];
  const stack: string[] = [];
  const pair: Record<string, string> = { ')': '(', ']': '[', '}': '{' };
  let i = 0;
  while (i < text.length) {
    const ch = text[i] as string;
    if (ch === '\\' && (text[i + 1] === '\n' || (text[i + 1] === '\r' && text[i + 2] === '\n'))) {
      i += text[i + 1] === '\n' ? 2 : 3;
      continue;
    }
    if (ch === '\n') {
      if (stack.length === 0 && out.length > 0 && out[out.length - 1]!.kind !== 'newline') out.push({ kind: 'newline', text: '\n', at: i });
      i++;
      continue;
    }
    if (/\s/.test(ch)) {
      i++;
      continue;
    }
    if (ch === '#') {
      while (i < text.length && text[i] !== '\n') i++;
      continue;
    }
    if (ch === "'" || ch === '"') {
      const { end, closed } = scanString(text, i);
      if (!closed) return null;
      const prev = out[out.length - 1];
      // A prefix glued to the quote (r'..', b"..", f'..') is part of the literal.
      if (prev && prev.kind === 'name' && prev.at + prev.text.length === i && STRING_PREFIX.test(prev.text)) {
        out[out.length - 1] = { kind: 'string', text: text.slice(prev.at, end), at: prev.at };
      } else out.push({ kind: 'string', text: text.slice(i, end), at: i });
      i = end;
      continue;
    }
    const num = /[0-9]/.test(ch) || (ch === '.' && /[0-9]/.test(text[i + 1] ?? '')) ? NUMBER.exec(text.slice(i)) : null;
    if (num) {
      if (isIdentChar(text[i + num[0].length]) && !/[0-9]/.test(text[i + num[0].length] ?? '')) return null; // 1abc
      out.push({ kind: 'number', text: num[0], at: i });
      i += num[0].length;
      continue;
    }
    if (isIdentChar(ch)) {
      let j = i;
      while (j < text.length && isIdentChar(text[j])) j++;
      out.push({ kind: 'name', text: text.slice(i, j), at: i });
      i = j;
      continue;
    }
    if (ch === '(' || ch === '[' || ch === '{') {
      stack.push(ch);
      out.push({ kind: 'open', text: ch, at: i });
      i++;
      continue;
    }
    if (ch === ')' || ch === ']' || ch === '}') {
      if (stack.pop() !== pair[ch]) return null;
      out.push({ kind: 'close', text: ch, at: i });
      i++;
      continue;
    }
    const op = OPERATORS.find((o) => text.startsWith(o, i));
    if (!op) return null;
    out.push({ kind: 'op', text: op, at: i });
    i += op.length;
  }
  if (stack.length !== 0) return null;
  if (out.length > 0 && out[out.length - 1]!.kind === 'newline') out.pop();
  return out;
}

const BINARY = new Set([
  '+',
  '-',
  '*',
  '/',
  '//',
  '%',
  '**',
  '@',
  '<<',
  '>>',
  '&',
  '|',
  '^',
  '<',
  '>',
  '<=',
  '>=',
  '==',
  '!=',
  'and',
  'or',
  'in',
  'is',
  'if',
  'else',
  'for',
  ':=',
]);
const UNARY = new Set(['-', '+', '~', 'not', '*', '**', 'await', 'yield']);
/** Operators allowed only inside brackets (arguments, slices, displays, comprehensions). */
const INNER = new Set([',', ':', '=', 'for', 'async']);

/**
 * Whether `tokens` form one Python expression, as far as the order of operands and operators
 * tells (two operands side by side, a dangling operator, an empty pair of parentheses in the
 * wrong place are what a model's prose or a cut line produces). Commas are allowed at the top
 * only with `tuple` (an expression list), as in `assert f(x) == 1, 2`'s right side they are not.
 */
export function isExpressionTokens(tokens: readonly Token[], tuple = false): boolean {
  if (tokens.length === 0) return false;
  let expectOperand = true;
  let depth = 0;
  let prev: Token | null = null;
  for (let k = 0; k < tokens.length; k++) {
    const t = tokens[k]!;
    const word = t.kind === 'name' && isKeyword(t.text) ? t.text : null;
    if (t.kind === 'newline') return false;
    if (expectOperand) {
      if (t.kind === 'number' || t.kind === 'string' || (t.kind === 'name' && (word === null || word === 'True' || word === 'False' || word === 'None'))) {
        expectOperand = false;
      } else if (t.kind === 'open') {
        depth++;
      } else if (t.kind === 'close') {
        // `()`, `[]`, `{}`, a trailing comma (`f(a,)`, `[1, 2, ]`) or an open slice (`x[1:]`).
        const opened = prev?.kind === 'open';
        if (!opened && !(prev?.kind === 'op' && (prev.text === ',' || (prev.text === ':' && t.text === ']')))) return false;
        depth--;
        expectOperand = false;
      } else if (t.kind === 'op' && t.text === ':' && depth > 0 && (prev?.text === '[' || prev?.text === ',' || prev?.text === ':')) {
        // a slice without a start: `x[:2]`, `x[::2]`
      } else if (word === 'lambda') {
        // Parameters up to the colon, then the body.
        let j = k + 1;
        while (j < tokens.length && !(tokens[j]!.kind === 'op' && tokens[j]!.text === ':')) j++;
        if (j >= tokens.length) return false;
        k = j;
      } else if (word === 'not') {
        // `not` binds looser than comparisons and arithmetic: `a == not b` does not parse.
        const after =
          prev === null ||
          prev.kind === 'open' ||
          (prev.kind === 'op' && [',', ':', '=', ':='].includes(prev.text)) ||
          (prev.kind === 'name' && ['and', 'or', 'not', 'if', 'else', 'lambda', 'yield', 'await'].includes(prev.text));
        if (!after) return false;
      } else if ((t.kind === 'op' || word !== null) && UNARY.has(word ?? t.text)) {
        // a unary operator: an operand still follows
      } else if (t.kind === 'op' && t.text === '...') {
        expectOperand = false;
      } else return false;
    } else {
      if (t.kind === 'open') {
        // A trailer: call or subscript (a brace cannot follow an operand).
        if (t.text === '{') return false;
        depth++;
        expectOperand = true;
      } else if (t.kind === 'close') {
        depth--;
        if (depth < 0) return false;
      } else if (t.kind === 'string' && prev?.kind === 'string') {
        // implicit concatenation
      } else if (t.kind === 'op' && t.text === '.') {
        const next = tokens[k + 1];
        if (!next || next.kind !== 'name') return false;
        k++;
      } else if (word === 'not' && tokens[k + 1]?.text === 'in') {
        k++;
        expectOperand = true;
      } else if (word === 'is' && tokens[k + 1]?.text === 'not') {
        k++;
        expectOperand = true;
      } else if ((t.kind === 'op' || word !== null) && BINARY.has(word ?? t.text)) {
        expectOperand = true;
      } else if (t.kind === 'op' && (INNER.has(t.text) || (word !== null && INNER.has(word)))) {
        if (depth === 0 && !(tuple && t.text === ',')) return false;
        // `x,` may end a tuple or argument list; anything else expects an operand.
        expectOperand = true;
        if (t.text === ',' && (tokens[k + 1] === undefined || tokens[k + 1]!.kind === 'close')) {
          if (tokens[k + 1] === undefined) return tuple;
        }
      } else if (word === 'async' && depth > 0) {
        expectOperand = true;
      } else return false;
    }
    prev = t;
  }
  return !expectOperand && depth === 0;
}

/** Whether `text` is one Python expression (see isExpressionTokens). */
export function isExpression(text: string, tuple = false): boolean {
  const tokens = tokenize(text);
  return tokens !== null && isExpressionTokens(tokens, tuple);
}

/** `text` on one line: its tokens as written, comments and line breaks dropped, one space
 * where the source had any gap (none after an opening bracket, before a closing one or a comma). */
export function oneLine(text: string): string {
  const tokens = tokenize(text);
  if (tokens === null) return text.trim();
  let out = '';
  tokens.forEach((t, k) => {
    if (t.kind === 'newline') return;
    const prev = k > 0 ? tokens[k - 1]! : null;
    const gap = prev !== null && prev.at + prev.text.length < t.at;
    if (gap && prev.kind !== 'open' && t.kind !== 'close' && t.text !== ',') out += ' ';
    out += t.text;
  });
  return out;
}

// ---------------------------------------------------------------------------------------------
// The Code-A1 test statement

export interface AssertCall {
  /** The call as written, trimmed (`f(1, 2)`). */
  call: string;
  /** The stated expected value as written, trimmed. */
  expected: string;
}

/** `tokens`' top-level comparison operators: [offset of the operator, operator as written]. */
function topComparisons(text: string, tokens: readonly Token[]): [number, string][] {
  const out: [number, string][] = [];
  let depth = 0;
  for (let k = 0; k < tokens.length; k++) {
    const t = tokens[k]!;
    if (t.kind === 'open') depth++;
    else if (t.kind === 'close') depth--;
    else if (depth !== 0) continue;
    else if (t.kind === 'op' && ['==', '!=', '<', '>', '<=', '>='].includes(t.text)) out.push([t.at, t.text]);
    else if (t.kind === 'name' && t.text === 'in') {
      const not = k > 0 && tokens[k - 1]!.kind === 'name' && tokens[k - 1]!.text === 'not' ? tokens[k - 1]! : null;
      out.push(not ? [not.at, text.slice(not.at, t.at + 2)] : [t.at, 'in']);
    } else if (t.kind === 'name' && t.text === 'is') {
      const next = tokens[k + 1];
      out.push(next?.kind === 'name' && next.text === 'not' ? [t.at, text.slice(t.at, next.at + 3)] : [t.at, 'is']);
    }
  }
  return out;
}

/** The parts of an assert statement's test: its first top-level comparison, as written, when
 * the test is a comparison whose left side is a call. `op` is the first operator; `chained`
 * says a second one follows (the release keeps only the first comparator of either). */
export interface AssertComparison extends AssertCall {
  op: string;
  chained: boolean;
}

/**
 * An assert statement `assert <test>[, <message>]` read as the release reads it: its test must
 * be a comparison whose left side is a call (`f(x)`, `m.f(x)`, `g(x)(y)`); the message is
 * ignored. Null when the statement is not an assert, does not parse, or its test is not such a
 * comparison. The operator is returned as written: the release takes any comparison's first
 * comparator as the expected value (so it reads `assert f(x) != y` as `== y`); see
 * parseAssertCall for crucible's reading.
 */
export function readAssertComparison(statement: string): AssertComparison | null {
  const text = statement.trim();
  if (!/^assert(?![A-Za-z0-9_])/.test(text)) return null;
  const body = text.slice('assert'.length);
  const tokens = tokenize(body);
  if (tokens === null || tokens.length === 0) return null;
  // The message: after the first top-level comma.
  let depth = 0;
  let comma = -1;
  for (const t of tokens) {
    if (t.kind === 'open') depth++;
    else if (t.kind === 'close') depth--;
    else if (depth === 0 && t.kind === 'op' && t.text === ',') {
      comma = t.at;
      break;
    }
  }
  if (comma >= 0 && !isExpression(body.slice(comma + 1))) return null;
  let test = (comma >= 0 ? body.slice(0, comma) : body).trim();
  if (!isExpression(test)) return null;
  // Parentheses around the whole test: `assert (f(1) == 2)`.
  while (test.startsWith('(') && test.endsWith(')') && scanTopLevel(test).topLevel.filter(Boolean).length === 2 && isExpression(test.slice(1, -1))) {
    test = test.slice(1, -1).trim();
  }
  const testTokens = tokenize(test)!;
  // A boolean or conditional expression (or a lambda) at the top is not a comparison.
  let d = 0;
  for (const t of testTokens) {
    if (t.kind === 'open') d++;
    else if (t.kind === 'close') d--;
    else if (d === 0 && t.kind === 'name' && ['and', 'or', 'if', 'lambda', 'not'].includes(t.text)) {
      // `not in` is a comparison operator; any other `not` at the top negates.
      const next = testTokens[testTokens.indexOf(t) + 1];
      const prev = testTokens[testTokens.indexOf(t) - 1];
      if (t.text === 'not' && ((next?.kind === 'name' && next.text === 'in') || (prev?.kind === 'name' && prev.text === 'is'))) continue;
      return null;
    }
  }
  const cmp = topComparisons(test, testTokens);
  if (cmp.length === 0) return null;
  const [at, op] = cmp[0]!;
  const call = test.slice(0, at).trim();
  const expected = test.slice(at + op.length, cmp.length > 1 ? cmp[1]![0] : test.length).trim();
  if (!isCallExpression(normalizeTestKey(call)) || !isExpression(call) || !isExpression(expected)) return null;
  return { call: oneLine(call), expected: oneLine(expected), op: op.replace(/\s+/g, ' '), chained: cmp.length > 1 };
}

/**
 * crucible's Code-A1 test: `assert <call> == <expr>`, one `==` comparison whose left side is a
 * call (an optional `, message` is ignored, as Python would). Null when the statement is not of
 * that form: not an assert, a non-call left side (`f(x)[0]`, `-f(x)`), another operator (`!=`,
 * `<`, `is`, `in`), a chained comparison, a boolean or conditional expression around the
 * comparison, or a second statement. Stricter than Code-A1's released parser, which takes any
 * comparison's first comparator as the expected value (`assert f(x) != y` read as `== y`).
 */
export function parseAssertCall(text: string): AssertCall | null {
  const tokens = tokenize(text);
  if (tokens === null) return null;
  // A second statement after `;` (a lone trailing `;` is allowed, as Python allows it).
  const semi = tokens.findIndex((t) => t.kind === 'op' && t.text === ';');
  if (semi >= 0 && semi !== tokens.length - 1) return null;
  const r = readAssertComparison(semi >= 0 ? text.slice(0, tokens[semi]!.at) : text);
  if (r === null || r.op !== '==' || r.chained) return null;
  return { call: normalizeTestKey(r.call), expected: normalizeTestKey(r.expected) };
}
