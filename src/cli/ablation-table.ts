/**
 * The round table `crucible ablate` prints: per round the recorded row and one row per answered
 * variant, with only the figures some variant changed (a variant re-judges recorded samples, so
 * most figures are the run's), each variant's value followed by its difference from the run's.
 */
import type { RoundRow } from '../projections/round-table.js';
import type { AblationResult } from '../ablation/ablate.js';
import { formatTable } from './table.js';

interface Column {
  label: string;
  kind: 'share' | 'count' | 'reward';
  of(r: RoundRow): number | null;
}

/** The figures a variant can change (P(correct), P(valid test) and seconds are the recorded
 * policies' and clock's: never changed, never shown). */
const COLUMNS: readonly Column[] = [
  { label: 'held-out pass', kind: 'share', of: (r) => r.heldOutPass },
  { label: 'test validity', kind: 'share', of: (r) => r.validity },
  { label: 'kill rate', kind: 'share', of: (r) => r.killRate },
  { label: 'mistake book', kind: 'count', of: (r) => r.mistakeBook },
  { label: 'code reward', kind: 'reward', of: (r) => r.codeReward },
  { label: 'test reward', kind: 'reward', of: (r) => r.testReward },
];

function format(kind: Column['kind'], v: number | null): string {
  if (v === null) return '-';
  if (kind === 'share') return `${(100 * v).toFixed(1)}%`;
  if (kind === 'count') return String(v);
  return v.toFixed(3);
}

function delta(kind: Column['kind'], v: number): string {
  const sign = v > 0 ? '+' : v < 0 ? '-' : '±';
  const a = Math.abs(v);
  if (kind === 'share') return `${sign}${(100 * a).toFixed(1)} pt`;
  if (kind === 'count') return `${sign}${a}`;
  return `${sign}${a.toFixed(3)}`;
}

/** The table, or a line saying that no figure differs from the run's. */
export function ablationTable(result: Pick<AblationResult, 'recorded' | 'variants'>): string {
  const variants: [string, RoundRow[]][] = [];
  for (const v of result.variants) if (v.status === 'answered') variants.push([v.name, v.rows]);
  const recordedOf = (round: number) => result.recorded.find((r) => r.round === round);
  const changed = COLUMNS.filter((c) =>
    variants.some(([, rows]) =>
      rows.some((x) => {
        const r = recordedOf(x.round);
        return r !== undefined && c.of(x) !== c.of(r);
      }),
    ),
  );
  if (changed.length === 0) return "every figure of every variant equals the recorded run's";
  const rows: string[][] = [];
  for (const r of result.recorded) {
    rows.push([String(r.round), 'recorded', ...changed.map((c) => format(c.kind, c.of(r)))]);
    for (const [name, rs] of variants) {
      const x = rs.find((y) => y.round === r.round);
      if (!x) continue;
      rows.push([
        String(r.round),
        name,
        ...changed.map((c) => {
          const [v, base] = [c.of(x), c.of(r)];
          if (v === null || base === null || v === base) return format(c.kind, v);
          return `${format(c.kind, v)} (${delta(c.kind, v - base)})`;
        }),
      ]);
    }
  }
  return formatTable(['round', 'variant', ...changed.map((c) => c.label)], rows);
}
