/**
 * The effect of training over seeds: the paired bootstrap interval, the pairing of a config's
 * runs with its control's by seed, and the per-round and last-rounds effects, on hand-made run
 * summaries whose figures are known.
 */
import { describe, expect, it } from 'vitest';
import { formatEffect, pairBySeed, pairedBootstrap, seedEffects } from '../../src/report/seed-effect.js';
import type { RunDetail, RunSummary } from '../../src/report/run-data.js';
import { renderReport } from '../../src/report/html.js';
import { roundRow, runSummary } from '../support/run-summary.js';

/** A run whose round r has held-out pass `pass[r - 1]` (the other figures absent). */
function run(name: string, seed: number, pass: readonly number[], control: string | null = null, over: Record<string, unknown> = {}): RunSummary {
  const rows = pass.map((p, i) => roundRow(i + 1, { heldOutPass: p }));
  return runSummary(name, seed, rows, { name, seed, dir: 'runs', rounds: pass.length, learner: { control }, ...over });
}

describe('the paired bootstrap interval', () => {
  it('is the one value when every seed differs by the same amount', () => {
    expect(pairedBootstrap([0.25, 0.25, 0.25])).toEqual({ mean: 0.25, lo: 0.25, hi: 0.25, seeds: 3 });
  });

  it('lies within the smallest and largest difference, around the mean, and is the same for the same seed', () => {
    const diffs = [0.1, 0.3, -0.05, 0.2, 0.15];
    const a = pairedBootstrap(diffs, { seed: 4 });
    expect(a.mean).toBeCloseTo(0.14, 12);
    expect(a.lo).toBeGreaterThanOrEqual(-0.05);
    expect(a.hi).toBeLessThanOrEqual(0.3);
    expect(a.lo).toBeLessThan(a.mean);
    expect(a.hi).toBeGreaterThan(a.mean);
    expect(pairedBootstrap(diffs, { seed: 4 })).toEqual(a);
    // A wider coverage gives a wider interval.
    const wide = pairedBootstrap(diffs, { seed: 4, level: 0.99 });
    expect(wide.lo).toBeLessThanOrEqual(a.lo);
    expect(wide.hi).toBeGreaterThanOrEqual(a.hi);
  });

  it('covers the true mean about 95% of the time for normal differences', () => {
    // 200 experiments of 8 seeds each, differences ~ N(0.1, 0.2^2) from a fixed generator.
    let state = 12345;
    const uniform = () => ((state = (Math.imul(state, 1103515245) + 12345) >>> 0) + 0.5) / 2 ** 32;
    const normal = () => Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform());
    let covered = 0;
    for (let e = 0; e < 200; e++) {
      const diffs = Array.from({ length: 8 }, () => 0.1 + 0.2 * normal());
      const i = pairedBootstrap(diffs, { seed: e, resamples: 2000 });
      if (i.lo <= 0.1 && 0.1 <= i.hi) covered++;
    }
    // The percentile bootstrap undercovers a little at 8 seeds; far from 95% would be a bug.
    expect(covered / 200).toBeGreaterThan(0.85);
    expect(covered / 200).toBeLessThan(0.99);
  });

  it('refuses no seeds', () => {
    expect(() => pairedBootstrap([])).toThrow(/no paired seeds/);
  });
});

describe('pairing runs by seed', () => {
  it('finds the control by its Learner control, whatever the order, and pairs the common seeds', () => {
    const runs = [
      run('demo-frozen', 7, [0.1], 'frozen'),
      run('demo', 8, [0.3]),
      run('demo', 7, [0.2]),
      run('demo-frozen', 8, [0.1], 'frozen'),
      run('demo', 9, [0.5]),
    ];
    const paired = pairBySeed(runs);
    expect(paired.ok).toBe(true);
    if (!paired.ok) return;
    expect(paired.pairs.trained.runs.map((r) => r.seed)).toEqual([7, 8]);
    expect(paired.pairs.control.runs.map((r) => [r.name, r.seed])).toEqual([
      ['demo-frozen', 7],
      ['demo-frozen', 8],
    ]);
    expect(paired.pairs.differences).toEqual(['learner.control']);
  });

  it('without a control in either config, the first run is the baseline', () => {
    const paired = pairBySeed([run('a', 1, [0.1], null, { lr: 0 }), run('b', 1, [0.2], null, { lr: 1 })]);
    expect(paired.ok && [paired.pairs.trained.name, paired.pairs.control.name]).toEqual(['b', 'a']);
  });

  it('says why runs do not pair: one config, three, a seed twice, no seed in common', () => {
    expect(pairBySeed([run('a', 1, [0]), run('a', 2, [0])])).toEqual({ ok: false, reason: expect.stringMatching(/of 1 configs/) });
    expect(pairBySeed([run('a', 1, [0]), run('b', 1, [0], 'frozen'), run('c', 1, [0], 'none')])).toEqual({
      ok: false,
      reason: expect.stringMatching(/of 3 configs/),
    });
    expect(pairBySeed([run('a', 1, [0]), run('a', 1, [0]), run('b', 1, [0], 'frozen')])).toEqual({ ok: false, reason: 'config a has two runs of seed 1' });
    expect(pairBySeed([run('a', 1, [0]), run('b', 2, [0], 'frozen')])).toEqual({ ok: false, reason: 'the two configs have no seed in common' });
  });
});

describe('the effect per round and over the last rounds', () => {
  it('is the mean of the paired differences, the last half of the rounds by default', () => {
    const runs = [
      run('t', 1, [0.2, 0.4, 0.6, 0.8]),
      run('t', 2, [0.2, 0.5, 0.5, 0.9]),
      run('c', 1, [0.2, 0.2, 0.2, 0.2], 'frozen'),
      run('c', 2, [0.1, 0.3, 0.3, 0.3], 'frozen'),
    ];
    const paired = pairBySeed(runs);
    if (!paired.ok) throw new Error(paired.reason);
    const [pass] = seedEffects(paired.pairs);
    expect(pass!.metric).toBe('heldOutPass');
    expect(pass!.rows.map((r) => r.round)).toEqual([1, 2, 3, 4, 'last']);
    expect(pass!.rows[0]!.effect!.mean).toBeCloseTo(0.05, 12);
    expect(pass!.rows[3]!.effect!.mean).toBeCloseTo(0.6, 12);
    // Rounds 3-4: seed 1 (0.7 - 0.2) = 0.5, seed 2 (0.7 - 0.3) = 0.4.
    const last = pass!.rows[4]!;
    expect(last.rounds).toEqual([3, 4]);
    expect(last.effect!.mean).toBeCloseTo(0.45, 12);
    expect(last.effect!.lo).toBeCloseTo(0.4, 12);
    expect(last.effect!.hi).toBeCloseTo(0.5, 12);
    expect(formatEffect(last.effect)).toBe('+45.0 pt [+40.0, +50.0]');
    // A figure the runs lack has no effect.
    expect(seedEffects(paired.pairs).find((t) => t.metric === 'killRate')!.rows[0]!.effect).toBeNull();
    expect(seedEffects(paired.pairs, { last: 3 })[0]!.rows.at(-1)!.rounds).toEqual([2, 3, 4]);
  });

  it('reads only the rounds every paired run finished', () => {
    const paired = pairBySeed([run('t', 1, [0.5, 0.6, 0.7]), run('c', 1, [0.1, 0.2], 'frozen')]);
    if (!paired.ok) throw new Error(paired.reason);
    expect(seedEffects(paired.pairs)[0]!.rows.map((r) => r.round)).toEqual([1, 2, 'last']);
  });
});

describe('the report', () => {
  it('shows the effect over seeds when its runs are seeds of a config and of its control, and not otherwise', () => {
    const detail = (r: RunSummary): RunDetail => ({
      ...r,
      problems: [],
      rewards: [],
      mistakeBook: [],
      matrices: [],
      steps: [],
      stages: [],
      replayed: [],
      texts: {},
    });
    const runs = [run('t', 1, [0.5, 0.9]), run('t', 2, [0.4, 0.8]), run('c', 1, [0.1, 0.2], 'frozen'), run('c', 2, [0.2, 0.2], 'frozen')].map(detail);
    const html = renderReport(runs, '');
    expect(html).toContain('<h2>Effect over seeds</h2>');
    expect(html).toContain('t minus c, paired by seed (1, 2)');
    // Round 1: seed 1 +40 pt, seed 2 +20 pt; round 2 (and the last half): +70 and +60.
    expect(html).toContain('<td>held-out pass</td><td>+30.0 pt [+20.0, +40.0]</td><td>+65.0 pt [+60.0, +70.0]</td><td>+65.0 pt [+60.0, +70.0]</td>');
    expect(renderReport(runs.slice(0, 2), '')).not.toContain('Effect over seeds');
  });
});
