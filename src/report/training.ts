/**
 * Per-step training figures for the report: what the trainer reported in TrainingStepCompleted
 * (its keys differ by trainer: the catalog policy reports gradNorm and meanEntropy, gpu-bridge
 * loss, kl, clip_fraction, grad_norm, entropy) and the reward and advantage spread of each step's
 * batch (its samples' RewardsAssigned figures). A figure no step has is listed as not recorded.
 * Pure.
 */
import type { RewardSample, TrainingStep } from './run-data.js';

export interface TrainingSeries {
  role: string;
  /** Policy version each step made (the step's number for its role). */
  x: number[];
  y: number[];
  /** mean ± 1 s.d. band, where the figure is a batch mean. */
  lo: number[] | null;
  hi: number[] | null;
  rounds: number[];
}

export interface TrainingFigure {
  key: string;
  title: string;
  /** Axis title, with its unit. */
  axis: string;
  recorded: boolean;
  series: TrainingSeries[];
}

interface Spec {
  key: string;
  title: string;
  axis: string;
  /** The trainer's metric keys that carry it, first present wins. */
  keys?: readonly string[];
  /** Or a figure of the batch's samples. */
  batch?: (rewards: readonly RewardSample[]) => { y: number; sd: number | null } | null;
}

const mean = (vs: readonly number[]) => vs.reduce((a, b) => a + b, 0) / vs.length;
const sd = (vs: readonly number[]) => {
  const m = mean(vs);
  return Math.sqrt(vs.reduce((a, v) => a + (v - m) ** 2, 0) / vs.length);
};

export const TRAINING_FIGURES: readonly Spec[] = [
  { key: 'loss', title: 'Loss', axis: 'loss (per token)', keys: ['loss'] },
  {
    key: 'reward',
    title: 'Batch reward (mean ± 1 s.d.)',
    axis: 'reward (method scale)',
    batch: (rs) => (rs.length === 0 ? null : { y: mean(rs.map((r) => r.reward)), sd: sd(rs.map((r) => r.reward)) }),
  },
  {
    key: 'advantage',
    title: 'Advantage spread',
    axis: 'advantage s.d. (reward units)',
    batch: (rs) => (rs.length === 0 ? null : { y: sd(rs.map((r) => r.advantage)), sd: null }),
  },
  { key: 'kl', title: 'KL to the reference', axis: 'KL (nats per token)', keys: ['kl'] },
  { key: 'clip_fraction', title: 'Clip fraction', axis: 'clipped tokens (share)', keys: ['clip_fraction'] },
  { key: 'entropy', title: 'Policy entropy', axis: 'entropy (nats)', keys: ['entropy', 'meanEntropy'] },
  { key: 'grad_norm', title: 'Gradient norm', axis: 'gradient L2 norm', keys: ['grad_norm', 'gradNorm'] },
];

export function trainingFigures(
  steps: readonly TrainingStep[],
  rewards: readonly RewardSample[],
): { figures: TrainingFigure[]; others: string[]; controls: string[] } {
  const byKey = new Map(rewards.map((r) => [`${r.round}\u0000${r.role}\u0000${r.sampleId}`, r]));
  const roles = [...new Set(steps.map((s) => s.role))].sort();
  const batchOf = (s: TrainingStep) =>
    s.sampleIds.map((id) => byKey.get(`${s.round}\u0000${s.role}\u0000${id}`)).filter((r): r is RewardSample => r !== undefined);
  const figures = TRAINING_FIGURES.map((spec): TrainingFigure => {
    const series = roles.map((role): TrainingSeries => {
      const out: TrainingSeries = { role, x: [], y: [], lo: spec.batch ? [] : null, hi: spec.batch ? [] : null, rounds: [] };
      for (const s of steps.filter((t) => t.role === role)) {
        let y: number | null = null;
        let spread: number | null = null;
        if (spec.keys) {
          const k = spec.keys.find((key) => Number.isFinite(s.metrics[key]));
          if (k !== undefined) y = s.metrics[k]!;
        } else if (spec.batch) {
          const v = spec.batch(batchOf(s));
          if (v) ({ y, sd: spread } = v);
        }
        if (y === null) continue;
        out.x.push(s.toVersion);
        out.y.push(y);
        out.rounds.push(s.round);
        if (spread !== null) {
          out.lo!.push(y - spread);
          out.hi!.push(y + spread);
        }
      }
      if (out.lo && out.lo.length !== out.y.length) out.lo = out.hi = null;
      return out;
    });
    return { key: spec.key, title: spec.title, axis: spec.axis, recorded: series.some((s) => s.y.length > 0), series: series.filter((s) => s.y.length > 0) };
  });
  const shown = new Set(TRAINING_FIGURES.flatMap((f) => f.keys ?? []));
  const others = [...new Set(steps.flatMap((s) => Object.keys(s.metrics)))].filter((k) => !shown.has(k)).sort();
  const controls = [...new Set(steps.map((s) => s.control))].filter((c) => c !== 'none').sort();
  return { figures, others, controls };
}
