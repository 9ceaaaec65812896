/**
 * Supervised warm-start rows for served policies: each row is a prompt rendered by the same
 * template the policy samples with, and an answer in the form the parser reads back. The code
 * role learns statement -> program from every known program of a problem (the correct ones and
 * the labelled wrong ones, so the warm model samples both and reinforcement has something to
 * choose between); the test role learns statement (and program, white-box) -> the problem's
 * public tests. Held-out (private) tests are never used.
 */
import type { Problem, TestCase } from '../../core/problem.js';
import type { Role } from '../../core/roles.js';
import { renderPrompt, templateFor, type PromptSet } from './prompts.js';

export interface SftRow {
  /** Stable id: problem, role, index. */
  id: string;
  problemId: string;
  prompt: string;
  completion: string;
}

/** A JSON value as a Python literal (what `assert f(...) == value` lines hold). */
export function pythonLiteral(v: unknown): string {
  if (v === null || v === undefined) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : v > 0 ? "float('inf')" : v < 0 ? "float('-inf')" : "float('nan')";
  if (typeof v === 'string') return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(pythonLiteral).join(', ')}]`;
  if (typeof v === 'object')
    return `{${Object.entries(v)
      .map(([k, x]) => `${JSON.stringify(k)}: ${pythonLiteral(x)}`)
      .join(', ')}}`;
  throw new Error(`no Python literal for ${typeof v}`);
}

/** Tests written as the test templates ask: call tests as assert lines in a python block,
 * stdio tests as Input/Output blocks; tests without an expected value are left out. */
export function formatTests(problem: Problem, tests: readonly TestCase[]): string {
  const fn = (problem.entryPoint ?? 'f').split('.').pop();
  const parts: string[] = [];
  const lines: string[] = [];
  for (const t of tests) {
    if (t.style === 'call' && t.expected !== undefined) lines.push(`assert ${fn}(${t.args.map(pythonLiteral).join(', ')}) == ${pythonLiteral(t.expected)}`);
    else if (t.style === 'assert') lines.push(t.code.trim());
    else if (t.style === 'stdio' && t.output !== null)
      parts.push(`Input:\n\`\`\`\n${t.input.replace(/\n$/, '')}\n\`\`\`\nOutput:\n\`\`\`\n${t.output.replace(/\n$/, '')}\n\`\`\``);
  }
  if (lines.length) parts.push(['```python', ...lines, '```'].join('\n'));
  return parts.join('\n');
}

/** Every ordered selection of 1..`max` of the first three tests (with more, only the whole
 * list in order and reversed): the suites a warm test policy may write. Trained on one fixed
 * suite, it writes only that suite, and identical suites give GRPO no gradient; trained on
 * these, its suites differ in which examples they hold and in what order, so their rewards
 * differ (how many valid tests, which bug they expose) and the group has something to learn. */
export function suiteSelections<T>(tests: readonly T[], max: number): T[][] {
  if (tests.length > 3) return [tests.slice(0, max), [...tests].reverse().slice(0, max)];
  const out: T[][] = [];
  const grow = (prefix: T[], rest: T[]) => {
    if (prefix.length > 0) out.push(prefix);
    if (prefix.length === max) return;
    rest.forEach((t, i) => grow([...prefix, t], [...rest.slice(0, i), ...rest.slice(i + 1)]));
  };
  grow([], [...tests]);
  // Longest first: the full suite is the first row of each prompt.
  return out.sort((a, b) => b.length - a.length);
}

/** The rows of one problem for one role. Test rows are every selection of the public tests
 * (suiteSelections); white-box, each known program shown in the prompt (the tests do not depend
 * on it: they state the statement's expected values). */
export function sftRows(problem: Problem, role: Role, opts: { method: string; whiteBox: boolean; suiteSize: number; prompts: PromptSet }): SftRow[] {
  const fields = {
    statement: problem.statement,
    style: problem.style,
    entryPoint: problem.entryPoint,
    starterCode: problem.starterCode,
    suiteSize: opts.suiteSize,
  };
  const programs = [...problem.solutions, ...problem.incorrectSolutions];
  const rows: Omit<SftRow, 'id'>[] = [];
  if (role === 'code') {
    const prompt = renderPrompt(templateFor(opts.method, 'code', false, opts.prompts), fields).text;
    for (const program of programs) rows.push({ problemId: problem.id, prompt, completion: program });
  } else {
    const withExpected = problem.tests.public.filter((t) => formatTests(problem, [t]) !== '');
    const completions = suiteSelections(withExpected, opts.suiteSize).map((suite) => formatTests(problem, suite));
    const prompts = opts.whiteBox
      ? programs.map((program) => renderPrompt(templateFor(opts.method, 'test', true, opts.prompts), { ...fields, program }).text)
      : [renderPrompt(templateFor(opts.method, 'test', false, opts.prompts), fields).text];
    for (const prompt of prompts) for (const completion of completions) rows.push({ problemId: problem.id, prompt, completion });
  }
  return rows.map((r, i) => ({ id: `sft/${problem.id}/${role}/${i}`, ...r }));
}
