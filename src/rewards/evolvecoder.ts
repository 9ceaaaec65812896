/**
 * EvolveCoder's selection rules (TIGER-AI-Lab/EvolveCoder, METHODS.md) as pure functions over an
 * execution matrix of candidate programs x tests. Reference programs are never candidates.
 * Unknown cells (sandbox errors) are left out of every rate and distance.
 */
import { z } from 'zod';
import {
  type ExecutionMatrix,
  type Outcome,
  RewardInputError,
  candidateIndices,
  countOutcomes,
  parseWith,
  passVector,
  signatureOf,
  testPassCount,
  testSignature,
  testVector,
} from './matrix.js';
import type { Rng } from '../core/rng.js';

export const EVOLVECODER_ID = 'evolvecoder/v1';

function programIds(m: ExecutionMatrix, idx: readonly number[]): string[] {
  return idx.map((p) => m.programs[p]!.id);
}

export interface FilterResult {
  kept: number[];
  dropped: { test: number; passRate: number; observed: number; reason: 'low_pass' | 'unobserved' }[];
}

/**
 * Step 1 (and 3): drop tests passed by fewer than `threshold` (10%) of the candidates that have a
 * verdict on them; a test no candidate has a verdict on is dropped as unobserved.
 */
export function lowPassFilter(m: ExecutionMatrix, tests: readonly number[], threshold = 0.1): FilterResult {
  if (!(threshold >= 0 && threshold <= 1)) throw new RewardInputError(`threshold must be in [0, 1], got ${String(threshold)}`);
  const programs = candidateIndices(m);
  const kept: number[] = [];
  const dropped: FilterResult['dropped'] = [];
  for (const t of tests) {
    const c = testPassCount(m, t, programs);
    if (c.observed === 0) dropped.push({ test: t, passRate: 0, observed: 0, reason: 'unobserved' });
    else if (c.rate < threshold) dropped.push({ test: t, passRate: c.rate, observed: c.observed, reason: 'low_pass' });
    else kept.push(t);
  }
  return { kept, dropped };
}

/** Hamming distance of two pass vectors over positions where both are known. */
export function hamming(a: readonly Outcome[], b: readonly Outcome[]): number {
  if (a.length !== b.length) throw new RewardInputError(`pass vectors differ in length: ${a.length} vs ${b.length}`);
  let d = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    const y = b[i];
    if (x !== 'unknown' && y !== 'unknown' && x !== y) d++;
  }
  return d;
}

export const AugmentationOptions = z
  .object({
    top: z.number().int().nonnegative().default(2),
    mid: z.number().int().nonnegative().default(3),
    /** Mid-pass range [low, high). */
    midLow: z.number().min(0).max(1).default(0.4),
    midHigh: z.number().min(0).max(1).default(0.9),
    /** Fallback pool when fewer than `mid` programs are mid-pass: pass rate above this. */
    fallbackAbove: z.number().min(0).max(1).default(0.1),
  })
  .strict();
export type AugmentationOptionsInput = z.input<typeof AugmentationOptions>;

export interface AugmentationSelection {
  /** Row indices shown to the model: top by pass rate, then the mid picks (no repeats). */
  programs: number[];
  top: number[];
  /** The mid-pass picks in matrix order (or the fallback's random picks). */
  mid: number[];
  /** Fewer than `mid` programs were mid-pass: `mid` holds random programs above `fallbackAbove`. */
  fallback: boolean;
  ids: string[];
  passRates: number[];
}

/** Every k-subset of `items` in lexicographic order of positions. */
function* combinations<T>(items: readonly T[], k: number, start = 0, prefix: T[] = []): Generator<T[]> {
  if (prefix.length === k) {
    yield prefix.slice();
    return;
  }
  for (let i = start; i <= items.length - (k - prefix.length); i++) {
    prefix.push(items[i]!);
    yield* combinations(items, k, i + 1, prefix);
    prefix.pop();
  }
}

/**
 * Step 2: programs shown for adversarial augmentation, as the release picks them: the `top` (2)
 * highest pass rates over `tests` (ties: earlier program); then, among the other programs with
 * pass rate in [0.4, 0.9), the `mid` (3) whose minimum pairwise Hamming distance is largest,
 * found by exhaustive search (ties: larger total pairwise distance, then the earlier set). With
 * fewer than `mid` such programs: `mid` programs drawn at random (from `rng`) among those with
 * pass rate above 0.1.
 */
export function selectForAugmentation(m: ExecutionMatrix, tests: readonly number[], options: AugmentationOptionsInput = {}, rng?: Rng): AugmentationSelection {
  const o = parseWith(AugmentationOptions, options, 'augmentation options');
  const candidates = candidateIndices(m);
  const rate = new Map<number, number>();
  const vec = new Map<number, Outcome[]>();
  for (const p of candidates) {
    const v = passVector(m, p, tests);
    vec.set(p, v);
    rate.set(p, countOutcomes(v).rate);
  }
  const byRate = candidates.slice().sort((a, b) => (rate.get(b)! !== rate.get(a)! ? rate.get(b)! - rate.get(a)! : a - b));
  const top = byRate.slice(0, o.top);
  const pool = candidates.filter((p) => !top.includes(p) && rate.get(p)! >= o.midLow && rate.get(p)! < o.midHigh);
  let mid: number[] = [];
  let fallback = false;
  if (pool.length >= o.mid) {
    let bestMin = -1;
    let bestTotal = -1;
    for (const set of combinations(pool, o.mid)) {
      let min = Infinity;
      let total = 0;
      for (const [a, b] of combinations(set, 2)) {
        const d = hamming(vec.get(a!)!, vec.get(b!)!);
        min = Math.min(min, d);
        total += d;
      }
      if (set.length < 2) min = 0;
      if (min > bestMin || (min === bestMin && total > bestTotal)) {
        bestMin = min;
        bestTotal = total;
        mid = set;
      }
    }
  } else if (o.mid > 0) {
    if (rng === undefined) throw new RewardInputError('selectForAugmentation needs an rng for its random fallback');
    fallback = true;
    const above = candidates.filter((p) => rate.get(p)! > o.fallbackAbove);
    mid = rng
      .shuffle(above)
      .slice(0, o.mid)
      .sort((a, b) => a - b);
  }
  const picked = [...top, ...mid.filter((p) => !top.includes(p))];
  return { programs: picked, top, mid, fallback, ids: programIds(m, picked), passRates: picked.map((p) => rate.get(p)!) };
}

export interface SignatureGroup {
  signature: string;
  tests: number[];
}

/** Tests grouped by identical pass/fail signature over the candidates, groups in order of first
 * appearance, tests in input order. */
export function groupBySignature(m: ExecutionMatrix, tests: readonly number[]): SignatureGroup[] {
  const programs = candidateIndices(m);
  const groups = new Map<string, number[]>();
  for (const t of tests) {
    const s = testSignature(m, t, programs);
    const g = groups.get(s);
    if (g) g.push(t);
    else groups.set(s, [t]);
  }
  return [...groups.entries()].map(([signature, ts]) => ({ signature, tests: ts }));
}

/** Step 3: redundancy reduction: keep `perSignature` (1) tests of each signature, chosen at
 * random (from `rng`; the release samples, it does not keep the first). Result in input order. */
export function reduceRedundancy(m: ExecutionMatrix, tests: readonly number[], perSignature: number, rng: Rng): number[] {
  if (!Number.isInteger(perSignature) || perSignature < 1) throw new RewardInputError(`perSignature must be a positive integer, got ${String(perSignature)}`);
  const keep = new Set(groupBySignature(m, tests).flatMap((g) => (g.tests.length <= perSignature ? g.tests : rng.shuffle(g.tests).slice(0, perSignature))));
  return tests.filter((t) => keep.has(t));
}

/**
 * Step 4 helper: `k` (5) candidates with similar signatures over `tests`, as the release picks
 * them: when some programs share a signature, one such group is drawn at random weighted by its
 * size; more than `k` in it: `k` of them at random; fewer: filled with the programs nearest to
 * the group's signature (ties: earlier). When no two share a signature: the `k` with the least
 * total distance to all candidates (ties: earlier). Returned in matrix order.
 */
export function selectSimilarPrograms(m: ExecutionMatrix, tests: readonly number[], k: number, rng: Rng): number[] {
  const candidates = candidateIndices(m);
  if (candidates.length <= k) return candidates;
  const vec = new Map(candidates.map((p) => [p, passVector(m, p, tests)] as const));
  const bySignature = new Map<string, number[]>();
  for (const p of candidates) {
    const s = signatureOf(vec.get(p)!);
    const g = bySignature.get(s);
    if (g) g.push(p);
    else bySignature.set(s, [p]);
  }
  const groups = [...bySignature.values()].filter((g) => g.length >= 2);
  let picked: number[];
  if (groups.length > 0) {
    const total = groups.reduce((n, g) => n + g.length, 0);
    let r = rng.int(total);
    let group = groups[0]!;
    for (const g of groups) {
      if (r < g.length) {
        group = g;
        break;
      }
      r -= g.length;
    }
    if (group.length >= k) picked = rng.shuffle(group).slice(0, k);
    else {
      const center = vec.get(group[0]!)!;
      const rest = candidates
        .filter((p) => !group.includes(p))
        .map((p) => ({ p, d: hamming(center, vec.get(p)!) }))
        .sort((a, b) => (a.d !== b.d ? a.d - b.d : a.p - b.p));
      picked = [...group, ...rest.slice(0, k - group.length).map((x) => x.p)];
    }
  } else {
    const totals = candidates.map((p) => ({ p, d: candidates.reduce((s, q) => s + hamming(vec.get(p)!, vec.get(q)!), 0) }));
    picked = totals
      .sort((a, b) => (a.d !== b.d ? a.d - b.d : a.p - b.p))
      .slice(0, k)
      .map((x) => x.p);
  }
  return picked.sort((a, b) => a - b);
}

/** Step 4: keep the tests passed by at least one and failed by at least one of `programs`. */
export function discriminativeCheck(m: ExecutionMatrix, tests: readonly number[], programs: readonly number[]): number[] {
  return tests.filter((t) => {
    const v = testVector(m, t, programs);
    return v.includes('pass') && v.includes('fail');
  });
}

export const FinalFilterOptions = z
  .object({
    /** Tests passed by fewer than this share of candidates are dropped first. */
    minPassRate: z.number().min(0).max(1).default(0.1),
    perSignature: z.number().int().positive().default(5),
    minTests: z.number().int().nonnegative().default(5),
    maxPerfect: z.number().int().nonnegative().default(60),
  })
  .strict();
export type FinalFilterOptionsInput = z.input<typeof FinalFilterOptions>;

export interface FinalFilterResult {
  tests: number[];
  /** Tests dropped by the pass-rate filter (before the per-signature cap). */
  lowPass: number[];
  /** Candidates that pass every kept test (a test with an unknown cell is not passed). */
  perfect: number;
  keepProblem: boolean;
  reason: 'ok' | 'too_few_tests' | 'too_many_perfect';
}

/** Final filter, in the release's order: drop tests below 0.1 pass rate; keep at most 5 tests
 * per signature (random, from `rng`); drop the problem if it has fewer than 5 tests left or more
 * than 60 perfect solutions. */
export function finalFilter(m: ExecutionMatrix, tests: readonly number[], options: FinalFilterOptionsInput, rng: Rng): FinalFilterResult {
  const o = parseWith(FinalFilterOptions, options, 'final filter options');
  const passing = lowPassFilter(m, tests, o.minPassRate);
  const kept = reduceRedundancy(m, passing.kept, o.perSignature, rng);
  const perfect = candidateIndices(m).filter((p) => passVector(m, p, kept).every((x) => x === 'pass')).length;
  const reason = kept.length < o.minTests ? 'too_few_tests' : perfect > o.maxPerfect ? 'too_many_perfect' : 'ok';
  return { tests: kept, lowPass: passing.dropped.map((d) => d.test), perfect, keepProblem: reason === 'ok', reason };
}
