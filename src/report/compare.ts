/**
 * Round tables of several runs side by side: per metric, one value per run and round, and each
 * run's difference from the first (the baseline). Pure; `crucible compare` prints it and the
 * HTML report shows it. A figure a run does not have (validity, kill rate, test reward and
 * best-of-N of a method without generated tests; the Mistake Book of a method without one) is
 * null, printed as a dash, and gives no difference.
 */
import type { RoundRow } from '../projections/round-table.js';
import type { RoundSelection } from '../projections/answer-selection.js';
import type { RunSummary } from './run-data.js';

export type MetricKind = 'share' | 'count' | 'reward';

export interface Metric {
  key: string;
  label: string;
  kind: MetricKind;
  of(row: RoundRow | undefined, selection: RoundSelection | undefined): number | null;
}

export const METRICS: readonly Metric[] = [
  // The headline figures: exact, from the Learner's PolicyEvaluated (null where a run has none).
  { key: 'exactCorrect', label: 'P(correct)', kind: 'share', of: (r) => r?.exactCorrect ?? null },
  { key: 'exactValid', label: 'P(valid test)', kind: 'share', of: (r) => r?.exactValid ?? null },
  { key: 'heldOutPass', label: 'held-out pass', kind: 'share', of: (r) => r?.heldOutPass ?? null },
  { key: 'validity', label: 'test validity', kind: 'share', of: (r) => r?.validity ?? null },
  { key: 'killRate', label: 'kill rate', kind: 'share', of: (r) => r?.killRate ?? null },
  { key: 'mistakeBook', label: 'mistake book', kind: 'count', of: (r) => r?.mistakeBook ?? null },
  { key: 'codeReward', label: 'code reward', kind: 'reward', of: (r) => r?.codeReward ?? null },
  { key: 'testReward', label: 'test reward', kind: 'reward', of: (r) => r?.testReward ?? null },
  { key: 'bestOfN', label: 'best-of-N (generated tests)', kind: 'share', of: (_r, s) => s?.generated ?? null },
  // A run without a Mistake Book has no such selector (its figure would repeat best-of-N).
  { key: 'bestOfNBook', label: 'best-of-N (with Mistake Book)', kind: 'share', of: (r, s) => (r?.mistakeBook === null ? null : (s?.withBook ?? null)) },
  { key: 'randomPick', label: 'random pick', kind: 'share', of: (_r, s) => s?.random ?? null },
  { key: 'oracle', label: 'oracle best', kind: 'share', of: (_r, s) => s?.oracle ?? null },
];

export interface CompareRow {
  round: number;
  /** One per run; null where the run has no such round. */
  values: (number | null)[];
  /** values[i] - values[0]; null for the baseline or a missing value. */
  diffs: (number | null)[];
}

export interface CompareTable {
  metric: string;
  label: string;
  kind: MetricKind;
  rows: CompareRow[];
}

export function compareRuns(runs: readonly Pick<RunSummary, 'rows' | 'selection'>[]): CompareTable[] {
  const rounds = [...new Set(runs.flatMap((r) => r.rows.map((x) => x.round)))].sort((a, b) => a - b);
  return METRICS.map((m) => ({
    metric: m.key,
    label: m.label,
    kind: m.kind,
    rows: rounds.map((round) => {
      const values = runs.map((r) => {
        const row = r.rows.find((x) => x.round === round);
        return row
          ? m.of(
              row,
              r.selection.find((s) => s.round === round),
            )
          : null;
      });
      const base = values[0] ?? null;
      return { round, values, diffs: values.map((v, i) => (i === 0 || v === null || base === null ? null : v - base)) };
    }),
  }));
}

/** Short labels for runs: A, B, C... (AA after Z). */
export function runLabel(i: number): string {
  let s = '';
  let n = i;
  do {
    s = String.fromCharCode(65 + (n % 26)) + s;
    n = Math.floor(n / 26) - 1;
  } while (n >= 0);
  return s;
}

export function formatValue(kind: MetricKind, v: number | null, signed = false): string {
  if (v === null) return '-';
  const sign = signed && v > 0 ? '+' : '';
  if (kind === 'share') return `${sign}${(100 * v).toFixed(1)}${signed ? ' pt' : '%'}`;
  if (kind === 'count') return `${sign}${v}`;
  return `${sign}${v.toFixed(3)}`;
}
