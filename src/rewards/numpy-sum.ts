/**
 * Sums, means and standard deviations in numpy's order of operations, for the rules whose
 * release computes them with numpy (CURE's normalization and length regularization): numpy adds
 * float arrays pairwise (eight accumulators per block of up to 128, halves beyond), so a
 * left-to-right sum can differ from it in the last bits, and parity is asked for at float64.
 * Checked against numpy 2.4 on arrays of 1 to 1031 values (test/rewards/numpy-sum.test.ts holds
 * cases computed by numpy).
 */

/** numpy's pairwise_sum over xs[lo, lo + n). */
function pairwise(xs: readonly number[], lo: number, n: number): number {
  if (n < 8) {
    let res = 0;
    for (let i = 0; i < n; i++) res += xs[lo + i]!;
    return res;
  }
  if (n <= 128) {
    const r = xs.slice(lo, lo + 8);
    let i = 8;
    for (; i < n - (n % 8); i += 8) for (let j = 0; j < 8; j++) r[j]! += xs[lo + i + j]!;
    let res = r[0]! + r[1]! + (r[2]! + r[3]!) + (r[4]! + r[5]! + (r[6]! + r[7]!));
    for (; i < n; i++) res += xs[lo + i]!;
    return res;
  }
  let n2 = Math.floor(n / 2);
  n2 -= n2 % 8;
  return pairwise(xs, lo, n2) + pairwise(xs, lo + n2, n - n2);
}

/** np.sum of a 1-d float array. */
export function npSum(xs: readonly number[]): number {
  return pairwise(xs, 0, xs.length);
}

/** np.mean (NaN for an empty array, as numpy gives with a warning). */
export function npMean(xs: readonly number[]): number {
  return npSum(xs) / xs.length;
}

/** np.std: the population standard deviation, mean and squares summed as numpy does. */
export function npStd(xs: readonly number[]): number {
  const mean = npMean(xs);
  return Math.sqrt(npSum(xs.map((x) => (x - mean) * (x - mean))) / xs.length);
}

/** np.median: the middle value, or the mean of the two middle values (NaN when empty). */
export function npMedian(xs: readonly number[]): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}
