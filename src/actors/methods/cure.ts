/**
 * CURE (one model for both roles, no reference program): every program of the problem runs the
 * dataset's tests (GT) and every generated test as stated (black-box, n codes x m tests). Code
 * reward: share of GT tests passed; test reward: CURE's (src/rewards/cure.ts), per test, and a
 * suite (one test-policy sample) earns the mean over its usable tests. Both roles are
 * z-normalized per problem with the population std and dropped from training when their
 * rewards have no spread, as the release does.
 */
import { cureAdvantages, cureRewards } from '../../rewards/cure.js';
import { codeA1HasExpected } from '../../rewards/code-a1.js';
import type { JudgedTest, MethodJudgement, RewardItem } from './contract.js';
import { evaluationPairs, mean } from './evaluation.js';
import { GT_SUITE, allPairs, groundTruthTests, judgedEvents, matrixOf, sampledTests, suiteOf, planEvents } from './common.js';

async function judgeGenerated(...args: Parameters<typeof sampledTests>): Promise<JudgedTest[]> {
  return (await sampledTests(...args)).map((t): JudgedTest => {
    if (t.test === null) return { testId: t.testId, testHash: t.testHash, valid: false, reason: 'malformed', status: 'invalid', oracleHash: null };
    if (!codeA1HasExpected(t.test)) return { testId: t.testId, testHash: t.testHash, valid: false, reason: 'no-expected', status: 'invalid', oracleHash: null };
    // No reference: a test is run as stated.
    return { testId: t.testId, testHash: t.testHash, valid: true, reason: 'ok', status: 'valid', oracleHash: t.testHash };
  });
}

export const cure: MethodJudgement = {
  oracle: async () => [],
  async plan({ env, problem, round: p, split }) {
    const gt = await groundTruthTests(env, problem);
    const judged = await judgeGenerated(env, p);
    const usable = judged.filter((t) => t.oracleHash).map((t) => ({ testId: t.testId, testHash: t.oracleHash! }));
    const { heldout, kill } = await evaluationPairs(env, problem, p, usable.map((t) => t.testHash));
    return planEvents(env, p, judged, [['reward', allPairs(p, [...gt, ...usable])], ['heldout', heldout], ['kill', kill]], split);
  },
  async judge({ env, problem, round: p, verdicts }) {
    const judged = p.judgedTests ?? [];
    const gt = await groundTruthTests(env, problem);
    const usable = judged.filter((t) => t.oracleHash);
    const m = matrixOf(p, [...gt.map((t) => ({ id: t.testId, suite: GT_SUITE })), ...usable.map((t) => ({ id: t.testId, suite: suiteOf(t.testId) }))], verdicts(`${p.key}/reward`));
    const r = cureRewards(m, { gtSuite: GT_SUITE });
    const codeAdv = cureAdvantages(r.programs.map((x) => x.reward));
    const code: RewardItem[] = r.programs.map((x, i) => ({
      sampleId: x.program,
      reward: x.reward,
      advantage: codeAdv?.[i] ?? 0,
      components: { correct: x.correct === null ? -1 : x.correct ? 1 : 0, gtPassed: x.gtPassed, gtObserved: x.gtObserved, selected: codeAdv ? 1 : 0 },
    }));
    const testReward = new Map(r.tests.map((t) => [t.test, t.reward]));
    const suiteRewards = p.suites.map((s) => mean(usable.filter((t) => suiteOf(t.testId) === s.suiteId).map((t) => testReward.get(t.testId)!)));
    const testAdv = cureAdvantages(suiteRewards);
    const test: RewardItem[] = p.suites.map((s, i) => ({
      sampleId: s.suiteId,
      reward: suiteRewards[i]!,
      advantage: testAdv?.[i] ?? 0,
      components: { usableTests: usable.filter((t) => suiteOf(t.testId) === s.suiteId).length, correctPrograms: r.correctCount, incorrectPrograms: r.incorrectCount, selected: testAdv ? 1 : 0 },
    }));
    return judgedEvents({ env, problem, round: p, verdicts, judged, rewardFn: r.rewardId, code, test });
  },
};
