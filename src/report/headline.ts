/**
 * The report's headline: per round, the figures that say whether a run learned, for every run
 * given. Runs whose configs differ only in their seed are one setting, drawn as the mean over
 * seeds with a min-max band; a control (learner.control frozen or shuffled) is a setting of its
 * own, marked as such. Pure.
 */
import type { RoundRow } from '../projections/round-table.js';
import { configDiff } from './config-diff.js';
import { configKey, controlOf } from './seed-effect.js';
import type { RunSummary } from './run-data.js';

export interface HeadlineMetric {
  key: 'exactCorrect' | 'exactValid' | 'heldOutPass' | 'validity' | 'killRate';
  label: string;
  /** The figure of the policies the last step made (drawn one round after the last). */
  trained?: 'trainedCorrect' | 'trainedValid';
  note: string;
}

export const HEADLINE_METRICS: readonly HeadlineMetric[] = [
  { key: 'exactCorrect', label: 'P(correct)', trained: 'trainedCorrect', note: 'exact probability that the code policy samples a correct program' },
  { key: 'exactValid', label: 'P(valid test)', trained: 'trainedValid', note: 'exact probability that the test policy samples a valid test' },
  { key: 'heldOutPass', label: 'held-out pass', note: 'sampled programs passing every held-out test' },
  { key: 'validity', label: 'test validity', note: 'generated tests the reference passes' },
  { key: 'killRate', label: 'kill rate', note: '(suite, known-wrong program) pairs where the suite fails the program' },
];

export interface HeadlineGroup {
  label: string;
  /** The control the setting runs ('frozen', 'shuffled'), or null for a trained setting. */
  control: string | null;
  runIds: string[];
  seeds: number[];
}

/** One setting's line: per x, the mean over its seeds, and the band (null with one seed). */
export interface HeadlineLine {
  mean: (number | null)[];
  min: (number | null)[] | null;
  max: (number | null)[] | null;
}

export interface Headline {
  /** Rounds, then `after N` when the policies after the last step were evaluated. */
  x: string[];
  groups: HeadlineGroup[];
  metrics: { key: string; label: string; note: string; recorded: boolean; lines: HeadlineLine[] }[];
}

/** Runs grouped by setting (configKey), in the order the settings first appear. */
export function groupBySetting<R extends Pick<RunSummary, 'config'>>(runs: readonly R[]): R[][] {
  const groups = new Map<string, R[]>();
  for (const r of runs) {
    const k = configKey(r.config);
    const g = groups.get(k);
    if (g) g.push(r);
    else groups.set(k, [r]);
  }
  return [...groups.values()];
}

/** The settings' labels: the config's name, with the settings that tell apart groups of one name. */
function groupLabels(groups: readonly RunSummary[][]): string[] {
  return groups.map((g) => {
    const name = g[0]!.name;
    const twins = groups.filter((o) => o[0]!.name === name);
    if (twins.length === 1) return name;
    const diff = configDiff(twins.map((o) => o[0]!.config)).filter((d) => !['seed', 'name', 'dir'].includes(d.key));
    const own = twins.indexOf(g);
    return `${name} (${diff.map((d) => `${d.key}=${JSON.stringify(d.values[own] ?? null)}`).join(', ')})`;
  });
}

const meanOf = (vs: readonly number[]) => vs.reduce((a, b) => a + b, 0) / vs.length;

export function headline(runs: readonly RunSummary[]): Headline {
  const settings = groupBySetting(runs);
  const labels = groupLabels(settings);
  const rounds = [...new Set(runs.flatMap((r) => r.rows.map((x) => x.round)))].sort((a, b) => a - b);
  const last = rounds.at(-1) ?? 0;
  const hasAfter = runs.some((r) => {
    const end = r.rows.at(-1);
    return end !== undefined && (end.trainedCorrect !== null || end.trainedValid !== null);
  });
  const xs = hasAfter ? [...rounds, last + 1] : rounds;
  // The value of run r at x: its round row, or the last step's figure one round after its last.
  const valueAt = (r: RunSummary, m: HeadlineMetric, x: number): number | null => {
    const row = r.rows.find((y) => y.round === x);
    if (row) return row[m.key];
    const end = r.rows.at(-1);
    if (m.trained && end && end.round + 1 === x) return (end as RoundRow)[m.trained];
    return null;
  };
  const metrics = HEADLINE_METRICS.map((m) => {
    const lines = settings.map((g): HeadlineLine => {
      const at = xs.map((x) => g.map((r) => valueAt(r, m, x)).filter((v): v is number => v !== null));
      return {
        mean: at.map((vs) => (vs.length === 0 ? null : meanOf(vs))),
        min: g.length > 1 ? at.map((vs) => (vs.length === 0 ? null : Math.min(...vs))) : null,
        max: g.length > 1 ? at.map((vs) => (vs.length === 0 ? null : Math.max(...vs))) : null,
      };
    });
    return { key: m.key, label: m.label, note: m.note, recorded: lines.some((l) => l.mean.some((v) => v !== null)), lines };
  });
  const control = (c: unknown) => (typeof c === 'string' ? c : c === null ? null : JSON.stringify(c));
  return {
    x: xs.map((x) => (hasAfter && x === last + 1 ? `after ${last}` : String(x))),
    groups: settings.map((g, i) => ({
      label: labels[i]!,
      control: control(controlOf(g[0]!.config)),
      runIds: g.map((r) => r.runId),
      seeds: g.map((r) => r.seed),
    })),
    metrics,
  };
}
