/**
 * Evaluation figures every method needs: unbiased pass@k, test validity rate, kill rate
 * (mutation score), and discrimination (distinct pass/fail signatures).
 */
import { type ExecutionMatrix, type TestStatus, RewardInputError, isUsable, passVector, testSignature } from './matrix.js';

/**
 * Unbiased pass@k from n samples of which c are correct: 1 - C(n-c, k) / C(n, k), computed as
 * 1 - prod_{i=n-c+1}^{n} (1 - k / i) so no binomial overflows (Chen et al., 2021).
 */
export function passAtK(n: number, c: number, k: number): number {
  for (const [name, v] of [
    ['n', n],
    ['c', c],
    ['k', k],
  ] as const) {
    if (!Number.isInteger(v) || v < 0) throw new RewardInputError(`pass@k: ${name} must be a non-negative integer, got ${String(v)}`);
  }
  if (c > n) throw new RewardInputError(`pass@k: c (${c}) exceeds n (${n})`);
  if (k < 1 || k > n) throw new RewardInputError(`pass@k: k must be in [1, n] = [1, ${n}], got ${k}`);
  if (n - c < k) return 1;
  let prod = 1;
  for (let i = n - c + 1; i <= n; i++) prod *= 1 - k / i;
  return 1 - prod;
}

/** Mean pass@k over problems, each given as (n, c). */
export function meanPassAtK(problems: readonly { n: number; c: number }[], k: number): number {
  if (problems.length === 0) return 0;
  let s = 0;
  for (const p of problems) s += passAtK(p.n, p.c, k);
  return s / problems.length;
}

export interface Rate {
  numerator: number;
  denominator: number;
  /** numerator / denominator; 0 when the denominator is 0. */
  rate: number;
}

function rate(numerator: number, denominator: number): Rate {
  return { numerator, denominator, rate: denominator === 0 ? 0 : numerator / denominator };
}

/** Share of judged tests that are usable (valid, or corrected when `countCorrected`); tests with
 * status unknown (GT not run) are left out. */
export function validityRate(statuses: readonly TestStatus[], countCorrected = false): Rate {
  let ok = 0;
  let judged = 0;
  for (const s of statuses) {
    if (s === 'unknown') continue;
    judged++;
    if (s === 'valid' || (countCorrected && s === 'corrected')) ok++;
  }
  return rate(ok, judged);
}

/**
 * Mutation score: share of known-buggy programs (`mutants`, matrix row indices) that at least one
 * of `tests` fails. A mutant with no observed verdict at all (every cell a sandbox error) is left
 * out of the denominator: nothing was learned about it.
 */
export function killRate(m: ExecutionMatrix, mutants: readonly number[], tests: readonly number[]): Rate {
  let killed = 0;
  let judged = 0;
  for (const p of mutants) {
    const v = passVector(m, p, tests);
    if (v.every((o) => o === 'unknown')) continue;
    judged++;
    if (v.includes('fail')) killed++;
  }
  return rate(killed, judged);
}

/** Distinct pass/fail signatures of the given tests (default: usable tests) over the given
 * programs (default: all). Unknown cells are their own symbol. */
export function distinctSignatures(m: ExecutionMatrix, tests?: readonly number[], programs?: readonly number[]): number {
  const ts = tests ?? m.tests.flatMap((t, i) => (isUsable(t.status) ? [i] : []));
  const seen = new Set<string>();
  for (const t of ts) seen.add(testSignature(m, t, programs));
  return seen.size;
}
