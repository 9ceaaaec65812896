/**
 * Model output into what the actors run: a program (from fenced code) for the code policy, tests
 * (assert lines, or input/output blocks) for the test policy. Every reading has a recorded
 * outcome; output that yields nothing usable is an `invalid` outcome, never an exception, so it
 * becomes a sample with its (zero) reward like any other.
 */
import type { TestCase, TestStyle } from '../../core/problem.js';
import { readResponseTests } from '../../core/response-tests.js';
import { parsePyArgs, parsePyLiteral } from './py-literal.js';

export type ParseStatus = 'ok' | 'partial' | 'invalid';

export interface ParseOutcome {
  status: ParseStatus;
  /** How the text was read: fenced, several-fenced, bare, truncated, empty (programs); assert-lines, call-lines, io-blocks, none (tests). */
  form: string;
  /** Items found and items usable (programs: 1 or 0). */
  found: number;
  usable: number;
  /** What went wrong, for a person; null when nothing did. */
  detail: string | null;
}

interface Fence {
  info: string;
  body: string;
  /** The nearest non-empty line before the fence (a label such as "Input:"). */
  label: string;
  closed: boolean;
}

/** Fenced blocks (``` or ~~~), in order; an unclosed last block runs to the end of the text. */
export function fencedBlocks(text: string): Fence[] {
  const lines = text.split('\n');
  const out: Fence[] = [];
  let open: { info: string; label: string; marker: string; body: string[] } | null = null;
  let lastText = '';
  for (const line of lines) {
    const m = /^\s*(`{3,}|~{3,})\s*([\w+-]*)\s*$/.exec(line);
    if (open) {
      if (m && m[1]!.startsWith(open.marker) && m[2] === '') {
        out.push({ info: open.info, body: open.body.join('\n'), label: open.label, closed: true });
        open = null;
      } else open.body.push(line);
    } else if (m) {
      open = { info: m[2]!.toLowerCase(), label: lastText, marker: m[1]!, body: [] };
    } else if (line.trim() !== '') lastText = line.trim();
  }
  if (open) out.push({ info: open.info, body: open.body.join('\n'), label: open.label, closed: false });
  return out;
}

const CODE_INFOS = new Set(['', 'python', 'python3', 'py']);

/** The program in a code policy's answer: the last complete python (or untagged) block, since
 * models put their final answer last; the whole text when there is no fence at all. */
export function parseProgram(text: string): { program: string; outcome: ParseOutcome } {
  if (text.trim() === '') return { program: '', outcome: { status: 'invalid', form: 'empty', found: 0, usable: 0, detail: 'the answer is empty' } };
  const fences = fencedBlocks(text);
  const code = fences.filter((f) => CODE_INFOS.has(f.info));
  const complete = code.filter((f) => f.closed && f.body.trim() !== '');
  if (complete.length > 0) {
    const program = `${complete[complete.length - 1]!.body.trimEnd()}\n`;
    const several = complete.length > 1;
    return {
      program,
      outcome: {
        status: 'ok',
        form: several ? 'several-fenced' : 'fenced',
        found: complete.length,
        usable: 1,
        detail: several ? `${complete.length} code blocks; the last is the program` : null,
      },
    };
  }
  const truncated = code.find((f) => !f.closed);
  if (truncated) {
    return {
      program: truncated.body,
      outcome: { status: 'invalid', form: 'truncated', found: 1, usable: 0, detail: 'the code block is not closed (the answer was cut off)' },
    };
  }
  if (fences.length > 0) {
    return {
      program: '',
      outcome: {
        status: 'invalid',
        form: 'fenced',
        found: 0,
        usable: 0,
        detail: `no python block (blocks tagged ${fences.map((f) => f.info || 'none').join(', ')})`,
      },
    };
  }
  // No fence: the answer may be bare code; the sandbox says whether it compiles.
  return {
    program: `${text.trimEnd()}\n`,
    outcome: { status: 'ok', form: 'bare', found: 1, usable: 1, detail: 'no code fence; the whole answer is the program' },
  };
}

export type ReadTest = { ok: true; test: TestCase } | { ok: false; reason: string; text: string };

export interface TestReading {
  tests: ReadTest[];
  outcome: ParseOutcome;
}

/** Where `name(` starts in `s` as a call (not part of a longer name). */
function callAt(s: string, name: string): number {
  const re = new RegExp(`(?<![\\w.])${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\s*\\(`);
  const m = re.exec(s);
  return m ? m.index : -1;
}

/** Index just past the parenthesis closing the one at `open`, skipping strings; -1 if none. */
function closeParen(s: string, open: number): number {
  let depth = 0;
  for (let i = open; i < s.length; i++) {
    const c = s[i]!;
    if (c === '"' || c === "'") {
      for (i++; i < s.length && s[i] !== c; i++) if (s[i] === '\\') i++;
    } else if (c === '(' || c === '[' || c === '{') depth++;
    else if (c === ')' || c === ']' || c === '}') {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return -1;
}

/** `assert f(ARGS) == EXPECTED` (or a bare `f(ARGS)`, a test without an expected value) into a call test. */
export function readCallLine(line: string, entryPoint: string): ReadTest {
  const text = line.trim();
  const body = text.replace(/^assert\s+/, '');
  const fn = entryPoint.split('.').pop()!;
  const at = callAt(body, fn);
  if (at !== 0) return { ok: false, reason: at < 0 ? `no call of ${fn}` : `the line does not start with a call of ${fn}`, text };
  const open = body.indexOf('(', at);
  const end = closeParen(body, open);
  if (end < 0) return { ok: false, reason: 'unbalanced parentheses', text };
  try {
    const args = parsePyArgs(body.slice(open, end));
    const rest = body.slice(end).trim();
    if (rest === '') return { ok: true, test: { style: 'call', args } };
    const m = /^==\s*([\s\S]+)$/.exec(rest);
    if (!m) return { ok: false, reason: `expected "== value" after the call, got ${JSON.stringify(rest.slice(0, 40))}`, text };
    return { ok: true, test: { style: 'call', args, expected: parsePyLiteral(m[1]!.replace(/\s*#.*$/, '')) } };
  } catch (e) {
    return { ok: false, reason: e instanceof Error ? e.message : String(e), text };
  }
}

/** The lines of the answer that could be tests: inside code blocks when there are any, else all. */
function candidateLines(text: string): string[] {
  const fences = fencedBlocks(text).filter((f) => CODE_INFOS.has(f.info));
  const source = fences.length ? fences.map((f) => f.body).join('\n') : text;
  return source
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
}

function outcomeOf(form: string, tests: ReadTest[], dropped: readonly { reason: string }[]): ParseOutcome {
  const usable = tests.filter((t) => t.ok).length;
  const bad = tests.filter((t): t is Extract<ReadTest, { ok: false }> => !t.ok);
  const notes = [];
  if (bad.length) notes.push(`${bad.length} unusable (first: ${bad[0]!.reason})`);
  if (dropped.length) notes.push(`${dropped.length} assert${dropped.length > 1 ? 's' : ''} in the code block not read as tests (first: ${dropped[0]!.reason})`);
  const status: ParseStatus = usable === 0 ? 'invalid' : bad.length ? 'partial' : 'ok';
  return {
    status,
    form: tests.length ? form : 'none',
    found: tests.length,
    usable,
    detail: notes.length ? notes.join('; ') : tests.length ? null : 'no test found',
  };
}

/**
 * Tests in a test policy's answer, for a problem of this style; every test is kept (no cap:
 * Code-A1's rewards are defined on all the tests of a response). Tests that state an expected
 * value (every method but ACE) are read as Code-A1's release reads them
 * (src/core/response-tests.ts): from the ```python blocks when there are any, where an assert
 * that is not a test is dropped without counting, else from every `assert` line, where one that
 * is not a test is kept as unusable (a malformed test, counted). Call-style problems turn each
 * test into a call of the entry point with literal arguments (one that is not becomes unusable).
 * `inputsOnly` (ACE): calls without expected values, read line by line.
 */
export function parseTests(text: string, style: TestStyle, entryPoint: string | undefined, options: { inputsOnly?: boolean } = {}): TestReading {
  if (style === 'stdio') {
    const tests = readIoBlocks(text);
    return { tests, outcome: outcomeOf('io-blocks', tests, []) };
  }
  if (style === 'call' && !entryPoint)
    return { tests: [], outcome: { status: 'invalid', form: 'none', found: 0, usable: 0, detail: 'the problem names no entry point to call' } };
  if (options.inputsOnly) {
    let tests: ReadTest[];
    if (style === 'call') {
      const fn = entryPoint!.split('.').pop()!;
      tests = candidateLines(text)
        .filter((l) => l.startsWith('assert') || callAt(l, fn) === 0)
        .map((l) => readCallLine(l, entryPoint!));
    } else {
      tests = candidateLines(text)
        .filter((l) => l.startsWith('assert'))
        .map((l): ReadTest => ({ ok: true, test: { style: 'assert', code: l } }));
    }
    return { tests, outcome: outcomeOf(style === 'call' ? 'call-lines' : 'assert-lines', tests, []) };
  }
  const read = readResponseTests(text);
  const tests = read.statements.map((st): ReadTest => {
    if (st.form === null) return { ok: false, reason: st.reason ?? 'not a test', text: st.text };
    return style === 'call' ? readCallLine(st.text, entryPoint!) : { ok: true, test: { style: 'assert', code: st.text } };
  });
  return { tests, outcome: outcomeOf(`${read.source}-asserts`, tests, read.dropped) };
}

/** stdio tests: a block labelled input (by its fence tag or the line before it), optionally
 * followed by a block labelled output (the expected stdout; absent means no expected value). */
function readIoBlocks(text: string): ReadTest[] {
  const kindOf = (f: Fence): 'input' | 'output' | null => {
    const tag = `${f.info} ${f.label}`.toLowerCase();
    if (/\binput\b/.test(tag)) return 'input';
    if (/\b(output|expected)\b/.test(tag)) return 'output';
    return null;
  };
  const out: ReadTest[] = [];
  let pending: string | null = null;
  const flush = (output: string | null) => {
    if (pending !== null) out.push({ ok: true, test: { style: 'stdio', input: withNewline(pending), output: output === null ? null : withNewline(output) } });
    pending = null;
  };
  for (const f of fencedBlocks(text)) {
    const kind = kindOf(f);
    if (!f.closed) {
      flush(null);
      out.push({ ok: false, reason: `the ${kind ?? 'code'} block is not closed (the answer was cut off)`, text: f.body.slice(0, 200) });
      continue;
    }
    if (kind === 'input') {
      flush(null);
      pending = f.body;
    } else if (kind === 'output') {
      if (pending === null) out.push({ ok: false, reason: 'an output block with no input block before it', text: f.body.slice(0, 200) });
      else flush(f.body);
    }
  }
  flush(null);
  return out;
}

const withNewline = (s: string) => (s.endsWith('\n') ? s : `${s}\n`);
