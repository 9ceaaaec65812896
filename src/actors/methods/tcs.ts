/**
 * TCS (our reading of the abstract; every rule is a config key): only the test generator
 * trains, from a rolling policy-aligned buffer of its samples. The reference judges each stated
 * test (Code-A1's validity, expected values required).
 * - The buffer (per problem, src/rewards/tcs.ts rollTcsBuffer): this round's suites plus earlier
 *   rounds' suites written by test-policy versions >= current - `maxStaleness`, oldest dropped
 *   beyond `bufferSize` tests. Every program of the round runs every usable buffered test, so
 *   the buffer is judged against the current Solver.
 * - Stage 1: every buffered suite trains and earns the share of its tests consistent with the
 *   reference.
 * - Stage 2: the buffer is restricted to the Solver's current failure modes (suites holding a
 *   consistent test some current program fails); those train, each earning per test
 *   validityWeight * valid + counterexampleWeight * counterexample against the current programs.
 * The stage of each round is the Conductor's StageDecided event. Code programs are rewarded
 * (their pass rate on this round's usable tests, recorded) but never trained.
 */
import { countOutcomes, passVector, testVector } from '../../rewards/matrix.js';
import { groupAdvantages } from '../../rewards/grpo.js';
import { rollTcsBuffer, suitesAtFailureModes, tcsStage1Reward, tcsStage2Reward, type TcsBufferedSuite } from '../../rewards/tcs.js';
import type { JudgedTest, MethodJudgement, RewardItem } from './contract.js';
import { evaluationPairs, mean } from './evaluation.js';
import { allPairs, judgedEvents, matrixOf, suiteOf, planEvents } from './common.js';
import { judgeAgainstReference, referenceOracle } from '../judging.js';
import type { ProblemRound } from '../judge-state.js';

/** The buffer after the round's TestsJudged: the Judge folds it with this, and the plan computes
 * it with this before that event exists, so both see the same buffer. */
export function tcsBufferAfter(
  buffer: readonly TcsBufferedSuite[],
  p: Pick<ProblemRound, 'round' | 'testVersion' | 'suites'>,
  judged: readonly JudgedTest[],
  options: { bufferSize: number; maxStaleness: number | null },
): TcsBufferedSuite[] {
  const suites: TcsBufferedSuite[] = p.suites.map((s) => ({
    suiteId: s.suiteId,
    round: p.round,
    policyVersion: p.testVersion,
    tests: judged
      .filter((t) => suiteOf(t.testId) === s.suiteId)
      // The judged status says what the reference did with the test as stated.
      .map((t) => ({ testId: t.testId, testHash: t.oracleHash, consistent: t.status === 'valid' ? 1 : t.status === 'unknown' ? null : 0 })),
  }));
  return rollTcsBuffer(buffer, suites, p.testVersion, options);
}

const usableTests = (buffer: readonly TcsBufferedSuite[]) =>
  buffer.flatMap((s) => s.tests.filter((t) => t.testHash !== null).map((t) => ({ testId: t.testId, testHash: t.testHash!, suite: s.suiteId })));

export const tcs: MethodJudgement = {
  oracle: referenceOracle,
  async plan({ env, problem, round: p, oracle, split, tcsBuffer }) {
    const judged = await judgeAgainstReference(env, problem, p, oracle);
    const { bufferSize, maxStaleness } = env.config.tcs;
    const buffer = tcsBufferAfter(tcsBuffer ?? [], p, judged, { bufferSize, maxStaleness });
    const usable = judged.filter((t) => t.oracleHash).map((t) => t.oracleHash!);
    const { heldout, kill } = await evaluationPairs(env, problem, p, usable);
    return planEvents(
      env,
      p,
      judged,
      [
        ['reward', allPairs(p, usableTests(buffer))],
        ['heldout', heldout],
        ['kill', kill],
      ],
      split,
    );
  },
  async judge({ env, problem, round: p, verdicts, stage, tcsBuffer }) {
    const cfg = env.config.tcs;
    const judged = p.judgedTests ?? [];
    const buffer = tcsBuffer ?? [];
    if (!buffer.some((s) => s.round === p.round))
      throw new Error(`TCS buffer of ${p.problemId} does not hold round ${p.round}'s suites: the Judge folded no TestsJudged for it`);
    const tests = usableTests(buffer);
    const m = matrixOf(
      p,
      tests.map((t) => ({ id: t.testId, suite: t.suite })),
      verdicts(`${p.key}/reward`),
    );
    const column = new Map(tests.map((t, i) => [t.testId, i]));
    const failing = new Set(tests.filter((t) => testVector(m, column.get(t.testId)!).includes('fail')).map((t) => t.testId));
    const trained = new Set((stage === 1 ? buffer : suitesAtFailureModes(buffer, failing)).map((s) => s.suiteId));
    // tcsStage*Reward read the reference's verdict on the test as stated.
    const asStated = (c: 0 | 1 | null) => (c === null ? null : c === 1 ? 'accepted' : 'wrong_answer');
    const items: RewardItem[] = buffer.map((s) => {
      const rewards = s.tests
        .map((t) => {
          if (stage === 1) return tcsStage1Reward(asStated(t.consistent));
          const col = column.get(t.testId);
          const solver = col === undefined ? [] : m.verdicts.map((row) => row[col] ?? null);
          return tcsStage2Reward(asStated(t.consistent), solver, cfg);
        })
        .filter((r): r is number => r !== null);
      const failureModes = s.tests.filter((t) => t.consistent === 1 && failing.has(t.testId)).length;
      const selected = trained.has(s.suiteId) ? 1 : 0;
      return {
        sampleId: s.suiteId,
        reward: mean(rewards),
        advantage: 0,
        components: { stage, fromRound: s.round, policyVersion: s.policyVersion, failureModes, selected },
      };
    });
    // One GRPO group per problem over the trained samples (black-box: one prompt).
    const group = items.filter((t) => t.components.selected === 1);
    const adv = groupAdvantages(
      group.map((t) => t.reward),
      { std: env.config.rewards.std },
    );
    group.forEach((t, i) => (t.advantage = adv[i]!));
    const own = new Set(p.suites.map((s) => s.suiteId));
    const current = tests.filter((t) => own.has(t.suite));
    const cm = matrixOf(
      p,
      current.map((t) => ({ id: t.testId, suite: t.suite })),
      verdicts(`${p.key}/reward`),
    );
    const code: RewardItem[] = cm.programs.map((prog, i) => ({
      sampleId: prog.id,
      reward: countOutcomes(passVector(cm, i)).rate,
      advantage: 0,
      components: { selected: 0 },
    }));
    // The table's validity: tests consistent with the reference as stated (stage 1's reward).
    const validCount = judged.filter((t) => t.status === 'valid').length;
    return judgedEvents({ env, problem, round: p, verdicts, judged, rewardFn: `tcs/v2/stage${stage}`, code, test: items, validCount });
  },
};
