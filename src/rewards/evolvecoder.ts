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
  testPassCount,
  testSignature,
  testVector,
} from './matrix.js';

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
  })
  .strict();
export type AugmentationOptionsInput = z.input<typeof AugmentationOptions>;

export interface AugmentationSelection {
  /** Row indices: top by pass rate, then the mid-pass picks in pick order. */
  programs: number[];
  top: number[];
  mid: number[];
  ids: string[];
  passRates: number[];
}

/**
 * Step 2: programs shown for adversarial augmentation: the `top` (2) highest pass rates over
 * `tests` (ties: earlier program), then `mid` (3) programs with pass rate in [0.4, 0.9), picked
 * greedily, each maximizing its minimum Hamming distance to the programs already picked (top
 * included; ties: earlier program). Fewer are returned when the pool is short.
 */
export function selectForAugmentation(
  m: ExecutionMatrix,
  tests: readonly number[],
  options: AugmentationOptionsInput = {},
): AugmentationSelection {
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
  const picked = top.slice();
  const mid: number[] = [];
  while (mid.length < o.mid && pool.length > 0) {
    let bestI = 0;
    let bestD = -1;
    pool.forEach((p, i) => {
      const d = picked.length === 0 ? 0 : Math.min(...picked.map((q) => hamming(vec.get(p)!, vec.get(q)!)));
      if (d > bestD) {
        bestD = d;
        bestI = i;
      }
    });
    const [p] = pool.splice(bestI, 1) as [number];
    mid.push(p);
    picked.push(p);
  }
  return { programs: picked, top, mid, ids: programIds(m, picked), passRates: picked.map((p) => rate.get(p)!) };
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

/** Step 3: redundancy reduction: keep `perSignature` (1) tests of each signature, the first. */
export function reduceRedundancy(m: ExecutionMatrix, tests: readonly number[], perSignature = 1): number[] {
  if (!Number.isInteger(perSignature) || perSignature < 1) throw new RewardInputError(`perSignature must be a positive integer, got ${String(perSignature)}`);
  const keep = new Set(groupBySignature(m, tests).flatMap((g) => g.tests.slice(0, perSignature)));
  return tests.filter((t) => keep.has(t));
}

/**
 * Step 4 helper: `k` (5) candidates with similar signatures: for each candidate, itself and its
 * k-1 nearest others by Hamming distance over `tests` (ties: earlier); the group with the least
 * total distance wins (ties: earlier seed). Returned in matrix order.
 */
export function selectSimilarPrograms(m: ExecutionMatrix, tests: readonly number[], k = 5): number[] {
  const candidates = candidateIndices(m);
  if (candidates.length <= k) return candidates;
  const vec = new Map(candidates.map((p) => [p, passVector(m, p, tests)] as const));
  let best: number[] = [];
  let bestCost = Infinity;
  for (const seed of candidates) {
    const others = candidates
      .filter((p) => p !== seed)
      .map((p) => ({ p, d: hamming(vec.get(seed)!, vec.get(p)!) }))
      .sort((a, b) => (a.d !== b.d ? a.d - b.d : a.p - b.p))
      .slice(0, k - 1);
    const cost = others.reduce((s, x) => s + x.d, 0);
    if (cost < bestCost) {
      bestCost = cost;
      best = [seed, ...others.map((x) => x.p)];
    }
  }
  return best.sort((a, b) => a - b);
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
    perSignature: z.number().int().positive().default(5),
    minTests: z.number().int().nonnegative().default(5),
    maxPerfect: z.number().int().nonnegative().default(60),
  })
  .strict();
export type FinalFilterOptionsInput = z.input<typeof FinalFilterOptions>;

export interface FinalFilterResult {
  tests: number[];
  /** Candidates that pass every kept test (a test with an unknown cell is not passed). */
  perfect: number;
  keepProblem: boolean;
  reason: 'ok' | 'too_few_tests' | 'too_many_perfect';
}

/** Final filter: at most 5 tests per signature; drop the problem if it has fewer than 5 tests
 * left or more than 60 perfect solutions. */
export function finalFilter(
  m: ExecutionMatrix,
  tests: readonly number[],
  options: FinalFilterOptionsInput = {},
): FinalFilterResult {
  const o = parseWith(FinalFilterOptions, options, 'final filter options');
  const kept = reduceRedundancy(m, tests, o.perSignature);
  const perfect = candidateIndices(m).filter((p) => passVector(m, p, kept).every((x) => x === 'pass')).length;
  const reason = kept.length < o.minTests ? 'too_few_tests' : perfect > o.maxPerfect ? 'too_many_perfect' : 'ok';
  return { tests: kept, perfect, keepProblem: reason === 'ok', reason };
}
