/**
 * Group-normalized advantages: (reward - mean) / (std + eps) per group.
 *
 * std: 'sample' (n - 1; torch.std's default, what verl's GRPO uses), 'population' (n; the
 * z-normalization CURE uses), or 'none' (Dr. GRPO style: reward - mean only).
 * A group of one sample gets verl's arithmetic: mean 0 and std 1, so its advantage is
 * reward / (1 + eps) (reward itself with std 'none'), which is the reward at the bf16 precision
 * the release trains in. A group of two or more whose rewards are all equal gets exactly zero
 * advantages: it carries no signal, and this avoids float residue from (r - mean) when the mean
 * is inexact (verl would divide that residue by eps).
 */
import { z } from 'zod';
import { RewardInputError, compareKeys, parseWith, sumInOrder } from './matrix.js';

export const AdvantageOptions = z
  .object({
    std: z.enum(['sample', 'population', 'none']).default('sample'),
    eps: z.number().nonnegative().default(1e-6),
  })
  .strict();
export type AdvantageOptions = z.output<typeof AdvantageOptions>;
export type AdvantageOptionsInput = z.input<typeof AdvantageOptions>;

function checkRewards(rewards: readonly number[]): void {
  rewards.forEach((r, i) => {
    if (!Number.isFinite(r)) throw new RewardInputError(`reward ${i} is not a finite number: ${String(r)}`);
  });
}

/** Advantages of one group, in input order. */
export function groupAdvantages(rewards: readonly number[], options: AdvantageOptionsInput = {}): number[] {
  const o = parseWith(AdvantageOptions, options, 'advantage options');
  checkRewards(rewards);
  const n = rewards.length;
  if (n === 0) return [];
  // verl (compute_grpo_outcome_advantage): a lone sample is normalized with mean 0, std 1.
  // (`+ 0`: a recorded advantage is never negative zero.)
  if (n === 1) return o.std === 'none' ? [rewards[0]! + 0] : [(rewards[0]! + 0) / (1 + o.eps)];
  const first = rewards[0] as number;
  if (rewards.every((r) => r === first)) return rewards.map(() => 0);
  const mean = sumInOrder(rewards) / n;
  if (o.std === 'none') return rewards.map((r) => r - mean);
  const ss = sumInOrder(rewards.map((r) => (r - mean) * (r - mean)));
  const std = Math.sqrt(ss / (o.std === 'sample' ? n - 1 : n));
  return rewards.map((r) => (r - mean) / (std + o.eps));
}

/** Advantages for samples tagged with a group id; result in input order. Groups are formed by
 * exact id; order within a group is input order, so the floats do not depend on map order. */
export function groupedAdvantages(samples: readonly { group: string; reward: number }[], options: AdvantageOptionsInput = {}): number[] {
  const byGroup = new Map<string, number[]>();
  samples.forEach((s, i) => {
    const list = byGroup.get(s.group);
    if (list) list.push(i);
    else byGroup.set(s.group, [i]);
  });
  const out = new Array<number>(samples.length).fill(0);
  for (const g of [...byGroup.keys()].sort(compareKeys)) {
    const idx = byGroup.get(g) as number[];
    const adv = groupAdvantages(
      idx.map((i) => (samples[i] as { reward: number }).reward),
      options,
    );
    idx.forEach((i, j) => {
      out[i] = adv[j] as number;
    });
  }
  return out;
}

/** CURE's z-normalization: population std, eps 1e-6. */
export function zNormalize(values: readonly number[], eps = 1e-6): number[] {
  return groupAdvantages(values, { std: 'population', eps });
}
