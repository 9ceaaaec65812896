/** Pure softmax-policy math for the catalog policy: probabilities, sampling, exact gradients. */
import type { Rng } from '../../core/rng.js';

export function softmax(logits: readonly number[]): number[] {
  if (logits.length === 0) return [];
  const top = Math.max(...logits);
  const exps = logits.map((l) => Math.exp(l - top));
  const z = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => e / z);
}

/** Index drawn from the distribution (which must sum to ~1). */
export function sampleIndex(probs: readonly number[], rng: Rng): number {
  let u = rng.next();
  for (let i = 0; i < probs.length; i++) {
    u -= probs[i] as number;
    if (u < 0) return i;
  }
  return probs.length - 1;
}

/** k distinct indices, each drawn from the softmax over those not yet drawn (Plackett-Luce);
 * returns them with the log-probability of the ordered draw. */
export function sampleWithoutReplacement(logits: readonly number[], k: number, rng: Rng): { picks: number[]; logprob: number } {
  const remaining = logits.map((_, i) => i);
  const picks: number[] = [];
  let logprob = 0;
  while (picks.length < k && remaining.length > 0) {
    const probs = softmax(remaining.map((i) => logits[i] as number));
    const j = sampleIndex(probs, rng);
    logprob += Math.log(probs[j] as number);
    picks.push(remaining[j] as number);
    remaining.splice(j, 1);
  }
  return { picks, logprob };
}

/** Gradient of log P(ordered picks) under Plackett-Luce over the logits: for each pick,
 * onehot(pick) - softmax(remaining). With one pick it is the plain softmax gradient. */
export function logprobGradient(logits: readonly number[], picks: readonly number[]): number[] {
  const grad = logits.map(() => 0);
  const remaining = new Set(logits.map((_, i) => i));
  for (const pick of picks) {
    const idx = [...remaining];
    const probs = softmax(idx.map((i) => logits[i] as number));
    idx.forEach((i, j) => {
      grad[i] = (grad[i] as number) - (probs[j] as number);
    });
    grad[pick] = (grad[pick] as number) + 1;
    remaining.delete(pick);
  }
  return grad;
}

export function entropy(probs: readonly number[]): number {
  return -probs.reduce((s, p) => (p > 0 ? s + p * Math.log(p) : s), 0);
}
