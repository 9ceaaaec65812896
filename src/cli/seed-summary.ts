/**
 * Figures of one config over several seeds: per round, the mean and spread (min, max, sample
 * std) over seeds of each column of the round table. Pure: rows in, summary out.
 */
import type { RoundRow } from '../projections/round-table.js';

export const SUMMARY_COLUMNS = [
  'heldOutPass',
  'exactCorrect',
  'validity',
  'exactValid',
  'killRate',
  'mistakeBook',
  'codeReward',
  'testReward',
  'trainedCorrect',
  'trainedValid',
] as const;
export type SummaryColumn = (typeof SUMMARY_COLUMNS)[number];

export interface Spread {
  mean: number;
  min: number;
  max: number;
  /** Sample standard deviation (0 for one seed). */
  std: number;
  /** Seeds that had the figure (exact figures are absent for backends that cannot compute them). */
  n: number;
}

export interface SummaryRow {
  round: number;
  seeds: number;
  columns: Partial<Record<SummaryColumn, Spread>>;
}

export function spreadOf(values: readonly number[]): Spread | null {
  if (values.length === 0) return null;
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  const variance = values.length > 1 ? values.reduce((s, v) => s + (v - mean) ** 2, 0) / (values.length - 1) : 0;
  return { mean, min: Math.min(...values), max: Math.max(...values), std: Math.sqrt(variance), n: values.length };
}

/** One row per round that every seed finished. */
export function summarizeSeeds(runs: readonly (readonly RoundRow[])[]): SummaryRow[] {
  if (runs.length === 0) return [];
  const rounds = [...new Set(runs.flatMap((rows) => rows.map((r) => r.round)))]
    .filter((round) => runs.every((rows) => rows.some((r) => r.round === round)))
    .sort((a, b) => a - b);
  return rounds.map((round) => {
    const rows = runs.map((rs) => rs.find((r) => r.round === round)!);
    const columns: SummaryRow['columns'] = {};
    for (const c of SUMMARY_COLUMNS) {
      const s = spreadOf(rows.map((r) => r[c]).filter((v): v is number => v !== null));
      if (s) columns[c] = s;
    }
    return { round, seeds: runs.length, columns };
  });
}
