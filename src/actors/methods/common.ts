/** Pieces the matrix-based methods share: the dataset's own tests, the execution matrix of a
 * problem-round, and the ProblemEvaluated event. */
import type { Problem, TestCase } from '../../core/problem.js';
import { canonicalJson } from '../../core/canonical-json.js';
import type { NewEvent } from '../../events/envelope.js';
import { parseMatrix, type ExecutionMatrix, type TestStatus } from '../../rewards/matrix.js';
import type { RunEnv } from '../env.js';
import type { ProblemRound } from '../judge-state.js';
import type { JudgedTest, Pair, RewardItem, Verdicts } from './contract.js';
import { requestBody } from '../../events/catalog.js';
import { candidateTallies, evaluationFigures, mean } from './evaluation.js';

export const GT_SUITE = 'gt';

/** The dataset's tests a method may train on: public examples and generated tests, never the
 * held-out official tests (they only measure). */
export async function groundTruthTests(env: RunEnv, problem: Problem): Promise<{ testId: string; testHash: string }[]> {
  const tests: TestCase[] = [...problem.tests.public, ...problem.tests.generated];
  const out = [];
  for (const [i, t] of tests.entries()) out.push({ testId: `${GT_SUITE}/${i}`, testHash: await env.blobs.put(canonicalJson(t)) });
  return out;
}

/** Every program of the round on every given test. */
export function allPairs(p: ProblemRound, tests: readonly { testId: string; testHash: string }[]): Pair[] {
  return p.solutions.flatMap((s) => tests.map((t) => ({ programId: s.solutionId, programHash: s.programHash, testId: t.testId, testHash: t.testHash })));
}

export interface MatrixTest {
  id: string;
  suite: string;
  status?: TestStatus;
}

/** The matrix of the round's programs on `tests`, from the verdicts of one request. */
export function matrixOf(p: ProblemRound, tests: readonly MatrixTest[], verdicts: Verdicts): ExecutionMatrix {
  const cells = new Map(verdicts.map((v) => [`${v.programId}\u0000${v.testId}`, v.verdict]));
  return parseMatrix({
    programs: p.solutions.map((s) => ({ id: s.solutionId })),
    tests: tests.map((t) => ({ id: t.id, suite: t.suite, status: t.status ?? 'valid' })),
    verdicts: p.solutions.map((s) => tests.map((t) => cells.get(`${s.solutionId}\u0000${t.id}`) ?? null)),
  });
}

export const suiteOf = (testId: string) => testId.slice(0, testId.lastIndexOf('/'));

/** RewardsAssigned for both roles and ProblemEvaluated, in the order every method writes them. */
export function judgedEvents(args: {
  env: RunEnv;
  problem: Problem;
  round: ProblemRound;
  verdicts: (requestId: string) => Verdicts;
  judged: readonly JudgedTest[];
  rewardFn: string;
  code: RewardItem[];
  test: RewardItem[];
  /** Tests counted valid for the table (default: those with an oracleHash). */
  validCount?: number;
  extra?: NewEvent[];
}): NewEvent[] {
  const { env, problem, round: p, judged } = args;
  const base = { round: p.round, problemId: p.problemId };
  const usableBySuite = new Map(
    p.suites.map((s) => [s.suiteId, judged.filter((t) => t.oracleHash && suiteOf(t.testId) === s.suiteId).map((t) => t.oracleHash!)]),
  );
  return [
    env.event('RewardsAssigned', { ...base, role: 'code', rewardFn: args.rewardFn, items: args.code }),
    env.event('RewardsAssigned', { ...base, role: 'test', rewardFn: args.rewardFn, items: args.test }),
    ...(args.extra ?? []),
    env.event('ProblemEvaluated', {
      ...base,
      ...evaluationFigures(problem, p, args.verdicts, usableBySuite),
      tests: {
        sampled: p.suites.reduce((n, s) => n + s.tests.length, 0),
        wellFormed: judged.filter((t) => t.reason !== 'malformed').length,
        valid: args.validCount ?? judged.filter((t) => t.oracleHash).length,
      },
      mistakeBook: { size: 0 },
      rewards: { code: mean(args.code.map((c) => c.reward)), test: mean(args.test.map((t) => t.reward)) },
      candidates: candidateTallies(p, args.verdicts),
    }),
  ];
}

/** Suites that are not trained on: recorded with their reward, advantage 0, not selected. */
export function untrainedSuites(p: ProblemRound, reward = 0): RewardItem[] {
  return p.suites.map((s) => ({ sampleId: s.suiteId, reward, advantage: 0, components: { selected: 0 } }));
}

/** A suite's test as sampled, with its parsed content when it is well-formed. */
export interface SampledTest {
  testId: string;
  testHash: string;
  suiteId: string;
  test: TestCase | null;
}

export async function sampledTests(env: RunEnv, p: ProblemRound): Promise<SampledTest[]> {
  const out: SampledTest[] = [];
  for (const s of p.suites) {
    for (const t of s.tests) {
      const test = t.wellFormed ? (JSON.parse(await env.blobs.getText(t.testHash)) as TestCase) : null;
      out.push({ testId: t.testId, testHash: t.testHash, suiteId: s.suiteId, test });
    }
  }
  return out;
}

/** A plan's events: the judged tests, then one execution request per purpose, in order. A pair
 * is executed once in a run: a later request of the plan, or a pair recorded in an earlier
 * round, reuses the verdict (`split`, see splitReused), decided here so that it is in the log. */
export async function planEvents(
  env: RunEnv,
  p: ProblemRound,
  judged: JudgedTest[],
  requests: readonly (readonly ['reward' | 'heldout' | 'kill', Pair[]])[],
  split: (pairs: readonly Pair[], planned: Set<string>) => Promise<{ pairs: Pair[]; reused: Pair[] }>,
): Promise<NewEvent[]> {
  const base = { round: p.round, problemId: p.problemId };
  const planned = new Set<string>();
  const events = [env.event('TestsJudged', { ...base, tests: judged })];
  // In order: a pair in two requests is executed by the first.
  for (const [purpose, pairs] of requests) {
    const s = await split(pairs, planned);
    events.push(env.event('ExecutionRequested', { ...base, requestId: `${p.key}/${purpose}`, purpose, ...requestBody(s.pairs, s.reused) }));
  }
  return events;
}
