/**
 * The catalog policy's view of the project's seeded PRNG (src/rewards/rng.ts): a draw function,
 * so that every random choice is a pure function of a recorded seed and replay draws the same
 * samples.
 */
import { Rng as SeededRng } from '../rewards/rng.js';

export type Rng = () => number;

/** An RNG for one purpose under one seed: same (seed, ...parts) -> same stream. */
export function rngFor(seed: number, ...parts: (string | number)[]): Rng {
  const rng = SeededRng.derive(seed, ...parts.map(String));
  return () => rng.next();
}

/** Integer in [lo, hi] inclusive. */
export function randInt(rng: Rng, lo: number, hi: number): number {
  return lo + Math.floor(rng() * (hi - lo + 1));
}

/** Fisher-Yates shuffle into a new array. */
export function shuffled<T>(rng: Rng, items: readonly T[]): T[] {
  const out = items.slice();
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}
