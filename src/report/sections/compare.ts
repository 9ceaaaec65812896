/** Sections for several runs: the effect of training over seeds, and the round tables side by side. */
import { compareRuns, formatValue, runLabel } from '../compare.js';
import { formatEffect, pairBySeed, seedEffects } from '../seed-effect.js';
import type { RunSummary } from '../run-data.js';
import { esc, table } from './html-parts.js';

/** The effect of training over seeds, when the runs are seeds of a config and of its control. */
export function effectHtml(runs: readonly RunSummary[]): string {
  const paired = pairBySeed(runs);
  if (!paired.ok || paired.pairs.trained.runs.length < 2) return '';
  const { trained, control, differences } = paired.pairs;
  const tables = seedEffects(paired.pairs);
  const head = ['metric', ...tables[0]!.rows.map((r) => (r.round === 'last' ? `rounds ${r.rounds[0]}–${r.rounds.at(-1)}` : `round ${r.round}`))];
  const seeds = trained.runs.map((r) => r.seed).join(', ');
  return `<h2>Effect over seeds</h2><p class="meta">${esc(trained.label)} minus ${esc(control.label)}, paired by seed (${esc(seeds)}): mean and bootstrap 95% interval over ${trained.runs.length} seeds, in points; the configs differ in ${esc(differences.join(', ') || 'nothing but their names')}</p><div class="scroll">${table(
    head,
    tables.map((t) => [t.label, ...t.rows.map((r) => formatEffect(r.effect))]),
  )}</div>`;
}

export function compareHtml(runs: readonly RunSummary[]): string {
  const legend = runs.map((r, i) => `<li><b>${runLabel(i)}</b> ${esc(r.runId)} (${esc(r.method)}, seed ${r.seed}, ${esc(r.status)})</li>`).join('');
  const parts = compareRuns(runs).map((t) => {
    const head = ['round', ...runs.flatMap((_, i) => (i === 0 ? [runLabel(0)] : [runLabel(i), `${runLabel(i)} − ${runLabel(0)}`]))];
    const body = t.rows.map((row) => [
      String(row.round),
      ...row.values.flatMap((v, i) => (i === 0 ? [formatValue(t.kind, v)] : [formatValue(t.kind, v), formatValue(t.kind, row.diffs[i] ?? null, true)])),
    ]);
    return `<div class="cmp"><h3>${esc(t.label)}</h3>${table(head, body)}</div>`;
  });
  return `<h2>Compared runs</h2><ul class="legend">${legend}</ul><div class="cmps">${parts.join('')}</div>`;
}
