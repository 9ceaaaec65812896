/**
 * The report's data shaping on hand-made inputs whose figures are known: the headline by setting
 * (seeds of one config as mean and band, controls marked, the last step's policy one round
 * later), the training figures (trainer keys of either trainer, batch spreads, what is not
 * recorded), and the execution matrices as the page draws them.
 */
import { describe, expect, it } from 'vitest';
import { headline } from '../../src/report/headline.js';
import { trainingFigures } from '../../src/report/training.js';
import { correctPrograms, matrixView, problemTrends, VERDICT_COLOURS, VERDICT_CODES } from '../../src/report/matrix-view.js';
import type { ProblemMatrix } from '../../src/report/matrix.js';
import type { RewardSample, RunSummary, TrainingStep } from '../../src/report/run-data.js';
import { roundRow, runSummary } from '../support/run-summary.js';

function run(name: string, seed: number, correct: readonly number[], opts: { control?: string; trainedLast?: number; alpha?: number } = {}): RunSummary {
  const rows = correct.map((p, i) =>
    roundRow(i + 1, { heldOutPass: p / 2, exactCorrect: p, trainedCorrect: i === correct.length - 1 ? (opts.trainedLast ?? null) : null }),
  );
  return runSummary(name, seed, rows, { name, seed, dir: 'runs', rewards: { alpha: opts.alpha ?? 0.5 }, learner: { control: opts.control ?? 'none' } }, 2);
}

describe('the headline', () => {
  it('draws seeds of one setting as their mean with a min-max band, and a control apart', () => {
    const h = headline([
      run('t', 1, [0.2, 0.6], { trainedLast: 0.7 }),
      run('t', 2, [0.2, 0.4], { trainedLast: 0.5 }),
      run('c', 1, [0.2, 0.2], { control: 'frozen' }),
    ]);
    expect(h.x).toEqual(['1', '2', 'after 2']);
    expect(h.groups.map((g) => [g.label, g.control, g.seeds])).toEqual([
      ['t', null, [1, 2]],
      ['c', 'frozen', [1]],
    ]);
    const correct = h.metrics.find((m) => m.key === 'exactCorrect')!;
    expect(correct.recorded).toBe(true);
    expect(correct.lines[0]!.mean[0]).toBeCloseTo(0.2, 12);
    expect(correct.lines[0]!.mean[1]).toBeCloseTo(0.5, 12);
    expect(correct.lines[0]!.min).toEqual([0.2, 0.4, 0.5]);
    expect(correct.lines[0]!.max).toEqual([0.2, 0.6, 0.7]);
    // One seed: a line, no band; no trained figure recorded: nothing after the last round.
    expect(correct.lines[1]).toEqual({ mean: [0.2, 0.2, null], min: null, max: null });
    // Held-out pass has no "after" point; validity is in no run.
    expect(h.metrics.find((m) => m.key === 'heldOutPass')!.lines[0]!.mean).toEqual([0.1, 0.25, null]);
    expect(h.metrics.find((m) => m.key === 'validity')!.recorded).toBe(false);
  });

  it('labels two settings of one name by the settings that tell them apart', () => {
    const h = headline([run('t', 1, [0.1]), run('t', 1, [0.3], { alpha: 0.3 })]);
    expect(h.groups.map((g) => g.label)).toEqual(['t (rewards.alpha=0.5)', 't (rewards.alpha=0.3)']);
    expect(h.x).toEqual(['1']);
  });
});

describe('the training figures', () => {
  const step = (role: string, round: number, metrics: Record<string, number>, sampleIds: string[] = []): TrainingStep => ({
    round,
    role,
    batchId: `${role}-${round}`,
    fromVersion: round - 1,
    toVersion: round,
    metrics,
    sampleIds,
    control: 'none',
  });
  const reward = (role: string, round: number, sampleId: string, r: number, advantage: number): RewardSample => ({
    round,
    role,
    sampleId,
    reward: r,
    advantage,
  });

  it("reads either trainer's keys, spreads each batch's rewards, and says what is not recorded", () => {
    const steps = [
      step('code', 1, { gradNorm: 2, meanEntropy: 1.5, samples: 2 }, ['a', 'b']),
      step('test', 1, { loss: 0.3, grad_norm: 4, kl: 0.01, clip_fraction: 0.1 }, ['x']),
    ];
    // The batch names a and b; c is a reward of the round outside the batch.
    const rewards = [reward('code', 1, 'a', 1, 1), reward('code', 1, 'b', 0, -1), reward('code', 1, 'c', 5, 0), reward('test', 1, 'x', 0.5, 0)];
    const { figures, others } = trainingFigures(steps, rewards);
    const f = (k: string) => figures.find((x) => x.key === k)!;
    expect(f('grad_norm').series.map((s) => [s.role, s.y])).toEqual([
      ['code', [2]],
      ['test', [4]],
    ]);
    expect(f('entropy').series.map((s) => s.role)).toEqual(['code']);
    expect(f('loss').series.map((s) => [s.role, s.y])).toEqual([['test', [0.3]]]);
    const r = f('reward').series[0]!;
    expect([r.y, r.lo, r.hi]).toEqual([[0.5], [0], [1]]);
    expect(f('advantage').series[0]!.y).toEqual([1]);
    expect(others).toEqual(['samples']);
    // The catalog trainer alone: no loss, KL or clip fraction.
    const catalog = trainingFigures([steps[0]!], rewards).figures;
    expect(catalog.filter((x) => !x.recorded).map((x) => x.key)).toEqual(['loss', 'kl', 'clip_fraction']);
  });
});

describe('execution matrices as drawn', () => {
  const m = (round: number, cells: ProblemMatrix['cells'], heldOutPass: number): ProblemMatrix => ({
    problemId: 'p',
    round,
    programs: cells.map((_, i) => ({ solutionId: `sol-${i}`, index: i })),
    tests: [
      { testId: 'g1', kind: 'generated' },
      { testId: 'b1', kind: 'buffer' },
      { testId: 'h1', kind: 'heldout' },
      { testId: 'h2', kind: 'heldout' },
    ],
    cells,
    figures: { heldOutPass, validity: 1, killRate: 0.5, mistakeBook: 0 },
  });
  const r1 = m(
    1,
    [
      ['wrong_answer', null, 'accepted', 'accepted'],
      ['accepted', 'time_limit', 'accepted', 'memory_limit'],
    ],
    0.5,
  );

  it('marks a program correct when it passes every held-out test, whatever the generated tests say', () => {
    expect(correctPrograms(r1)).toEqual([true, false]);
    const v = matrixView(r1);
    expect(v.rows).toEqual(['W.AA', 'ATAM']);
    expect(v.programs.map((p) => [p.label, p.correct])).toEqual([
      ['s0', true],
      ['s1', false],
    ]);
    // No held-out verdict: not known correct.
    expect(correctPrograms({ ...r1, tests: r1.tests.slice(0, 2), cells: [['accepted', 'accepted']] })).toEqual([false]);
  });

  it('gives every verdict its own letter and colour', () => {
    expect(new Set(Object.values(VERDICT_CODES)).size).toBe(Object.keys(VERDICT_CODES).length);
    expect(new Set(Object.values(VERDICT_COLOURS)).size).toBe(Object.keys(VERDICT_COLOURS).length);
    expect(VERDICT_COLOURS.time_limit).not.toBe(VERDICT_COLOURS.memory_limit);
  });

  it("follows a problem's figures across its rounds", () => {
    const r2 = m(2, [['accepted', 'accepted', 'accepted', 'accepted']], 1);
    expect(problemTrends([r2, r1])).toEqual([
      { problemId: 'p', rounds: [1, 2], heldOutPass: [0.5, 1], validity: [1, 1], killRate: [0.5, 0.5], correct: [0.5, 1] },
    ]);
  });
});
