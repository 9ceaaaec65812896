/** The exact figures of the catalog policies, on a hand-made universe with known answers. */
import { describe, expect, it } from 'vitest';
import type { CatalogUniverse } from '../../src/datasets/demo/catalog/index.js';
import { CatalogPolicy, exactFigures } from '../../src/policies/catalog/index.js';
import { summarizeSeeds } from '../../src/cli/seed-summary.js';
import type { RoundRow } from '../../src/projections/round-table.js';

const test = (n: number) => ({ testId: `t:${n}`, test: { style: 'stdio' as const, input: `${n}\n`, output: null }, origin: 'random' });
const universe: CatalogUniverse = {
  programs: {
    p: [
      { candidateId: 'ref', program: 'print(1)', kind: 'reference', correct: true },
      { candidateId: 'var1', program: 'print(1 )', kind: 'variant', correct: true },
      { candidateId: 'bug:a', program: 'print(2)', kind: 'bug', correct: false },
      { candidateId: 'mut:1', program: 'print(3)', kind: 'mutant', correct: false },
    ],
  },
  tests: { p: [test(1), test(2), test(3), test(4), test(5)] },
  validTests: { p: ['t:1', 't:2'] },
};

describe('exact figures of the catalog policies', () => {
  it('at the uniform start: share of correct programs, share of valid tests', () => {
    const f = exactFigures(universe, new CatalogPolicy('code', universe), new CatalogPolicy('test', universe), 'p', false);
    expect(f.correct).toBeCloseTo(2 / 4, 12);
    expect(f.validTest).toBeCloseTo(2 / 5, 12);
  });

  it('follows training: mass moved onto a correct program and a valid test raises both', async () => {
    const code = new CatalogPolicy('code', universe);
    const tests = new CatalogPolicy('test', universe, { suiteSize: 1 });
    await code.trainStep({
      batchId: 'b',
      role: 'code',
      expectedVersion: 0,
      algorithm: 'grpo',
      hyper: { lr: 1 },
      samples: [
        { prompt: '', response: '', advantage: 1, contextKey: 'p', choiceKey: 'ref' },
        { prompt: '', response: '', advantage: -1, contextKey: 'p', choiceKey: 'bug:a' },
      ],
    });
    await tests.trainStep({
      batchId: 'b',
      role: 'test',
      expectedVersion: 0,
      algorithm: 'grpo',
      hyper: { lr: 1 },
      samples: [{ prompt: '', response: '', advantage: 1, contextKey: 'p', choiceKey: 't:1' }],
    });
    const f = exactFigures(universe, code, tests, 'p', false);
    const dist = code.distribution('p');
    expect(f.correct).toBeCloseTo(dist.get('ref')! + dist.get('var1')!, 12);
    expect(f.correct).toBeGreaterThan(0.5);
    expect(f.validTest).toBeGreaterThan(0.4);
  });

  it('white-box: the validity under each target context, weighted by the code policy', async () => {
    const tests = new CatalogPolicy('test', universe, { suiteSize: 1 });
    // Only the context of target bug:a learns to draw valid tests.
    await tests.trainStep({
      batchId: 'b',
      role: 'test',
      expectedVersion: 0,
      algorithm: 'grpo',
      hyper: { lr: 2 },
      samples: [{ prompt: '', response: '', advantage: 1, contextKey: 'p#bug:a', choiceKey: 't:2' }],
    });
    const code = new CatalogPolicy('code', universe);
    const underBug = [...tests.distribution('p#bug:a')].filter(([id]) => id === 't:1' || id === 't:2').reduce((s, [, q]) => s + q, 0);
    const f = exactFigures(universe, code, tests, 'p', true);
    expect(f.validTest).toBeCloseTo((3 * (2 / 5) + underBug) / 4, 12);
  });

  it('refuses a problem the catalog does not hold, and policies of the wrong roles', () => {
    const code = new CatalogPolicy('code', universe);
    const tests = new CatalogPolicy('test', universe);
    expect(() => exactFigures(universe, code, tests, 'q', false)).toThrow(/no candidates .* for problem q/);
    expect(() => exactFigures(universe, tests, code, 'p', false)).toThrow(/need the code and test policies/);
  });
});

describe('figures over seeds', () => {
  const row = (round: number, heldOutPass: number, exactCorrect: number | null): RoundRow => ({
    round,
    problems: 1,
    heldOutPass,
    exactCorrect,
    validity: 1,
    exactValid: exactCorrect,
    trainedCorrect: null,
    trainedValid: null,
    killRate: 0.5,
    mistakeBook: 0,
    codeReward: 0,
    testReward: 0,
    seconds: null,
  });

  it('mean, min, max and sample std per round; rounds not finished by every seed are left out', () => {
    const [r1, ...rest] = summarizeSeeds([[row(1, 0.2, 0.1), row(2, 0.5, 0.3)], [row(1, 0.4, 0.3)]]);
    expect(rest).toEqual([]);
    expect(r1!.round).toBe(1);
    expect(r1!.columns.heldOutPass!.mean).toBeCloseTo(0.3, 12);
    expect(r1!.columns.heldOutPass!.min).toBe(0.2);
    expect(r1!.columns.heldOutPass!.max).toBe(0.4);
    expect(r1!.columns.heldOutPass!.std).toBeCloseTo(Math.SQRT2 * 0.1, 12);
    // Figures no seed has (a backend without exact figures) are absent, not zero.
    expect(r1!.columns.trainedCorrect).toBeUndefined();
  });
});
