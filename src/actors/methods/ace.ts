/**
 * ACE (no ground truth): the adversary's tests are inputs only. Any expected value a test
 * states is stripped before it runs, and no reference program is ever run (the Judge hands this
 * module a problem without solutions). A program crashing, raising or hanging on an input is
 * all a verdict says. Tests get KTO labels (desirable +1: it breaks some program; undesirable
 * -1: every program survives it; suspect 0: it breaks them all, kept out by default); programs
 * that survive every labelled input are the SFT batch. Labels: src/rewards/ace.ts.
 */
import type { TestCase } from '../../core/problem.js';
import { canonicalJson } from '../../core/canonical-json.js';
import { aceLabels } from '../../rewards/ace.js';
import type { JudgedTest, MethodJudgement, RewardItem } from './contract.js';
import { evaluationPairs, mean } from './evaluation.js';
import { allPairs, judgedEvents, matrixOf, sampledTests, suiteOf, planEvents } from './common.js';

/** The input of a test without its expected value; null for assert tests, whose input and
 * expectation are one statement. */
export function inputOnly(test: TestCase): TestCase | null {
  if (test.style === 'stdio') return { style: 'stdio', input: test.input, output: null };
  if (test.style === 'call') return { style: 'call', args: test.args };
  return null;
}

const LABEL_VALUE = { desirable: 1, undesirable: -1, suspect: 0, unknown: 0 } as const;

export const ace: MethodJudgement = {
  oracle: async () => [],
  async plan({ env, problem, round: p, split }) {
    const judged: JudgedTest[] = [];
    for (const t of await sampledTests(env, p)) {
      const input = t.test === null ? null : inputOnly(t.test);
      if (input === null) judged.push({ testId: t.testId, testHash: t.testHash, valid: false, reason: 'malformed', status: 'invalid', oracleHash: null });
      else
        judged.push({
          testId: t.testId,
          testHash: t.testHash,
          valid: true,
          reason: 'ok',
          status: 'valid',
          oracleHash: await env.blobs.put(canonicalJson(input)),
        });
    }
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
        ['reward', allPairs(p, usable)],
        ['heldout', heldout],
        ['kill', kill],
      ],
      split,
    );
  },
  async judge({ env, problem, round: p, verdicts }) {
    const judged = p.judgedTests ?? [];
    const usable = judged.filter((t) => t.oracleHash);
    const m = matrixOf(
      p,
      usable.map((t) => ({ id: t.testId, suite: suiteOf(t.testId) })),
      verdicts(`${p.key}/reward`),
    );
    const r = aceLabels(m, undefined, {
      suspectLabel: env.config.ace.suspectLabel,
      minProgramsForSuspect: env.config.ace.minProgramsForSuspect,
      referenceIsRobust: false,
    });
    const sft = new Set(r.sftPrograms);
    // SFT: the robust programs, each with weight 1; the others are not trained on.
    const code: RewardItem[] = p.solutions.map((s) => {
      const robust = sft.has(s.solutionId) ? 1 : 0;
      return { sampleId: s.solutionId, reward: robust, advantage: robust, components: { robust, selected: robust } };
    });
    // KTO: a suite's label is the sign of its tests' mean label value.
    const labelOf = new Map(r.tests.map((t) => [t.test, t.label]));
    const test: RewardItem[] = p.suites.map((s) => {
      const labels = usable.filter((t) => suiteOf(t.testId) === s.suiteId).map((t) => labelOf.get(t.testId)!);
      const value = mean(labels.map((l) => LABEL_VALUE[l]));
      return {
        sampleId: s.suiteId,
        reward: value,
        advantage: value,
        components: {
          desirable: labels.filter((l) => l === 'desirable').length,
          undesirable: labels.filter((l) => l === 'undesirable').length,
          suspect: labels.filter((l) => l === 'suspect').length,
          selected: value === 0 ? 0 : 1,
        },
      };
    });
    return judgedEvents({ env, problem, round: p, verdicts, judged, rewardFn: r.rewardId, code, test });
  },
};
