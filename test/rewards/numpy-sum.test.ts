/**
 * numpy's order of float additions, which CURE's released normalization uses. Expected values
 * were printed by numpy 2.4 (np.sum, np.std, np.median) on the same arrays.
 */
import { describe, expect, it } from 'vitest';
import { npMean, npMedian, npStd, npSum } from '../../src/rewards/numpy-sum.js';
import { sumInOrder } from '../../src/rewards/matrix.js';

describe('numpy-ordered sums', () => {
  it('ten 0.1s sum to 1.0 pairwise (0.9999999999999999 left to right), so their std is exactly 0', () => {
    const xs = Array.from({ length: 10 }, () => 0.1);
    expect(sumInOrder(xs)).toBe(0.9999999999999999);
    expect(npSum(xs)).toBe(1.0);
    expect(npStd(xs)).toBe(0);
  });

  it('past one block of 128 the halves are summed apart', () => {
    const xs = Array.from({ length: 150 }, (_, i) => i / 7);
    expect(sumInOrder(xs)).toBe(1596.4285714285713);
    expect(npSum(xs)).toBe(1596.4285714285716);
    expect(npStd(xs)).toBe(6.185758275440197);
  });

  it('means, stds and medians as numpy prints them', () => {
    expect(npSum([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])).toBe(4.5);
    expect(npStd([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])).toBe(0.25819888974716115);
    const mixed = [...Array.from({ length: 7 }, () => 1 / 3), ...Array.from({ length: 5 }, () => 0.7)];
    expect(npSum(mixed)).toBe(5.833333333333334);
    expect(npStd(mixed)).toBe(0.18076910448359934);
    expect(npMean([1, 2])).toBe(1.5);
    expect(npMedian([3, 1, 4, 1])).toBe(2);
    expect(npMedian([5, 2, 9])).toBe(5);
    expect(Number.isNaN(npMedian([]))).toBe(true);
  });
});
