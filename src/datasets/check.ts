/**
 * `crucible data check`: runs each problem's reference solutions on all its tests and its known
 * incorrect solutions on the tests that have expected values, through the sandbox. Reports the
 * problems whose references fail (real datasets contain such rows) and the incorrect solutions
 * that pass (tests too weak to catch them). Sandbox faults are counted apart: never a verdict.
 */
import type { Problem, TestCase } from '../core/problem.js';
import type { Sandbox, TestResult, Verdict } from '../sandbox/api.js';
import { BUCKETS, needsOracle, type Bucket } from './oracle.js';
import { mapLimit } from '../core/limiter.js';

export interface CheckOptions {
  /** Reference solutions run per problem (first ones; the first is the GT). Default 3. */
  solutions?: number;
  /** Incorrect solutions run per problem. Default 5. */
  incorrect?: number;
  /** Problems checked at once. Default 2. */
  concurrency?: number;
  onProblem?: (result: ProblemCheck, done: number, total: number) => void;
}

export interface TestFailure {
  bucket: Bucket;
  index: number;
  verdict: Verdict;
  exceptionType?: string;
  message?: string;
}

export interface SolutionCheck {
  /** Index into problem.solutions or problem.incorrectSolutions. */
  solution: number;
  /** Every test accepted (and, for an incorrect solution, at least one had an expected value). */
  passed: boolean;
  failures: TestFailure[];
  sandboxErrors: number;
}

export interface ProblemCheck {
  id: string;
  skipped?: string;
  references: SolutionCheck[];
  incorrect: SolutionCheck[];
  /** A sandbox call that threw (bad request); the problem's outcome is unknown. */
  error?: string;
}

export interface CheckReport {
  problems: number;
  checked: number;
  skipped: { id: string; reason: string }[];
  failingReferences: { id: string; solution: number; failed: number; failures: TestFailure[] }[];
  passingIncorrect: { id: string; solution: number }[];
  /** Runs with sandbox errors or refused requests: inconclusive, never counted as verdicts. */
  inconclusive: { id: string; reason: string }[];
}

interface Located {
  bucket: Bucket;
  index: number;
  test: TestCase;
}

const located = (p: Problem): Located[] => BUCKETS.flatMap((bucket) => p.tests[bucket].map((test, index) => ({ bucket, index, test })));

async function runOne(sandbox: Sandbox, p: Problem, program: string, solution: number, tests: Located[], stop: boolean): Promise<SolutionCheck> {
  const results: TestResult[] = await sandbox.run({
    program,
    tests: tests.map((t) => t.test),
    entryPoint: p.entryPoint,
    limits: p.limits,
    comparison: p.comparison,
    checker: p.checker,
    stopOnFirstFailure: stop,
  });
  const failures: TestFailure[] = [];
  let sandboxErrors = 0;
  for (const r of results) {
    if (r.verdict === 'accepted') continue;
    if (r.verdict === 'sandbox_error') {
      sandboxErrors += 1;
      continue;
    }
    const t = tests[r.test]!;
    failures.push({
      bucket: t.bucket,
      index: t.index,
      verdict: r.verdict,
      ...(r.exceptionType ? { exceptionType: r.exceptionType } : {}),
      ...(r.message ? { message: r.message.slice(0, 200) } : {}),
    });
  }
  // With stopOnFirstFailure the sandbox returns fewer results; a full set is needed to pass.
  const complete = results.length === tests.length;
  return { solution, passed: complete && failures.length === 0 && sandboxErrors === 0, failures, sandboxErrors };
}

/** Checks one problem. Never throws for a sandbox refusal: it is reported in `error`. */
export async function checkProblem(p: Problem, sandbox: Sandbox, options: CheckOptions = {}): Promise<ProblemCheck> {
  const result: ProblemCheck = { id: p.id, references: [], incorrect: [] };
  const all = located(p);
  const judged = all.filter((t) => !needsOracle(t.test));
  if (all.length === 0) return { ...result, skipped: 'no tests' };
  if (p.comparison === 'checker' && !p.checker) return { ...result, skipped: 'needs a checker and the dataset gives none' };
  const refs = p.solutions.slice(0, options.solutions ?? 3);
  const bad = p.incorrectSolutions.slice(0, options.incorrect ?? 5);
  if (refs.length === 0 && bad.length === 0) return { ...result, skipped: 'no reference or incorrect solutions' };
  try {
    for (const [i, program] of refs.entries()) result.references.push(await runOne(sandbox, p, program, i, all, false));
    // An incorrect solution is only caught by tests that say what the answer is.
    if (judged.length > 0) {
      for (const [i, program] of bad.entries()) result.incorrect.push(await runOne(sandbox, p, program, i, judged, true));
    }
  } catch (err) {
    result.error = (err as Error).message;
  }
  return result;
}

/** Folds per-problem checks into the report. Pure. */
export function summarize(checks: readonly ProblemCheck[]): CheckReport {
  const report: CheckReport = {
    problems: checks.length,
    checked: 0,
    skipped: [],
    failingReferences: [],
    passingIncorrect: [],
    inconclusive: [],
  };
  for (const c of checks) {
    if (c.skipped) {
      report.skipped.push({ id: c.id, reason: c.skipped });
      continue;
    }
    report.checked += 1;
    if (c.error) report.inconclusive.push({ id: c.id, reason: `sandbox refused the run: ${c.error}` });
    for (const r of c.references) {
      if (r.failures.length > 0) {
        report.failingReferences.push({ id: c.id, solution: r.solution, failed: r.failures.length, failures: r.failures.slice(0, 5) });
      }
      if (r.sandboxErrors > 0) report.inconclusive.push({ id: c.id, reason: `reference ${r.solution}: ${r.sandboxErrors} sandbox errors` });
    }
    for (const r of c.incorrect) {
      if (r.passed) report.passingIncorrect.push({ id: c.id, solution: r.solution });
      if (r.sandboxErrors > 0) report.inconclusive.push({ id: c.id, reason: `incorrect solution ${r.solution}: sandbox error` });
    }
  }
  return report;
}

export async function checkProblems(problems: readonly Problem[], sandbox: Sandbox, options: CheckOptions = {}): Promise<CheckReport> {
  let done = 0;
  const checks = await mapLimit(problems, options.concurrency ?? 2, async (p) => {
    const c = await checkProblem(p, sandbox, options);
    done += 1;
    options.onProblem?.(c, done, problems.length);
    return c;
  });
  return summarize(checks);
}
