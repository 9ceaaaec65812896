/**
 * Fills the expected values of input-only tests (HumanEval+ / MBPP+ base and plus inputs, stdio
 * tests with a null output) by running the reference solution (the problem's first solution)
 * through the sandbox, then re-runs the reference against the filled tests so that only values
 * that judge the reference correct are kept. A test on which the reference fails is dropped; one
 * whose value cannot be recorded faithfully (truncated, not JSON-representable) stays input-only.
 */
import { withExpectedOutput, type Problem, type TestCase } from '../core/problem.js';
import type { RunRequest, Sandbox, TestResult } from '../sandbox/api.js';

export type Bucket = 'public' | 'private' | 'generated';
export const BUCKETS: readonly Bucket[] = ['public', 'private', 'generated'];

export interface OracleNote {
  bucket: Bucket;
  index: number;
  reason: string;
}

export interface OracleResult {
  problem: Problem;
  filled: number;
  /** Tests removed because the reference itself fails on them. */
  dropped: OracleNote[];
  /** Tests left without an expected value, and why. */
  unfilled: OracleNote[];
  /** Set when nothing could be done for the whole problem. */
  skipped?: string;
}

export const needsOracle = (t: TestCase): boolean => (t.style === 'call' && t.expected === undefined) || (t.style === 'stdio' && t.output === null);

function describeFailure(r: TestResult): string {
  return `reference ${r.verdict}${r.exceptionType ? ` (${r.exceptionType}${r.message ? `: ${r.message}` : ''})` : ''}`;
}

function withExpected(t: TestCase, output: string): TestCase | string {
  if (t.style === 'assert') return 'not an input-only test';
  return withExpectedOutput(t, output) ?? 'the return value is not JSON (or was truncated)';
}

// Only the reference runs here: its own pool keeps its outputs out of candidates' servers.
const request = (p: Problem, program: string, tests: TestCase[]): RunRequest => ({
  role: 'reference',
  program,
  tests,
  entryPoint: p.entryPoint,
  limits: p.limits,
  comparison: p.comparison,
  checker: p.checker,
});

/** Computes expected values for one problem's input-only tests; never throws for a sandbox fault. */
export async function fillExpected(problem: Problem, sandbox: Sandbox): Promise<OracleResult> {
  const todo = BUCKETS.flatMap((bucket) => problem.tests[bucket].map((test, index) => ({ bucket, index, test })).filter((x) => needsOracle(x.test)));
  const base: OracleResult = { problem, filled: 0, dropped: [], unfilled: [] };
  if (todo.length === 0) return base;
  const gt = problem.solutions[0];
  if (gt === undefined) return { ...base, skipped: 'no reference solution to compute expected outputs' };
  if (problem.comparison === 'checker') return { ...base, skipped: 'needs a checker: expected outputs are not unique' };

  let first: TestResult[];
  try {
    first = await sandbox.run(
      request(
        problem,
        gt,
        todo.map((x) => x.test),
      ),
    );
  } catch (err) {
    return { ...base, skipped: `sandbox refused the run: ${(err as Error).message}` };
  }
  const dropped: OracleNote[] = [];
  const unfilled: OracleNote[] = [];
  const candidates: { bucket: Bucket; index: number; test: TestCase }[] = [];
  todo.forEach((x, k) => {
    const r = first.find((res) => res.test === k);
    const note = (reason: string) => ({ bucket: x.bucket, index: x.index, reason });
    if (!r || r.verdict === 'sandbox_error') unfilled.push(note(r?.message ? `sandbox error: ${r.message}` : 'sandbox error'));
    else if (r.verdict !== 'accepted') dropped.push(note(describeFailure(r)));
    else if (r.output === undefined) unfilled.push(note('the reference produced no recordable output'));
    else {
      const t = withExpected(x.test, r.output);
      if (typeof t === 'string') unfilled.push(note(t));
      else candidates.push({ ...x, test: t });
    }
  });

  // Keep only values that judge the reference itself correct (catches lossy serialization).
  const kept = new Map<string, TestCase>();
  if (candidates.length > 0) {
    let verify: TestResult[] = [];
    try {
      verify = await sandbox.run(
        request(
          problem,
          gt,
          candidates.map((c) => c.test),
        ),
      );
    } catch (err) {
      for (const c of candidates) unfilled.push({ bucket: c.bucket, index: c.index, reason: `verification refused: ${(err as Error).message}` });
    }
    candidates.forEach((c, k) => {
      const r = verify.find((res) => res.test === k);
      if (r?.verdict === 'accepted') kept.set(`${c.bucket}/${c.index}`, c.test);
      else if (r) unfilled.push({ bucket: c.bucket, index: c.index, reason: `recorded value does not judge the reference correct (${r.verdict})` });
    });
  }

  const droppedKeys = new Set(dropped.map((d) => `${d.bucket}/${d.index}`));
  const tests = Object.fromEntries(
    BUCKETS.map((bucket) => [
      bucket,
      problem.tests[bucket].map((t, i) => kept.get(`${bucket}/${i}`) ?? t).filter((_, i) => !droppedKeys.has(`${bucket}/${i}`)),
    ]),
  ) as Problem['tests'];
  return { problem: { ...problem, tests }, filled: kept.size, dropped, unfilled };
}
