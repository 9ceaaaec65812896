/**
 * CURE (one model for both roles, no reference program): every program of the problem runs the
 * dataset's tests (GT) and every generated test as stated (black-box, n codes x m tests). Code
 * reward: share of GT tests passed; test reward: CURE's (src/rewards/cure.ts), per test, and a
 * suite (one test-policy sample) earns the mean over its usable tests. Both roles are
 * z-normalized per problem with the population std and dropped from training when their
 * rewards have no spread, as the release does. The release's switches are `cure.*` settings:
 * post_stage changes the test rewards, enable_efficient and length_regularize the advantages
 * (lengths: each sample's response in tokens, as its model server returned them).
 */
import { cureAdvantages, cureRegularizesLength, cureRewards } from '../../rewards/cure.js';
import type { RunEnv } from '../env.js';
import type { ProblemRound } from '../judge-state.js';
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

/** Each sample's response length in tokens, from its recorded ModelSampled tokens. */
async function responseLengths(env: RunEnv, p: ProblemRound, sampleIds: readonly string[]): Promise<number[]> {
  const lengths: number[] = [];
  for (const id of sampleIds) {
    const hash = p.responseTokens?.[id];
    if (!hash)
      throw new Error(
        `CURE length regularization needs ${id}'s response length in tokens: no tokens were recorded for it (the policy records none, or its server returned none)`,
      );
    const t = JSON.parse(await env.blobs.getText(hash)) as { tokenIds: unknown[] | null; tokenLogprobs: unknown[] | null };
    const n = t.tokenIds?.length ?? t.tokenLogprobs?.length;
    if (n === undefined)
      throw new Error(`CURE length regularization needs ${id}'s response length in tokens: its record holds neither token ids nor log-probs`);
    lengths.push(n);
  }
  return lengths;
}

export const cure: MethodJudgement = {
  oracle: async () => [],
  async plan({ env, problem, round: p, split }) {
    const gt = await groundTruthTests(env, problem);
    const judged = await judgeGenerated(env, p);
    const usable = judged.filter((t) => t.oracleHash).map((t) => ({ testId: t.testId, testHash: t.oracleHash! }));
    const { heldout, kill } = await evaluationPairs(
      env,
      problem,
      p,
      usable.map((t) => t.testHash),
    );
    return planEvents(
      env,
      p,
      judged,
      [
        ['reward', allPairs(p, [...gt, ...usable])],
        ['heldout', heldout],
        ['kill', kill],
      ],
      split,
    );
  },
  async judge({ env, problem, round: p, verdicts }) {
    const judged = p.judgedTests ?? [];
    const gt = await groundTruthTests(env, problem);
    const usable = judged.filter((t) => t.oracleHash);
    const m = matrixOf(
      p,
      [...gt.map((t) => ({ id: t.testId, suite: GT_SUITE })), ...usable.map((t) => ({ id: t.testId, suite: suiteOf(t.testId) }))],
      verdicts(`${p.key}/reward`),
    );
    const c = env.config.cure;
    const r = cureRewards(m, { gtSuite: GT_SUITE, postStage: c.postStage });
    const advOptions = {
      enableEfficient: c.enableEfficient,
      lengthRegularize: c.lengthRegularize,
      maxLenThreshold: c.maxLenThreshold,
      minLenThreshold: c.minLenThreshold,
    };
    const lengths = cureRegularizesLength(advOptions) ? (ids: string[]) => responseLengths(env, p, ids) : async () => undefined;
    const codeAdv = cureAdvantages(
      r.programs.map((x) => x.reward),
      advOptions,
      await lengths(r.programs.map((x) => x.program)),
    );
    const code: RewardItem[] = r.programs.map((x, i) => ({
      sampleId: x.program,
      reward: x.reward,
      advantage: codeAdv?.[i] ?? 0,
      components: { correct: x.correct === null ? -1 : x.correct ? 1 : 0, gtPassed: x.gtPassed, gtObserved: x.gtObserved, selected: codeAdv ? 1 : 0 },
    }));
    const testReward = new Map(r.tests.map((t) => [t.test, t.reward]));
    const suiteRewards = p.suites.map((s) => mean(usable.filter((t) => suiteOf(t.testId) === s.suiteId).map((t) => testReward.get(t.testId)!)));
    const testAdv = cureAdvantages(suiteRewards, advOptions, await lengths(p.suites.map((x) => x.suiteId)));
    const test: RewardItem[] = p.suites.map((s, i) => ({
      sampleId: s.suiteId,
      reward: suiteRewards[i]!,
      advantage: testAdv?.[i] ?? 0,
      components: {
        usableTests: usable.filter((t) => suiteOf(t.testId) === s.suiteId).length,
        correctPrograms: r.correctCount,
        incorrectPrograms: r.incorrectCount,
        selected: testAdv ? 1 : 0,
      },
    }));
    return judgedEvents({ env, problem, round: p, verdicts, judged, rewardFn: r.rewardId, code, test });
  },
};
