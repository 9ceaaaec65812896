import { describe, expect, it } from 'vitest';
import { parseMatrix, verdictsFromCodes } from '../../src/rewards/matrix.js';
import { distinctSignatures, killRate, meanPassAtK, passAtK, validityRate } from '../../src/rewards/metrics.js';

/** pass@k by enumerating every k-subset of n samples whose first c are correct. */
function bruteForce(n: number, c: number, k: number): number {
  let hit = 0;
  let all = 0;
  const rec = (start: number, left: number, anyCorrect: boolean): void => {
    if (left === 0) {
      all++;
      if (anyCorrect) hit++;
      return;
    }
    for (let i = start; i <= n - left; i++) rec(i + 1, left - 1, anyCorrect || i < c);
  };
  rec(0, k, false);
  return hit / all;
}

describe('pass@k', () => {
  it('matches brute-force enumeration for every n <= 9', () => {
    for (let n = 1; n <= 9; n++) {
      for (let c = 0; c <= n; c++) {
        for (let k = 1; k <= n; k++) {
          expect(passAtK(n, c, k), `n=${n} c=${c} k=${k}`).toBeCloseTo(bruteForce(n, c, k), 12);
        }
      }
    }
  });

  it('hand values and stability for large n', () => {
    // n=5, c=2, k=1: 1 - C(3,1)/C(5,1) = 1 - 3/5
    expect(passAtK(5, 2, 1)).toBeCloseTo(0.4, 15);
    expect(passAtK(10, 0, 3)).toBe(0);
    expect(passAtK(10, 8, 3)).toBe(1);
    // C(1000, 100) overflows doubles; the product form does not: 1 - (1 - 100/1000) = 0.1 for c=1.
    expect(passAtK(1000, 1, 100)).toBeCloseTo(0.1, 12);
    expect(
      meanPassAtK(
        [
          { n: 5, c: 2 },
          { n: 5, c: 0 },
        ],
        1,
      ),
    ).toBeCloseTo(0.2, 15);
  });

  it('rejects impossible arguments', () => {
    expect(() => passAtK(5, 6, 1)).toThrow(/exceeds n/);
    expect(() => passAtK(5, 1, 6)).toThrow(/k must be in/);
    expect(() => passAtK(5, 1.5, 1)).toThrow(/c must be/);
  });
});

describe('test-policy quality', () => {
  it('validity rate leaves unknown tests out', () => {
    // judged: valid, corrected, invalid, valid -> 2/4 valid; 3/4 counting corrected
    const s = ['valid', 'corrected', 'invalid', 'unknown', 'valid'] as const;
    expect(validityRate(s).rate).toBe(0.5);
    expect(validityRate(s, true).rate).toBe(0.75);
    expect(validityRate([]).rate).toBe(0);
  });

  it('kill rate and distinct signatures', () => {
    const m = parseMatrix({
      programs: [{ id: 'm1' }, { id: 'm2' }, { id: 'm3' }, { id: 'm4' }],
      tests: [
        { id: 't1', suite: 's' },
        { id: 't2', suite: 's' },
        { id: 't3', suite: 's' },
      ],
      // m1 killed by t2; m2 survives; m3 killed by t3 (after a sandbox error); m4 all sandbox errors
      verdicts: verdictsFromCodes(['AWA', 'AAA', 'SAR', 'SSS']),
    });
    // judged mutants m1..m3, killed m1, m3 -> 2/3
    const k = killRate(m, [0, 1, 2, 3], [0, 1, 2]);
    expect([k.numerator, k.denominator]).toEqual([2, 3]);
    // signatures over m1..m4: t1 "11??", t2 "011?", t3 "110?" -> 3 distinct
    expect(distinctSignatures(m)).toBe(3);
    expect(distinctSignatures(m, [0, 1, 2], [1])).toBe(1);
  });
});
