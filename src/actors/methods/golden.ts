/**
 * Golden-tests baseline (RL with verifiable rewards from the dataset's tests, as Code-A1 and
 * CURE compare against): each program is rewarded with its pass rate on the dataset's own tests
 * (public examples and generated tests; never the held-out ones); the generated suites are
 * sampled by the same actors but never judged or trained.
 */
import { countOutcomes, passVector } from '../../rewards/matrix.js';
import { groupAdvantages } from '../../rewards/grpo.js';
import type { MethodJudgement } from './contract.js';
import { evaluationPairs } from './evaluation.js';
import { allPairs, groundTruthTests, judgedEvents, matrixOf, untrainedSuites, planEvents } from './common.js';

export const golden: MethodJudgement = {
  oracle: async () => [],
  async plan({ env, problem, round: p, split }) {
    const gt = await groundTruthTests(env, problem);
    const { heldout, kill } = await evaluationPairs(env, problem, p, []);
    return planEvents(
      env,
      p,
      [],
      [
        ['reward', allPairs(p, gt)],
        ['heldout', heldout],
        ['kill', kill],
      ],
      split,
    );
  },
  async judge({ env, problem, round: p, verdicts }) {
    const gt = await groundTruthTests(env, problem);
    if (gt.length === 0) throw new Error(`problem ${p.problemId} has no public or generated test: the golden-tests baseline has nothing to reward with`);
    const m = matrixOf(
      p,
      gt.map((t) => ({ id: t.testId, suite: 'gt' })),
      verdicts(`${p.key}/reward`),
    );
    const rewards = m.programs.map((_, i) => countOutcomes(passVector(m, i)).rate);
    const adv = groupAdvantages(rewards, { std: env.config.rewards.std });
    const code = m.programs.map((prog, i) => ({
      sampleId: prog.id,
      reward: rewards[i]!,
      advantage: adv[i]!,
      components: { gtPass: rewards[i]!, selected: 1 },
    }));
    return judgedEvents({ env, problem, round: p, verdicts, judged: [], rewardFn: 'golden-tests/v1', code, test: untrainedSuites(p) });
  },
};
