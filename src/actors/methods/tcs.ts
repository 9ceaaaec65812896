/**
 * TCS (our reading of the abstract; every rule is a config key): only the test generator
 * trains. The reference judges each stated test (Code-A1's validity, expected values
 * required); every program of the round then runs every usable test.
 * - Stage 1: a suite earns the share of its tests consistent with the reference.
 * - Stage 2: the policy-aligned buffer (this round's usable tests, at most `bufferSize`) is
 *   restricted to the Solver's current failure modes (valid tests some current program fails);
 *   a suite trains only if it holds such a test, and earns validityWeight * valid +
 *   counterexampleWeight * counterexample per test (src/rewards/tcs.ts).
 * The stage of each round is the Conductor's StageDecided event.
 * Code programs are rewarded (their pass rate on the usable tests, recorded) but never trained.
 */
import { countOutcomes, passVector, testVector } from '../../rewards/matrix.js';
import { groupAdvantages } from '../../rewards/grpo.js';
import { tcsStage1Reward, tcsStage2Reward } from '../../rewards/tcs.js';
import type { Verdict } from '../../core/verdicts.js';
import type { MethodJudgement, RewardItem } from './contract.js';
import { evaluationPairs, mean } from './evaluation.js';
import { allPairs, judgedEvents, matrixOf, suiteOf, planEvents } from './common.js';
import { judgeAgainstReference, referenceOracle } from '../judging.js';

export const tcs: MethodJudgement = {
  oracle: referenceOracle,
  async plan({ env, problem, round: p, oracle, split }) {
    const judged = await judgeAgainstReference(env, p, oracle);
    const usable = judged.filter((t) => t.oracleHash).map((t) => ({ testId: t.testId, testHash: t.oracleHash! }));
    const { heldout, kill } = await evaluationPairs(env, problem, p, usable.map((t) => t.testHash));
    return planEvents(env, p, judged, [['reward', allPairs(p, usable)], ['heldout', heldout], ['kill', kill]], split);
  },
  async judge({ env, problem, round: p, verdicts, stage }) {
    const cfg = env.config.tcs;
    const judged = p.judgedTests ?? [];
    const usable = judged.filter((t) => t.oracleHash);
    const m = matrixOf(p, usable.map((t) => ({ id: t.testId, suite: suiteOf(t.testId) })), verdicts(`${p.key}/reward`));
    const reference = new Map(verdicts(`${p.key}/oracle`).map((v) => [v.testHash, v.verdict]));
    // The reference's verdict on each sampled test as stated (null: it was never run or unusable).
    const refOf = (testId: string): Verdict | null => {
      const t = judged.find((x) => x.testId === testId)!;
      if (t.reason === 'malformed' || t.reason === 'no-expected' || t.reason === 'duplicate') return 'wrong_answer';
      return reference.get(t.testHash) ?? null;
    };
    const column = new Map(usable.map((t, i) => [t.testId, i]));
    const buffer = new Set(usable.slice(0, cfg.bufferSize).map((t) => t.testId));
    const failureModes = new Set(
      usable.filter((t) => buffer.has(t.testId) && t.status === 'valid' && testVector(m, column.get(t.testId)!).includes('fail')).map((t) => t.testId),
    );
    const test: RewardItem[] = p.suites.map((s) => {
      const ids = judged.filter((t) => suiteOf(t.testId) === s.suiteId).map((t) => t.testId);
      const rewards = ids
        .map((id) => {
          if (stage === 1) return tcsStage1Reward(refOf(id));
          const col = column.get(id);
          const solver = col === undefined ? [] : m.verdicts.map((row) => row[col] ?? null);
          return tcsStage2Reward(refOf(id), solver, cfg);
        })
        .filter((r): r is number => r !== null);
      const inBuffer = ids.filter((id) => failureModes.has(id)).length;
      const selected = stage === 1 || inBuffer > 0 ? 1 : 0;
      return { sampleId: s.suiteId, reward: mean(rewards), advantage: 0, components: { stage, failureModes: inBuffer, selected } };
    });
    const trained = test.filter((t) => t.components.selected === 1);
    const adv = groupAdvantages(trained.map((t) => t.reward), { std: env.config.rewards.std });
    trained.forEach((t, i) => (t.advantage = adv[i]!));
    const code: RewardItem[] = m.programs.map((prog, i) => ({ sampleId: prog.id, reward: countOutcomes(passVector(m, i)).rate, advantage: 0, components: { selected: 0 } }));
    // The table's validity: tests consistent with the reference as stated (stage 1's reward).
    const validCount = judged.filter((t) => t.status === 'valid').length;
    return judgedEvents({ env, problem, round: p, verdicts, judged, rewardFn: `tcs/v1/stage${stage}`, code, test, validCount });
  },
};
