/**
 * Code-A1's judgement (and the self-play baseline's, which shares its loop): the reference
 * judges each stated test, then rewards, TOPVAR and the Mistake Book. Everything numeric is
 * computed by the pure functions of src/rewards on an execution matrix built here.
 */
import type { Problem, TestCase } from '../core/problem.js';
import { withExpectedOutput } from '../core/problem.js';
import type { Verdict } from '../core/verdicts.js';
import type { EventData, ExecutionPair } from '../events/catalog.js';
import type { NewEvent } from '../events/envelope.js';
import {
  codeA1CodeSelection,
  codeA1HasExpected,
  codeA1InvalidCount,
  codeA1JudgeTests,
  codeA1ProgramValid,
  codeA1Rewards,
  codeA1TopVarSuites,
  type CodeA1Suite,
  type GeneratedTestRecord,
} from '../rewards/code-a1.js';
import { type ExecutionMatrix, type ExecutionMatrixInput, parseMatrix, type TestStatus } from '../rewards/matrix.js';
import {
  topTests,
  updateMistakeBook,
  type MistakeBookOptionsInput,
  type MistakeBookState,
  type MistakeBookUpdate,
  type MistakeObservation,
} from '../rewards/mistake-book.js';
import { normalizeTestKey } from '../rewards/test-key.js';
import { groupAdvantages } from '../rewards/grpo.js';
import type { RunEnv } from './env.js';
import type { ProblemRound } from './judge-state.js';
import { canonicalJson } from '../core/canonical-json.js';
import { sha256Hex } from '../events/blobs.js';
import { readAssertComparison } from '../core/python-text.js';
import { readReferenceProbe, referenceProbeProgram, referenceProbeTest } from './reference-probe.js';
import { candidateTallies, evaluationFigures, evaluationPairs, mean } from './methods/evaluation.js';
import { planEvents } from './methods/common.js';
import type { BasisArgs, JudgeArgs, JudgementSteps, MethodJudgement, PlanArgs, Verdicts } from './methods/contract.js';
import type { ModuleLoad } from '../core/module-load.js';

type Pair = ExecutionPair;
type JudgedTest = EventData<'TestsJudged'>['tests'][number];

const HIST_SUITE = 'mistake-book';

/** Whether a generated test goes to the reference: well-formed and stating an expected value. */
export async function needsOracle(env: RunEnv, test: { wellFormed: boolean; testHash: string }): Promise<boolean> {
  if (!test.wellFormed) return false;
  return codeA1HasExpected(await env.test(test.testHash));
}

/** The test with the reference's output as its expected value. */
function withOracle(test: TestCase, output: string): TestCase | null {
  return withExpectedOutput(test, output);
}

/** An assert test's call and stated value, as written (needsOracle passed it: one `==`). */
function assertParts(test: TestCase): { call: string; expected: string } | null {
  if (test.style !== 'assert') return null;
  const r = readAssertComparison(test.code.replace(/;\s*$/, ''));
  return r === null ? null : { call: r.call, expected: r.expected };
}

/** The executions that give the reference's output for a test: the reference on the test
 * itself, or, for an assert test, the reference probe on its call (./reference-probe.ts). The
 * programs' blobs are put once per use, and only when needed. */
function oracleRuns(env: RunEnv, reference: string) {
  let referenceHash: Promise<string> | null = null;
  let probeHash: Promise<string> | null = null;
  return {
    /** The pair to execute for a test (its blobs put). */
    async pair(test: TestCase, testHash: string): Promise<{ programHash: string; testHash: string }> {
      const parts = assertParts(test);
      if (parts === null) return { programHash: await (referenceHash ??= env.blobs.put(reference)), testHash };
      const probe = canonicalJson(referenceProbeTest(parts.call, parts.expected));
      const hash = await env.blobs.put(probe);
      env.rememberCheckedTest(hash, probe);
      return { programHash: await (probeHash ??= env.blobs.put(referenceProbeProgram(reference))), testHash: hash };
    },
    /** The test hash whose verdict answers a test (nothing put). */
    testHashOf(test: TestCase, testHash: string): string {
      const parts = assertParts(test);
      return parts === null ? testHash : sha256Hex(canonicalJson(referenceProbeTest(parts.call, parts.expected)));
    },
  };
}

/**
 * Code-A1 validity of every sampled test from the reference's verdicts, with the GT-corrected
 * test (as a blob) of each usable one. The corrected test states the reference's output: a
 * stdio or call test takes the output as its expected value; an assert test becomes
 * `assert <call> == <repr of the reference's value>`, the call as Python writes it, whether or
 * not the stated value was right (the release's statement, and so its duplicate and Mistake Book
 * key). A stated value that differs from the reference's output makes the test corrected:
 * counted invalid, still used with the reference's output.
 */
export async function judgeAgainstReference(env: RunEnv, problem: Problem, p: ProblemRound, oracle: Verdicts): Promise<JudgedTest[]> {
  const runs = oracleRuns(env, problem.solutions[0] ?? '');
  const byHash = new Map(oracle.map((v) => [v.testHash, v]));
  // Each test with the reference's verdict and, when usable, its GT-corrected form; duplicates
  // are then found on the corrected statement (after the oracle), as the release does.
  const records: GeneratedTestRecord[] = [];
  const correctedOf = new Map<string, string>();
  for (const suite of p.suites) {
    for (const t of suite.tests) {
      const hasExpected = await needsOracle(env, t);
      const original = hasExpected ? await env.test(t.testHash) : null;
      const parts = original ? assertParts(original) : null;
      const run = original ? byHash.get(runs.testHashOf(original, t.testHash)) : undefined;
      let verdict = run?.verdict ?? null;
      let fixed: TestCase | null = null;
      if (run && (run.verdict === 'accepted' || run.verdict === 'wrong_answer') && run.outputHash) {
        const output = await env.blobs.getText(run.outputHash);
        if (parts === null) fixed = withOracle(original!, output);
        else {
          // The probe ran to the end: what it read decides the verdict on the test as stated.
          const probe = readReferenceProbe(output);
          if (probe.kind === 'returned') {
            fixed = { style: 'assert', code: `assert ${probe.call ?? parts.call} == ${probe.repr}` };
            verdict = probe.matchesStated ? 'accepted' : 'wrong_answer';
          } else verdict = probe.kind === 'raised' ? 'runtime_error' : 'sandbox_error';
        }
      } else if (run && parts !== null && run.verdict === 'accepted') verdict = 'sandbox_error'; // a probe without output
      let correctedKey: string | null = null;
      if (fixed !== null) {
        const text = canonicalJson(fixed);
        correctedKey = await env.blobs.put(text);
        // A checked test with the reference's output as its expected value: a test as well.
        env.rememberCheckedTest(correctedKey, text);
        correctedOf.set(t.testId, correctedKey);
      }
      records.push({ id: t.testId, suite: suite.suiteId, wellFormed: t.wellFormed, hasExpected, reference: verdict, correctedKey });
    }
  }
  const testHashOf = new Map(p.suites.flatMap((s) => s.tests.map((t) => [t.testId, t.testHash] as const)));
  const judged: JudgedTest[] = codeA1JudgeTests(records).map((j) => {
    const usable = j.status === 'valid' || j.status === 'corrected';
    return {
      testId: j.id,
      testHash: testHashOf.get(j.id)!,
      valid: usable,
      reason: j.reason,
      status: j.status,
      oracleHash: usable ? correctedOf.get(j.id)! : null,
    };
  });
  return judged;
}

export async function planEvaluation(args: {
  env: RunEnv;
  problem: Problem;
  round: ProblemRound;
  oracle: Verdicts;
  book: MistakeBookState;
  /** Leaves out of a request the pairs already recorded or planned (see splitReused). */
  split(pairs: readonly Pair[], planned: Set<string>): Promise<{ pairs: Pair[]; reused: Pair[] }>;
}): Promise<NewEvent[]> {
  const { env, problem, round: p, oracle, book } = args;
  const judged = await judgeAgainstReference(env, problem, p, oracle);

  const history = env.config.mistakeBook.enabled ? topTests(book, env.config.mistakeBook.replay) : [];
  const reward: { programId: string; programHash: string; testId: string; testHash: string }[] = [];
  // Each suite's usable tests, found once: every test against every suite's prefix was
  // (suites x tests) string checks per problem, 32k at Code-A1's size.
  const usableOf = new Map<string, JudgedTest[]>(p.suites.map((suite) => [suite.suiteId, []]));
  for (const t of judged) {
    if (!t.oracleHash) continue;
    // Every suite whose id and a '/' begin the test's id, as startsWith(`${suiteId}/`) finds them.
    for (let i = t.testId.indexOf('/'); i >= 0; i = t.testId.indexOf('/', i + 1)) usableOf.get(t.testId.slice(0, i))?.push(t);
  }
  for (const s of p.solutions) {
    for (const suite of p.suites.filter((x) => x.targetSolutionId === s.solutionId)) {
      for (const t of usableOf.get(suite.suiteId)!) {
        reward.push({ programId: s.solutionId, programHash: s.programHash, testId: t.testId, testHash: t.oracleHash! });
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
  const { heldout, kill } = await evaluationPairs(
    env,
    problem,
    p,
    judged.filter((t) => t.oracleHash).map((t) => t.oracleHash!),
  );
  return planEvents(
    env,
    p,
    judged,
    [
      ['reward', reward],
      ['heldout', heldout],
      ['kill', kill],
    ],
    args.split,
  );
}

const cellKey = (programId: string, testId: string) => `${programId}\u0000${testId}`;

/** What a Code-A1 judgement derives from the recorded verdicts alone, under any settings: the
 * execution matrix, the suites, the Mistake Book observations and the evaluation figures.
 * Re-judging a problem-round under several settings (ablation) computes it once. */
export interface CodeA1Basis {
  readonly matrix: ExecutionMatrix;
  readonly suites: readonly CodeA1Suite[];
  /** Every valid program's verdict on every usable test it ran, and the reference's replays
   * (asked for only when the Mistake Book is on: it reads the tests' text). */
  observations(): Promise<readonly MistakeObservation[]>;
  /** The book's update by this round's observations under `options`: the same book object and
   * options give the same update object (judgements under settings that leave the Mistake Book
   * alone share it). */
  bookUpdate(book: MistakeBookState, round: number, options: MistakeBookOptionsInput): Promise<MistakeBookUpdate>;
  readonly figures: ReturnType<typeof evaluationFigures>;
  readonly tests: { sampled: number; wellFormed: number; valid: number };
  /** The basis of the same reward request without its Mistake Book replays (what a judgement
   * with no replay reads): this one's matrix less the replayed columns, derived, not built again. */
  withoutReplays(): CodeA1Basis;
}

export async function codeA1Basis(args: BasisArgs): Promise<CodeA1Basis> {
  const { problem, round: p } = args;
  const judged = p.judgedTests ?? [];
  const rewardRuns = args.verdicts(`${p.key}/reward`);
  const cells = new Map(rewardRuns.map((v) => [cellKey(v.programId, v.testId), v.verdict]));

  // The matrix: solutions x (usable generated tests, by suite; then the replayed Mistake Book tests).
  const statusOf = (t: JudgedTest): TestStatus => t.status;
  const suiteOf = (testId: string) => testId.slice(0, testId.lastIndexOf('/'));
  const judgedBySuite = new Map<string, JudgedTest[]>();
  for (const t of judged) {
    const suite = suiteOf(t.testId);
    const list = judgedBySuite.get(suite);
    if (list) list.push(t);
    else judgedBySuite.set(suite, [t]);
  }
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
  // A valid program is one whose module body ran to the end, as its recorded executions tell
  // (stdin/stdout programs have no separate body: unknown, judged from their row).
  const loadOf = (programHash: string): ModuleLoad => (problem.style === 'stdio' ? 'unknown' : args.load(programHash));
  const programValid = (i: number, row: readonly (Verdict | null)[]) => codeA1ProgramValid(loadOf(p.solutions[i]!.programHash), row);
  const matrix = parseMatrix({
    ...matrixInput,
    programs: programs.map((prog, i) => ({ ...prog, valid: programValid(i, matrixInput.verdicts[i]!) })),
  });

  const suites = p.suites.map((s) => ({
    id: s.suiteId,
    program: s.targetSolutionId ?? p.solutions[0]!.solutionId,
    invalidCount: codeA1InvalidCount(judgedBySuite.get(s.suiteId) ?? []),
    nonprintableRatio: s.nonprintableRatio,
  }));

  // The generated tests' Mistake Book keys (read from their text), shared with the basis
  // without replays.
  let genKeys: Promise<Map<string, { key: string; hash: string }>> | null = null;
  const generatedKeys = async (): Promise<Map<string, { key: string; hash: string }>> => {
    const keyOf = new Map<string, { key: string; hash: string }>();
    for (const t of genTests) keyOf.set(t.testId, { key: normalizeTestKey(await args.blobs.getText(t.oracleHash!)), hash: t.oracleHash! });
    return keyOf;
  };

  // Evaluation figures for the table.
  const usableBySuite = new Map(
    p.suites.map((suite) => [suite.suiteId, (judgedBySuite.get(suite.suiteId) ?? []).filter((t) => t.oracleHash).map((t) => t.oracleHash!)]),
  );
  const figures = (args.evaluation ?? ((f) => f()))(() => evaluationFigures(problem, p, args.verdicts, usableBySuite));
  const testCounts = {
    sampled: p.suites.reduce((n, s) => n + s.tests.length, 0),
    wellFormed: judged.filter((t) => t.reason !== 'malformed').length,
    valid: genTests.length,
  };

  const basisOf = (matrix: ExecutionMatrix, histIds: readonly string[], referenceRuns: Verdicts): CodeA1Basis => {
    let observed: Promise<MistakeObservation[]> | null = null;
    const observe = async (): Promise<MistakeObservation[]> => {
      const observations: MistakeObservation[] = [];
      const keyOf = new Map(await (genKeys ??= generatedKeys()));
      for (const id of histIds) keyOf.set(id, { key: id.slice(HIST_SUITE.length + 1), hash: histHash.get(id)! });
      matrix.programs.forEach((prog, pi) => {
        matrix.tests.forEach((t, ti) => {
          const v = matrix.verdicts[pi]![ti];
          if (v === null || v === undefined) return;
          const k = keyOf.get(t.id)!;
          observations.push({
            testKey: k.key,
            testHash: k.hash,
            programValid: prog.valid,
            testValid: true,
            verdict: v,
            origin: t.suite === HIST_SUITE ? 'replay' : 'generated',
          });
        });
      });
      for (const v of referenceRuns) {
        const k = keyOf.get(v.testId);
        if (k)
          observations.push({ testKey: k.key, testHash: k.hash, programValid: true, testValid: true, verdict: v.verdict, isReference: true, origin: 'replay' });
      }
      return observations;
    };

    const updates = new WeakMap<MistakeBookState, Map<string, Promise<MistakeBookUpdate>>>();
    const bookUpdate = (book: MistakeBookState, round: number, options: MistakeBookOptionsInput): Promise<MistakeBookUpdate> => {
      let byOptions = updates.get(book);
      if (!byOptions) updates.set(book, (byOptions = new Map()));
      const key = canonicalJson({ round, options });
      let out = byOptions.get(key);
      if (!out) byOptions.set(key, (out = (observed ??= observe()).then((observations) => updateMistakeBook(book, { round, observations }, options))));
      return out;
    };

    let bare: CodeA1Basis | null = null;
    const basis: CodeA1Basis = {
      matrix,
      suites,
      observations: () => (observed ??= observe()),
      bookUpdate,
      figures,
      tests: testCounts,
      withoutReplays: () =>
        (bare ??=
          histIds.length === 0
            ? basis
            : basisOf(
                withoutReplayColumns(matrix, genTests.length, programValid),
                [],
                referenceRuns.filter((v) => !v.testId.startsWith(`${HIST_SUITE}/`)),
              )),
    };
    return basis;
  };
  // The reference runs only the replayed tests (for the blacklist).
  return basisOf(
    matrix,
    histIds,
    rewardRuns.filter((v) => v.programId === 'reference'),
  );
}

/** `matrix` with only its first `kept` tests (the replayed ones come last), each program's
 * validity judged again on its shorter row. Not validated again: fewer columns of a valid matrix
 * are a valid matrix. */
function withoutReplayColumns(
  matrix: ExecutionMatrix,
  kept: number,
  valid: (program: number, row: ExecutionMatrix['verdicts'][number]) => boolean,
): ExecutionMatrix {
  const verdicts = matrix.verdicts.map((row) => row.slice(0, kept));
  return {
    programs: matrix.programs.map((prog, i) => ({ ...prog, valid: valid(i, verdicts[i]!) })),
    tests: matrix.tests.slice(0, kept),
    verdicts,
  };
}

/** Rewards, advantages, TOPVAR, the Mistake Book change and the evaluation, under `env.config`. */
export async function judgeWithBasis(
  basis: CodeA1Basis,
  args: {
    env: RunEnv;
    round: ProblemRound;
    book: MistakeBookState;
    /** The verdicts of this judgement's requests (the candidates' tallies count them). */
    verdicts: (requestId: string) => Verdicts;
    /** Self-play (one model, no separation): a suite is rewarded with its program's R_code, the
     * objective both roles of a single model share, instead of Code-A1's attack reward. */
    shared?: boolean;
  },
): Promise<NewEvent[]> {
  const { env, round: p, book } = args;
  const cfg = env.config;
  const { matrix, suites } = basis;
  const result = codeA1Rewards(
    { matrix, suites },
    { alpha: cfg.rewards.alpha, suiteCap: cfg.sampling.suiteSize, histCap: cfg.mistakeBook.replay || 8, histSuite: HIST_SUITE },
  );

  // Code policy: one group per problem.
  const rCodes = result.programs.map((r) => r.rCode);
  const { kept: keepCode, advantages: codeAdv } = codeA1CodeSelection(rCodes, { std: cfg.rewards.std, filterUniform: cfg.codeA1.codeGroupFilter });
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
  const selected = new Set(
    cfg.selection.testSamples === 'topvar' ? codeA1TopVarSuites(result, 1) : result.programs.flatMap((r) => r.suites.map((s) => s.suite)),
  );
  const groups = cfg.sampling.whiteBox ? result.programs.map((r) => r.suites) : [result.programs.flatMap((r) => r.suites)];
  const testItems: { sampleId: string; reward: number; advantage: number; components: Record<string, number> }[] = [];
  const rCodeOf = new Map(result.programs.map((r) => [r.program, r.rCode]));
  const testReward = (s: (typeof groups)[number][number]) => (args.shared ? rCodeOf.get(s.program)! : s.rTest);
  for (const group of groups) {
    const adv = groupAdvantages(group.map(testReward), { std: cfg.rewards.std });
    group.forEach((s, i) => {
      testItems.push({
        sampleId: s.suite,
        reward: testReward(s),
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
    const mb = cfg.mistakeBook;
    const update = await basis.bookUpdate(book, p.round, {
      cap: mb.cap,
      decay: mb.decay > 0 ? { every: 1, amount: mb.decay } : null,
      blacklistOnReferenceFail: mb.blacklist,
      sources: cfg.codeA1.mistakeBookRule === 'release' ? 'code-a1' : 'any',
    });
    bookSize = update.state.entries.filter((e) => !e.blacklisted).length;
    if (update.changes.length > 0) events.push(env.event('MistakeBookUpdated', { ...base, changes: update.changes }));
  }

  events.unshift(
    env.event('RewardsAssigned', { ...base, role: 'code', rewardFn: result.rewardId, items: codeItems }),
    env.event('RewardsAssigned', { ...base, role: 'test', rewardFn: args.shared ? 'self-play/v1' : result.rewardId, items: testItems }),
  );
  events.push(
    env.event('ProblemEvaluated', {
      ...base,
      ...basis.figures,
      tests: basis.tests,
      mistakeBook: { size: bookSize },
      rewards: { code: mean(rCodes), test: mean(testItems.map((t) => t.reward)) },
      candidates: candidateTallies(p, args.verdicts),
    }),
  );
  return events;
}

export async function judgeProblem(args: JudgeArgs & { shared?: boolean }): Promise<NewEvent[]> {
  return judgeWithBasis(await codeA1Basis({ ...args, blobs: args.env.blobs }), args);
}

/** The reference on each distinct test that states an expected value (an assert test: the
 * reference probe on its call): oracle outputs and validity. */
export async function referenceOracle(env: RunEnv, problem: Problem, p: ProblemRound): Promise<Pair[]> {
  const reference = problem.solutions[0];
  if (reference === undefined) throw new Error(`problem ${p.problemId} has no reference solution: ${env.config.method} needs one`);
  const runs = oracleRuns(env, reference);
  const seen = new Set<string>();
  const pairs: Pair[] = [];
  for (const suite of p.suites) {
    for (const t of suite.tests) {
      // A test without an expected value is invalid whatever the reference does: not run.
      if (seen.has(t.testHash) || !(await needsOracle(env, t))) continue;
      seen.add(t.testHash);
      const run = await runs.pair(await env.test(t.testHash), t.testHash);
      pairs.push({ programId: 'reference', programHash: run.programHash, testId: t.testId, testHash: run.testHash });
    }
  }
  return pairs;
}

/** The two steps of Code-A1's judgement, for judging one problem-round under several settings. */
export const codeA1Steps: JudgementSteps<CodeA1Basis> = {
  basis: (a) => codeA1Basis(a),
  finish: (basis, a) => judgeWithBasis(basis, a),
  withoutReplays: (basis) => basis.withoutReplays(),
};

export const codeA1: MethodJudgement = {
  oracle: referenceOracle,
  plan: (a: PlanArgs) => planEvaluation(a),
  judge: (a: JudgeArgs) => judgeProblem(a),
  steps: codeA1Steps,
};

/** Self-play baseline: Code-A1's loop with one objective for both roles (no separation). */
export const selfPlay: MethodJudgement = {
  oracle: referenceOracle,
  plan: (a: PlanArgs) => planEvaluation(a),
  judge: (a: JudgeArgs) => judgeProblem({ ...a, shared: true }),
  steps: { ...codeA1Steps, finish: (basis, a) => judgeWithBasis(basis, { ...a, shared: true }) },
};
