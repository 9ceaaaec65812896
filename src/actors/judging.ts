/**
 * The Judge's two effectful steps, kept apart from its machine. Everything numeric is computed
 * by the pure functions of src/rewards on an execution matrix built here from the verdicts.
 */
import type { Problem, TestCase } from '../core/problem.js';
import { TestCase as TestCaseSchema } from '../core/problem.js';
import type { EventData } from '../events/catalog.js';
import type { NewEvent } from '../events/envelope.js';
import type { Verdict } from '../core/verdicts.js';
import { codeA1Rewards, codeA1TopVarSuites, codeA1KeepCodeGroup } from '../rewards/code-a1.js';
import { inferProgramValid, outcomeOf, type ExecutionMatrixInput, parseMatrix, type TestStatus } from '../rewards/matrix.js';
import { topTests, updateMistakeBook, type MistakeBookState, type MistakeObservation } from '../rewards/mistake-book.js';
import { normalizeTestKey } from '../rewards/test-key.js';
import { groupAdvantages } from '../rewards/grpo.js';
import type { RunEnv } from './env.js';
import type { ProblemRound } from './judge-state.js';
import { canonicalJson } from '../core/canonical-json.js';

type Pair = EventData<'ExecutionRequested'>['pairs'][number];
type Verdicts = EventData<'ExecutionCompleted'>[];
type JudgedTest = EventData<'TestsJudged'>['tests'][number];
type Reason = JudgedTest['reason'];

const HIST_SUITE = 'mistake-book';

/** What the reference's run says about a generated test. */
function validityOf(verdict: Verdict | undefined): { status: TestStatus; reason: Reason } {
  switch (verdict) {
    case 'accepted':
      return { status: 'valid', reason: 'ok' };
    // The test stated an expected value and the reference disagrees: GT's output is the oracle.
    case 'wrong_answer':
      return { status: 'corrected', reason: 'expected-mismatch' };
    case 'time_limit':
      return { status: 'invalid', reason: 'reference-timeout' };
    case 'sandbox_error':
    case undefined:
      return { status: 'unknown', reason: 'reference-sandbox-error' };
    default:
      return { status: 'invalid', reason: 'reference-raises' };
  }
}

/** A call test's output is the JSON of the returned value; a truncated one is unusable. */
function fromOutput(output: string): unknown {
  try {
    return JSON.parse(output) as unknown;
  } catch {
    return undefined;
  }
}

/** The test with the reference's output as its expected value. */
function withOracle(test: TestCase, output: string): TestCase | null {
  if (test.style === 'stdio') return { ...test, output };
  if (test.style === 'call') {
    const expected = fromOutput(output);
    return expected === undefined ? null : { ...test, expected };
  }
  return test;
}

export async function planEvaluation(args: {
  env: RunEnv;
  problem: Problem;
  round: ProblemRound;
  oracle: Verdicts;
  book: MistakeBookState;
  /** Leaves out of a request the pairs already recorded or planned (see splitReused). */
  split(pairs: readonly Pair[], planned: Set<string>): { pairs: Pair[]; reused: Pair[] };
}): Promise<NewEvent[]> {
  const { env, problem, round: p, oracle, book } = args;
  const byHash = new Map(oracle.map((v) => [v.testHash, v]));
  const judged: JudgedTest[] = [];
  /** Usable tests by suite, GT-corrected: what programs are rewarded on. */
  const corrected = new Map<string, string>();
  for (const suite of p.suites) {
    const seen = new Set<string>();
    for (const t of suite.tests) {
      if (!t.wellFormed) {
        judged.push({ testId: t.testId, testHash: t.testHash, valid: false, reason: 'malformed', status: 'invalid', oracleHash: null });
        continue;
      }
      if (seen.has(t.testHash)) {
        judged.push({ testId: t.testId, testHash: t.testHash, valid: false, reason: 'duplicate', status: 'invalid', oracleHash: null });
        continue;
      }
      seen.add(t.testHash);
      const run = byHash.get(t.testHash);
      let { status, reason } = validityOf(run?.verdict);
      let oracleHash: string | null = null;
      if (status === 'valid' || status === 'corrected') {
        const original = TestCaseSchema.parse(JSON.parse(await env.blobs.getText(t.testHash)));
        const output = run?.outputHash ? await env.blobs.getText(run.outputHash) : null;
        const fixed = output === null ? null : withOracle(original, output);
        if (fixed === null) {
          ({ status, reason } = { status: 'unknown', reason: 'reference-sandbox-error' });
        } else {
          oracleHash = await env.blobs.put(canonicalJson(fixed));
          corrected.set(t.testHash, oracleHash);
        }
      }
      judged.push({ testId: t.testId, testHash: t.testHash, valid: status === 'valid' || status === 'corrected', reason, oracleHash, status });
    }
  }

  const history = env.config.mistakeBook.enabled ? topTests(book, env.config.mistakeBook.replay) : [];
  const reward: { programId: string; programHash: string; testId: string; testHash: string }[] = [];
  for (const s of p.solutions) {
    for (const suite of p.suites.filter((x) => x.targetSolutionId === s.solutionId)) {
      for (const t of judged) {
        if (t.oracleHash && t.testId.startsWith(`${suite.suiteId}/`)) {
          reward.push({ programId: s.solutionId, programHash: s.programHash, testId: t.testId, testHash: t.oracleHash });
        }
      }
    }
    for (const h of history) reward.push({ programId: s.solutionId, programHash: s.programHash, testId: `${HIST_SUITE}/${h.testKey}`, testHash: h.testHash });
  }
  // The reference replays the stored tests too: one it now fails (a test on the edge of the time
  // limit, say) is blacklisted instead of punishing every candidate.
  if (history.length > 0 && env.config.mistakeBook.blacklist) {
    const referenceHash = await env.blobs.put(problem.solutions[0]!);
    for (const h of history) reward.push({ programId: 'reference', programHash: referenceHash, testId: `${HIST_SUITE}/${h.testKey}`, testHash: h.testHash });
  }
  const heldout: typeof reward = [];
  const officialHashes = [];
  for (const t of problem.tests.private) officialHashes.push(await env.blobs.put(canonicalJson(t)));
  for (const s of p.solutions) {
    officialHashes.forEach((testHash, i) => heldout.push({ programId: s.solutionId, programHash: s.programHash, testId: `heldout/${i}`, testHash }));
  }
  const kill: typeof reward = [];
  const distinct = [...new Set(judged.filter((t) => t.oracleHash).map((t) => t.oracleHash!))];
  for (const [i, program] of problem.incorrectSolutions.entries()) {
    const programHash = await env.blobs.put(program);
    for (const testHash of distinct) kill.push({ programId: `incorrect/${i}`, programHash, testId: `oracle/${testHash.slice(0, 16)}`, testHash });
  }
  const base = { round: p.round, problemId: p.problemId };
  // One pair is executed once in a run: later requests of this plan, and pairs recorded in
  // earlier rounds, reuse the verdict instead (decided here, so it is in the log).
  const planned = new Set<string>();
  return [
    env.event('TestsJudged', { ...base, tests: judged }),
    env.event('ExecutionRequested', { ...base, requestId: `${p.key}/reward`, purpose: 'reward', ...args.split(reward, planned) }),
    env.event('ExecutionRequested', { ...base, requestId: `${p.key}/heldout`, purpose: 'heldout', ...args.split(heldout, planned) }),
    env.event('ExecutionRequested', { ...base, requestId: `${p.key}/kill`, purpose: 'kill', ...args.split(kill, planned) }),
  ];
}

const cellKey = (programId: string, testId: string) => `${programId}\u0000${testId}`;

export async function judgeProblem(args: {
  env: RunEnv;
  problem: Problem;
  round: ProblemRound;
  book: MistakeBookState;
  verdicts: (requestId: string) => Verdicts;
}): Promise<NewEvent[]> {
  const { env, problem, round: p, book } = args;
  const cfg = env.config;
  const judged = p.judgedTests ?? [];
  const rewardRuns = args.verdicts(`${p.key}/reward`);
  const cells = new Map(rewardRuns.map((v) => [cellKey(v.programId, v.testId), v.verdict]));

  // The matrix: solutions x (usable generated tests, by suite; then the replayed Mistake Book tests).
  const statusOf = (t: JudgedTest): TestStatus => t.status;
  const suiteOf = (testId: string) => testId.slice(0, testId.lastIndexOf('/'));
  const genTests = judged.filter((t) => t.oracleHash);
  const histIds = [...new Set(rewardRuns.filter((v) => v.testId.startsWith(`${HIST_SUITE}/`)).map((v) => v.testId))];
  const histHash = new Map(rewardRuns.filter((v) => v.testId.startsWith(`${HIST_SUITE}/`)).map((v) => [v.testId, v.testHash]));
  const tests = [
    ...genTests.map((t) => ({ id: t.testId, suite: suiteOf(t.testId), status: statusOf(t) })),
    ...histIds.map((id) => ({ id, suite: HIST_SUITE, status: 'valid' as const })),
  ];
  const programs = p.solutions.map((s) => ({ id: s.solutionId }));
  const matrixInput: ExecutionMatrixInput = {
    programs,
    tests,
    verdicts: programs.map((prog) => tests.map((t) => cells.get(cellKey(prog.id, t.id)) ?? null)),
  };
  let matrix = parseMatrix(matrixInput);
  // A program whose module does not load is not a "valid program" in Code-A1's sense.
  matrix = parseMatrix({ ...matrixInput, programs: programs.map((prog, i) => ({ ...prog, valid: inferProgramValid(matrix, i) })) });

  const suites = p.suites.map((s) => ({
    id: s.suiteId,
    program: s.targetSolutionId ?? p.solutions[0]!.solutionId,
    invalidCount: judged.filter((t) => suiteOf(t.testId) === s.suiteId && statusOf(t) !== 'valid' && statusOf(t) !== 'unknown').length,
    nonprintableRatio: s.nonprintableRatio,
  }));
  const result = codeA1Rewards({ matrix, suites }, { alpha: cfg.rewards.alpha, suiteCap: cfg.sampling.suiteSize, histCap: cfg.mistakeBook.replay || 8, histSuite: HIST_SUITE });

  // Code policy: one group per problem.
  const rCodes = result.programs.map((r) => r.rCode);
  const keepCode = codeA1KeepCodeGroup(rCodes);
  const codeAdv = keepCode ? groupAdvantages(rCodes, { std: cfg.rewards.std }) : rCodes.map(() => 0);
  const codeItems = result.programs.map((r, i): { sampleId: string; reward: number; advantage: number; components: Record<string, number> } => {
    const s = r.suites;
    return {
      sampleId: r.program,
      reward: r.rCode,
      advantage: codeAdv[i]!,
      components: {
        programValid: r.programValid ? 1 : 0,
        genPass: mean(s.map((x) => x.genPass)),
        histPass: mean(s.map((x) => x.histPass)),
        selected: keepCode ? 1 : 0,
      },
    };
  });

  // Test policy: white-box suites of one program share a prompt and form a group; black-box
  // suites all share the problem's prompt, so the problem's suites are one group.
  const selected = new Set(cfg.selection.testSamples === 'topvar' ? codeA1TopVarSuites(result, 1) : result.programs.flatMap((r) => r.suites.map((s) => s.suite)));
  const groups = cfg.sampling.whiteBox ? result.programs.map((r) => r.suites) : [result.programs.flatMap((r) => r.suites)];
  const testItems: { sampleId: string; reward: number; advantage: number; components: Record<string, number> }[] = [];
  for (const group of groups) {
    const adv = groupAdvantages(group.map((s) => s.rTest), { std: cfg.rewards.std });
    group.forEach((s, i) => {
      testItems.push({
        sampleId: s.suite,
        reward: s.rTest,
        advantage: adv[i]!,
        components: {
          validRatio: s.validRatio,
          genPass: s.genPass,
          genFail: s.genFail,
          histPass: s.histPass,
          histFail: s.histFail,
          pass: s.pass,
          attack: s.attack,
          nonprintableRatio: s.nonprintableRatio,
          selected: selected.has(s.suite) ? 1 : 0,
        },
      });
    });
  }

  // Mistake Book: every valid program's verdict on every usable test it ran.
  const events: NewEvent[] = [];
  const base = { round: p.round, problemId: p.problemId };
  let bookSize = book.entries.filter((e) => !e.blacklisted).length;
  if (cfg.mistakeBook.enabled) {
    const observations: MistakeObservation[] = [];
    const keyOf = new Map<string, { key: string; hash: string }>();
    for (const t of genTests) keyOf.set(t.testId, { key: normalizeTestKey(await env.blobs.getText(t.oracleHash!)), hash: t.oracleHash! });
    for (const id of histIds) keyOf.set(id, { key: id.slice(HIST_SUITE.length + 1), hash: histHash.get(id)! });
    matrix.programs.forEach((prog, pi) => {
      matrix.tests.forEach((t, ti) => {
        const v = matrix.verdicts[pi]![ti];
        if (v === null || v === undefined) return;
        const k = keyOf.get(t.id)!;
        observations.push({ testKey: k.key, testHash: k.hash, programValid: prog.valid, testValid: true, verdict: v, origin: t.suite === HIST_SUITE ? 'replay' : 'generated' });
      });
    });
    for (const v of rewardRuns) {
      if (v.programId !== 'reference') continue;
      const k = keyOf.get(v.testId);
      if (k) observations.push({ testKey: k.key, testHash: k.hash, programValid: true, testValid: true, verdict: v.verdict, isReference: true, origin: 'replay' });
    }
    const mb = cfg.mistakeBook;
    const update = updateMistakeBook(book, { round: p.round, observations }, { cap: mb.cap, decay: mb.decay > 0 ? { every: 1, amount: mb.decay } : null, blacklistOnReferenceFail: mb.blacklist });
    bookSize = update.state.entries.filter((e) => !e.blacklisted).length;
    if (update.changes.length > 0) events.push(env.event('MistakeBookUpdated', { ...base, changes: update.changes }));
  }

  // Evaluation figures for the table.
  const heldout = args.verdicts(`${p.key}/heldout`);
  const passedAll = p.solutions.filter((s) => {
    const mine = heldout.filter((v) => v.programId === s.solutionId);
    return mine.length > 0 && mine.every((v) => v.verdict === 'accepted');
  }).length;
  // Kill rate of one sampled suite: the share of known-incorrect programs that fail at least one
  // of its usable tests, averaged over suites (what a single draw of the adversary achieves).
  const failing = new Set(args.verdicts(`${p.key}/kill`).filter((v) => outcomeOf(v.verdict) === 'fail').map((v) => cellKey(v.programId, v.testHash)));
  let killed = 0;
  for (const suite of p.suites) {
    const hashes = judged.filter((t) => t.oracleHash && suiteOf(t.testId) === suite.suiteId).map((t) => t.oracleHash!);
    problem.incorrectSolutions.forEach((_, i) => {
      if (hashes.some((h) => failing.has(cellKey(`incorrect/${i}`, h)))) killed++;
    });
  }
  const sampled = p.suites.reduce((n, s) => n + s.tests.length, 0);

  events.unshift(
    env.event('RewardsAssigned', { ...base, role: 'code', rewardFn: result.rewardId, items: codeItems }),
    env.event('RewardsAssigned', { ...base, role: 'test', rewardFn: result.rewardId, items: testItems }),
  );
  events.push(
    env.event('ProblemEvaluated', {
      ...base,
      heldOut: { programs: p.solutions.length, passed: passedAll },
      kill: { targets: problem.incorrectSolutions.length, suites: p.suites.length, killed },
      tests: { sampled, wellFormed: judged.filter((t) => t.reason !== 'malformed').length, valid: genTests.length },
      mistakeBook: { size: bookSize },
      rewards: { code: mean(rCodes), test: mean(testItems.map((t) => t.reward)) },
    }),
  );
  return events;
}

function mean(xs: readonly number[]): number {
  if (xs.length === 0) return 0;
  let s = 0;
  for (const x of xs) s += x;
  return s / xs.length;
}
