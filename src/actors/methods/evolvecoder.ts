/**
 * EvolveCoder (released pipeline, METHODS.md): builds a harder test set per problem by rounds over
 * a fixed set of candidate programs (those sampled in the problem's first round). Each round the
 * adversary's new tests (stated expected values, run as stated: no reference exists) join the
 * problem's set; every candidate runs every test (earlier verdicts are reused); the in-round
 * filter, adversarial selection, redundancy reduction and discriminative selection are computed
 * and recorded (TestsEvolved): in the release they only shape the augmenting model's prompts and
 * remove nothing. In the last round the final filter decides the evolved tests (DatasetEvolved);
 * `crucible evolved` writes them as a problem file that a following run reads.
 * Nothing trains during evolution (the release augments with a fixed model).
 */
import { Rng } from '../../core/rng.js';
import { codeA1HasExpected } from '../../rewards/code-a1.js';
import { countOutcomes, passVector, testVector } from '../../rewards/matrix.js';
import { finalFilter, groupBySignature, lowPassFilter, reduceRedundancy, selectForAugmentation, selectSimilarPrograms } from '../../rewards/evolvecoder.js';
import type { JudgedTest, MethodJudgement, RewardItem } from './contract.js';
import { evaluationPairs } from './evaluation.js';
import { judgedEvents, matrixOf, sampledTests, planEvents } from './common.js';

const testIdOf = (hash: string) => `evolved/${hash.slice(0, 16)}`;

export const evolveCoder: MethodJudgement = {
  oracle: async () => [],
  async plan({ env, problem, round: p, split, evolved }) {
    const judged: JudgedTest[] = (await sampledTests(env, p)).map((t): JudgedTest => {
      if (t.test === null) return { testId: t.testId, testHash: t.testHash, valid: false, reason: 'malformed', status: 'invalid', oracleHash: null };
      if (!codeA1HasExpected(t.test))
        return { testId: t.testId, testHash: t.testHash, valid: false, reason: 'no-expected', status: 'invalid', oracleHash: null };
      return { testId: t.testId, testHash: t.testHash, valid: true, reason: 'ok', status: 'valid', oracleHash: t.testHash };
    });
    const programs = evolved?.programs ?? p.solutions.map((s) => ({ programId: s.solutionId, programHash: s.programHash }));
    const tests = [...new Set([...(evolved?.tests ?? []), ...judged.filter((t) => t.oracleHash).map((t) => t.oracleHash!)])];
    // The fixed candidates evolve the tests; the round's sampled programs are measured on them too.
    const measured = [
      ...programs,
      ...p.solutions.filter((s) => !programs.some((c) => c.programId === s.solutionId)).map((s) => ({ programId: s.solutionId, programHash: s.programHash })),
    ];
    const reward = measured.flatMap((s) => tests.map((h) => ({ programId: s.programId, programHash: s.programHash, testId: testIdOf(h), testHash: h })));
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
      split,
    );
  },
  async judge({ env, problem, round: p, verdicts, evolved }) {
    const judged = p.judgedTests ?? [];
    const programs = evolved?.programs ?? p.solutions.map((s) => ({ programId: s.solutionId, programHash: s.programHash }));
    const tests = [...new Set([...(evolved?.tests ?? []), ...judged.filter((t) => t.oracleHash).map((t) => t.oracleHash!)])];
    const cells = verdicts(`${p.key}/reward`);
    // The matrix over the fixed candidates (their ids are those of the first round).
    const m = matrixOf(
      { ...p, solutions: programs.map((x) => ({ solutionId: x.programId, programHash: x.programHash, candidateId: null })) },
      tests.map((h) => ({ id: testIdOf(h), suite: 'evolved' })),
      cells,
    );
    const ec = env.config.evolvecoder;
    const rng = Rng.derive(env.config.seed, 'evolvecoder', p.problemId, p.round);
    const all = tests.map((_, i) => i);
    const filtered = lowPassFilter(m, all, ec.minPassRate).kept;
    const adversarial = selectForAugmentation(
      m,
      filtered,
      { top: ec.top, mid: ec.mid, midLow: ec.midLow, midHigh: ec.midHigh, fallbackAbove: ec.minPassRate },
      rng,
    );
    const reduced = reduceRedundancy(m, filtered, 1, rng);
    const similar = selectSimilarPrograms(m, reduced, ec.similar, rng);
    const base = { round: p.round, problemId: p.problemId };
    const extra = [
      env.event('TestsEvolved', {
        ...base,
        programs,
        tests,
        adversarial: adversarial.ids,
        fallback: adversarial.fallback,
        discriminative: similar.map((i) => m.programs[i]!.id),
        signatures: groupBySignature(m, filtered).length,
        reduced: reduced.map((i) => tests[i]!),
      }),
    ];
    if (p.round === env.config.rounds) {
      const f = finalFilter(m, all, { minPassRate: ec.minPassRate, perSignature: ec.perSignature, minTests: ec.minTests, maxPerfect: ec.maxPerfect }, rng);
      extra.push(
        env.event('DatasetEvolved', {
          ...base,
          tests: f.tests.map((i) => tests[i]!),
          lowPass: f.lowPass.length,
          perfect: f.perfect,
          keepProblem: f.keepProblem,
          reason: f.reason,
        }),
      );
    }
    // Recorded, never trained: a sampled program's pass rate on the evolved tests; a suite's share
    // of new tests that some top-2 candidate fails (what the augmentation asks for).
    const sampled = matrixOf(
      p,
      tests.map((h) => ({ id: testIdOf(h), suite: 'evolved' })),
      cells,
    );
    const code: RewardItem[] = p.solutions.map((s, i) => ({
      sampleId: s.solutionId,
      reward: countOutcomes(passVector(sampled, i)).rate,
      advantage: 0,
      components: { selected: 0 },
    }));
    const column = new Map(tests.map((h, i) => [h, i]));
    const test: RewardItem[] = p.suites.map((s) => {
      const mine = judged.filter((t) => t.oracleHash && t.testId.startsWith(`${s.suiteId}/`));
      const breaks = mine.filter((t) => testVector(m, column.get(t.oracleHash!)!, adversarial.top).includes('fail')).length;
      return { sampleId: s.suiteId, reward: mine.length === 0 ? 0 : breaks / mine.length, advantage: 0, components: { breaksTop: breaks, selected: 0 } };
    });
    return judgedEvents({ env, problem, round: p, verdicts, judged, rewardFn: 'evolvecoder/v1', code, test, extra });
  },
};
