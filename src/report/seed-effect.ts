/**
 * The effect of training over seeds: runs of one config under several seeds against runs of its
 * control (frozen or shuffled) under the same seeds, paired by seed. Per round, and for the mean
 * of the last rounds, the mean over seeds of trained minus control, with a percentile bootstrap
 * 95% interval over seeds (seeds resampled with replacement, each keeping its own pair). Pure;
 * `crucible compare` prints it and the HTML report shows it.
 *
 * With few seeds the bootstrap interval is narrow for what it knows (with 3 seeds it takes at
 * most 10 distinct values): the seed count is printed beside every interval.
 */
import { Rng } from '../core/rng.js';
import { canonicalJson } from '../core/canonical-json.js';
import { flattenConfig } from './config-diff.js';
import type { RunSummary } from './run-data.js';
import type { RoundRow } from '../projections/round-table.js';

/** The figures whose effect is reported (those a control changes: the policies' quality). */
export const EFFECT_METRICS = [
  { key: 'heldOutPass', label: 'held-out pass' },
  { key: 'exactCorrect', label: 'P(correct)' },
  { key: 'exactValid', label: 'P(valid test)' },
  { key: 'validity', label: 'test validity' },
  { key: 'killRate', label: 'kill rate' },
] as const satisfies readonly { key: keyof RoundRow; label: string }[];

export interface Interval {
  /** Mean over seeds of the paired differences. */
  mean: number;
  lo: number;
  hi: number;
  /** Seeds in the pairing. */
  seeds: number;
}

export interface BootstrapOptions {
  /** Resamples (default 10,000). */
  resamples?: number;
  /** Seed of the resampling (default 0): the same inputs print the same interval. */
  seed?: number;
  /** Coverage (default 0.95). */
  level?: number;
}

/** The percentile bootstrap interval of the mean of `diffs` (one per seed). */
export function pairedBootstrap(diffs: readonly number[], opts: BootstrapOptions = {}): Interval {
  const n = diffs.length;
  if (n === 0) throw new Error('pairedBootstrap: no paired seeds');
  const resamples = opts.resamples ?? 10_000;
  const level = opts.level ?? 0.95;
  const mean = diffs.reduce((a, b) => a + b, 0) / n;
  const rng = new Rng(opts.seed ?? 0);
  const means = new Float64Array(resamples);
  for (let b = 0; b < resamples; b++) {
    let sum = 0;
    for (let i = 0; i < n; i++) sum += diffs[rng.int(n)]!;
    means[b] = sum / n;
  }
  means.sort();
  // Nearest-rank percentiles of the resampled means.
  const at = (q: number) => means[Math.min(resamples - 1, Math.max(0, Math.ceil(q * resamples) - 1))]!;
  return { mean, lo: at((1 - level) / 2), hi: at(1 - (1 - level) / 2), seeds: n };
}

/** Runs split into the trained config's and its control's, paired by seed. */
export interface SeedPairs {
  /** `label`: the config's name, with the settings that tell it apart when both have one name. */
  trained: { name: string; label: string; runs: RunSummary[] };
  control: { name: string; label: string; runs: RunSummary[] };
  /** The settings in which the two configs differ (besides the seed). */
  differences: string[];
}

/** Settings that do not make a config another one: its seed, its name, where its files go. */
const IDENTITY = ['seed', 'name', 'dir'];

/** A config's identity apart from its seed, its name and where its files go: runs with one key are
 * seeds of one setting. */
export function configKey(config: unknown): string {
  const flat = flattenConfig(config);
  for (const k of IDENTITY) flat.delete(k);
  return canonicalJson(Object.fromEntries([...flat].sort(([a], [b]) => (a < b ? -1 : 1))));
}

/** The config's control ('frozen', 'shuffled'), or null for a trained run ('none' or absent). */
export const controlOf = (config: unknown): unknown => {
  const c = flattenConfig(config).get('learner.control');
  return c === undefined || c === 'none' ? null : c;
};

/**
 * The runs as two configs under common seeds. The control is the config whose Learner runs a
 * control (frozen or shuffled); when neither or both do, the first run's config is the baseline.
 * Not two configs, a seed twice in one, or no seed in common: why not, instead.
 */
export function pairBySeed(runs: readonly RunSummary[]): { ok: true; pairs: SeedPairs } | { ok: false; reason: string } {
  const groups = new Map<string, RunSummary[]>();
  for (const r of runs) {
    const k = configKey(r.config);
    const g = groups.get(k);
    if (g) g.push(r);
    else groups.set(k, [r]);
  }
  if (groups.size !== 2) return { ok: false, reason: `the runs are of ${groups.size} configs (apart from their seeds), not two` };
  const [first, second] = [...groups.values()] as [RunSummary[], RunSummary[]];
  const firstControls = controlOf(first[0]!.config) !== null;
  const secondControls = controlOf(second[0]!.config) !== null;
  const [trainedAll, controlAll] = firstControls === secondControls || firstControls ? [second, first] : [first, second];
  for (const g of [trainedAll, controlAll]) {
    const seen = new Set<number>();
    for (const r of g) {
      if (seen.has(r.seed)) return { ok: false, reason: `config ${r.name} has two runs of seed ${r.seed}` };
      seen.add(r.seed);
    }
  }
  const controlSeeds = new Set(controlAll.map((r) => r.seed));
  const trained = trainedAll.filter((r) => controlSeeds.has(r.seed)).sort((x, y) => x.seed - y.seed);
  if (trained.length === 0) return { ok: false, reason: 'the two configs have no seed in common' };
  const common = new Set(trained.map((r) => r.seed));
  const control = controlAll.filter((r) => common.has(r.seed)).sort((x, y) => x.seed - y.seed);
  const ft = flattenConfig(trained[0]!.config);
  const fc = flattenConfig(control[0]!.config);
  const differences = [...new Set([...ft.keys(), ...fc.keys()])]
    .filter((k) => !IDENTITY.includes(k) && canonicalJson(ft.get(k) ?? null) !== canonicalJson(fc.get(k) ?? null))
    .sort();
  const label = (r: RunSummary, flat: Map<string, unknown>) =>
    trained[0]!.name !== control[0]!.name ? r.name : `${r.name} (${differences.map((k) => `${k}=${canonicalJson(flat.get(k) ?? null)}`).join(', ')})`;
  return {
    ok: true,
    pairs: {
      trained: { name: trained[0]!.name, label: label(trained[0]!, ft), runs: trained },
      control: { name: control[0]!.name, label: label(control[0]!, fc), runs: control },
      differences,
    },
  };
}

export interface EffectRow {
  /** A round, or the mean of rounds `rounds` (the last rounds). */
  round: number | 'last';
  rounds: number[];
  /** Null where some pair lacks the figure. */
  effect: Interval | null;
}

export interface EffectTable {
  metric: string;
  label: string;
  rows: EffectRow[];
}

/** Rounds every paired run finished, ascending. */
function commonRounds(runs: readonly RunSummary[]): number[] {
  const sets = runs.map((r) => new Set(r.rows.map((x) => x.round)));
  return [...sets[0]!].filter((round) => sets.every((s) => s.has(round))).sort((x, y) => x - y);
}

/**
 * Per metric: per round the paired effect, then the effect on the mean of the last `last`
 * rounds (default: the last half, rounded up).
 */
export function seedEffects(pairs: SeedPairs, opts: BootstrapOptions & { last?: number } = {}): EffectTable[] {
  const all = [...pairs.trained.runs, ...pairs.control.runs];
  const rounds = commonRounds(all);
  const last = rounds.slice(-Math.max(1, Math.min(rounds.length, opts.last ?? Math.ceil(rounds.length / 2))));
  const value = (run: RunSummary, metric: keyof RoundRow, round: number) => {
    const v = run.rows.find((r) => r.round === round)?.[metric];
    return typeof v === 'number' ? v : null;
  };
  const meanOver = (run: RunSummary, metric: keyof RoundRow, over: readonly number[]) => {
    const vs = over.map((round) => value(run, metric, round));
    return vs.some((v) => v === null) ? null : (vs as number[]).reduce((a, b) => a + b, 0) / vs.length;
  };
  const effect = (metric: keyof RoundRow, over: readonly number[]): Interval | null => {
    const diffs: number[] = [];
    for (let i = 0; i < pairs.trained.runs.length; i++) {
      const t = meanOver(pairs.trained.runs[i]!, metric, over);
      const c = meanOver(pairs.control.runs[i]!, metric, over);
      if (t === null || c === null) return null;
      diffs.push(t - c);
    }
    return pairedBootstrap(diffs, opts);
  };
  return EFFECT_METRICS.map((m) => ({
    metric: m.key,
    label: m.label,
    rows: [
      ...rounds.map((round): EffectRow => ({ round, rounds: [round], effect: effect(m.key, [round]) })),
      ...(rounds.length > 0 ? [{ round: 'last' as const, rounds: last, effect: effect(m.key, last) }] : []),
    ],
  }));
}

/** An effect as one short cell: `+12.3 pt [+4.1, +20.0]` (shares in points). */
export function formatEffect(e: Interval | null): string {
  if (e === null) return '-';
  const pt = (v: number) => `${v > 0 ? '+' : ''}${(100 * v).toFixed(1)}`;
  return `${pt(e.mean)} pt [${pt(e.lo)}, ${pt(e.hi)}]`;
}
