/**
 * The execution matrix: verdicts B[p][t] of programs on tests for one problem-round, plus what
 * the Judge knows about each program and test. Every reward function reads only this shape (or
 * plain counts derived from it), so ablations can re-run them on recorded matrices.
 *
 * Outcomes. `accepted` is a pass; every other verdict a program can earn (wrong_answer,
 * runtime_error, time_limit, memory_limit, output_limit, compile_error) is a fail.
 * `sandbox_error` (the sandbox itself failed) and `null` (not run) are `unknown`: they are
 * neither pass nor fail, and every function here leaves them out of numerators AND denominators,
 * as if that cell had not been run. Each function documents what it does when nothing is left.
 */
import { z } from 'zod';
import { VERDICTS, type Verdict } from '../core/verdicts.js';

export class RewardInputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RewardInputError';
  }
}

export type Outcome = 'pass' | 'fail' | 'unknown';

export function outcomeOf(v: Verdict | null | undefined): Outcome {
  if (v === 'accepted') return 'pass';
  if (v === 'sandbox_error' || v === null || v === undefined) return 'unknown';
  return 'fail';
}

/**
 * Test status as judged against the oracle (GT program or dataset expectations).
 * - valid: usable, stated expectation agrees with the oracle;
 * - corrected: usable, but the stated expectation was wrong and the oracle's output replaced it
 *   (Code-A1 counts it invalid in valid_ratio yet still runs it);
 * - invalid: dropped (malformed, duplicate, oracle raised...);
 * - unknown: the oracle could not be run (sandbox_error): dropped and counted neither way.
 */
export const TEST_STATUSES = ['valid', 'corrected', 'invalid', 'unknown'] as const;
export type TestStatus = (typeof TEST_STATUSES)[number];

export function isUsable(status: TestStatus): boolean {
  return status === 'valid' || status === 'corrected';
}

export const ProgramInfo = z.object({
  id: z.string().min(1),
  /** The ground-truth program (oracle); never rewarded. */
  isReference: z.boolean().default(false),
  /** Code-A1's "valid program": its module parsed and its top level ran (no compile_error).
   * Use `inferProgramValid` when the caller has no better knowledge. */
  valid: z.boolean().default(true),
});
export type ProgramInfo = z.output<typeof ProgramInfo>;

export const TestInfo = z.object({
  id: z.string().min(1),
  /** The suite (one test-policy sample, the Mistake Book replay set, the GT tests...). */
  suite: z.string().min(1),
  status: z.enum(TEST_STATUSES).default('valid'),
  /** Normalized test text (see normalizeTestKey), for the Mistake Book. */
  key: z.string().optional(),
  /** Content hash of the test (blob store), for events. */
  hash: z.string().optional(),
});
export type TestInfo = z.output<typeof TestInfo>;

const VerdictCell = z.enum(VERDICTS).nullable();

export const ExecutionMatrixSchema = z
  .object({
    programs: z.array(ProgramInfo),
    tests: z.array(TestInfo),
    /** verdicts[p][t], in programs x tests order; null = not run. */
    verdicts: z.array(z.array(VerdictCell)),
  })
  .superRefine((m, ctx) => {
    if (m.verdicts.length !== m.programs.length) {
      ctx.addIssue({
        code: 'custom',
        path: ['verdicts'],
        message: `has ${m.verdicts.length} rows but there are ${m.programs.length} programs`,
      });
    }
    m.verdicts.forEach((row, p) => {
      if (row.length !== m.tests.length) {
        ctx.addIssue({
          code: 'custom',
          path: ['verdicts', p],
          message: `has ${row.length} cells but there are ${m.tests.length} tests`,
        });
      }
    });
    const dup = (ids: string[], what: 'programs' | 'tests'): void => {
      const seen = new Set<string>();
      ids.forEach((id, i) => {
        if (seen.has(id)) ctx.addIssue({ code: 'custom', path: [what, i, 'id'], message: `duplicate id "${id}"` });
        seen.add(id);
      });
    };
    dup(
      m.programs.map((p) => p.id),
      'programs',
    );
    dup(
      m.tests.map((t) => t.id),
      'tests',
    );
  });

export type ExecutionMatrix = z.output<typeof ExecutionMatrixSchema>;
export type ExecutionMatrixInput = z.input<typeof ExecutionMatrixSchema>;

function formatIssues(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.length ? i.path.map(String).join('.') : '(root)'}: ${i.message}`).join('; ');
}

/** Validate and normalize a matrix; throws RewardInputError naming each problem and where. */
export function parseMatrix(input: unknown): ExecutionMatrix {
  const r = ExecutionMatrixSchema.safeParse(input);
  if (!r.success) throw new RewardInputError(`invalid execution matrix: ${formatIssues(r.error)}`);
  return r.data;
}

/** Parse a value with a zod schema, throwing RewardInputError that names `what` and each path. */
export function parseWith<S extends z.ZodType>(schema: S, input: unknown, what: string): z.output<S> {
  const r = schema.safeParse(input);
  if (!r.success) throw new RewardInputError(`invalid ${what}: ${formatIssues(r.error)}`);
  return r.data;
}

/**
 * Compact verdict rows for tests and hand-written fixtures: one character per cell.
 * A accepted, W wrong_answer, R runtime_error, T time_limit, M memory_limit, O output_limit,
 * C compile_error, S sandbox_error, '-' not run. Spaces are ignored.
 */
const CODE_TO_VERDICT: Readonly<Record<string, Verdict | null>> = {
  A: 'accepted',
  W: 'wrong_answer',
  R: 'runtime_error',
  T: 'time_limit',
  M: 'memory_limit',
  O: 'output_limit',
  C: 'compile_error',
  S: 'sandbox_error',
  '-': null,
};

export function verdictsFromCodes(rows: readonly string[]): (Verdict | null)[][] {
  return rows.map((row, p) =>
    [...row.replace(/ /g, '')].map((ch, t) => {
      if (!(ch in CODE_TO_VERDICT)) {
        throw new RewardInputError(`verdict code "${ch}" at row ${p}, column ${t} is not one of AWRTMOCS-`);
      }
      return CODE_TO_VERDICT[ch] as Verdict | null;
    }),
  );
}

export function cell(m: ExecutionMatrix, p: number, t: number): Verdict | null {
  const row = m.verdicts[p];
  if (row === undefined || t < 0 || t >= m.tests.length) {
    throw new RewardInputError(`no cell [${p}][${t}] in a ${m.programs.length}x${m.tests.length} matrix`);
  }
  return row[t] ?? null;
}

export function programIndex(m: ExecutionMatrix, id: string): number {
  const i = m.programs.findIndex((p) => p.id === id);
  if (i < 0) throw new RewardInputError(`no program "${id}" in the matrix`);
  return i;
}

export function testIndex(m: ExecutionMatrix, id: string): number {
  const i = m.tests.findIndex((t) => t.id === id);
  if (i < 0) throw new RewardInputError(`no test "${id}" in the matrix`);
  return i;
}

/** Indices of non-reference programs, in matrix order. */
export function candidateIndices(m: ExecutionMatrix): number[] {
  const out: number[] = [];
  m.programs.forEach((p, i) => {
    if (!p.isReference) out.push(i);
  });
  return out;
}

/** Indices of tests in `suite` (all statuses unless `usableOnly`), in matrix order. */
export function suiteTestIndices(m: ExecutionMatrix, suite: string, usableOnly = true): number[] {
  const out: number[] = [];
  m.tests.forEach((t, i) => {
    if (t.suite === suite && (!usableOnly || isUsable(t.status))) out.push(i);
  });
  return out;
}

export function usableTestIndices(m: ExecutionMatrix): number[] {
  const out: number[] = [];
  m.tests.forEach((t, i) => {
    if (isUsable(t.status)) out.push(i);
  });
  return out;
}

function allIndices(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

/** Outcomes of program p on the given tests (default: all), in the given order. */
export function passVector(m: ExecutionMatrix, p: number, tests: readonly number[] = allIndices(m.tests.length)): Outcome[] {
  return tests.map((t) => outcomeOf(cell(m, p, t)));
}

/** Outcomes of every given program (default: all) on test t. */
export function testVector(m: ExecutionMatrix, t: number, programs: readonly number[] = allIndices(m.programs.length)): Outcome[] {
  return programs.map((p) => outcomeOf(cell(m, p, t)));
}

const SIGNATURE_CHAR: Readonly<Record<Outcome, string>> = { pass: '1', fail: '0', unknown: '?' };

/** A string of '1' (pass), '0' (fail), '?' (unknown) per outcome. `?` is its own symbol: two
 * signatures are equal only if their unknown cells are in the same places. */
export function signatureOf(outcomes: readonly Outcome[]): string {
  let s = '';
  for (const o of outcomes) s += SIGNATURE_CHAR[o];
  return s;
}

/** Pass/fail signature of test t over the given programs (default: all). */
export function testSignature(m: ExecutionMatrix, t: number, programs?: readonly number[]): string {
  return signatureOf(testVector(m, t, programs));
}

/** Pass/fail signature of program p over the given tests (default: all). */
export function programSignature(m: ExecutionMatrix, p: number, tests?: readonly number[]): string {
  return signatureOf(passVector(m, p, tests));
}

export interface PassCount {
  passed: number;
  failed: number;
  unknown: number;
  /** passed + failed */
  observed: number;
  /** passed / observed; 0 when nothing was observed. */
  rate: number;
}

export function countOutcomes(outcomes: readonly Outcome[]): PassCount {
  let passed = 0;
  let failed = 0;
  let unknown = 0;
  for (const o of outcomes) {
    if (o === 'pass') passed++;
    else if (o === 'fail') failed++;
    else unknown++;
  }
  const observed = passed + failed;
  return { passed, failed, unknown, observed, rate: observed === 0 ? 0 : passed / observed };
}

/** Pass rate of program p over the given tests, unknown cells excluded. */
export function programPassCount(m: ExecutionMatrix, p: number, tests?: readonly number[]): PassCount {
  return countOutcomes(passVector(m, p, tests));
}

/** Pass rate of test t over the given programs, unknown cells excluded. */
export function testPassCount(m: ExecutionMatrix, t: number, programs?: readonly number[]): PassCount {
  return countOutcomes(testVector(m, t, programs));
}

/** Program validity when nothing better is known: a compile_error anywhere in its row means
 * its module did not load (Code-A1's `__CODE_VALID__` marker never printed). */
export function inferProgramValid(m: ExecutionMatrix, p: number): boolean {
  const row = m.verdicts[p];
  if (row === undefined) throw new RewardInputError(`no program row ${p}`);
  return !row.some((v) => v === 'compile_error');
}

/** Number of sandbox_error cells in the matrix: the Judge may retry them before rewarding. */
export function sandboxErrorCount(m: ExecutionMatrix): number {
  let n = 0;
  for (const row of m.verdicts) for (const v of row) if (v === 'sandbox_error') n++;
  return n;
}

/** Sum in index order: every function here sums through this so floats are bit-identical. */
export function sumInOrder(xs: readonly number[]): number {
  let s = 0;
  for (const x of xs) s += x;
  return s;
}

export function meanInOrder(xs: readonly number[]): number {
  return xs.length === 0 ? 0 : sumInOrder(xs) / xs.length;
}

/** Code-unit string order (never locale-dependent). */
export function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
