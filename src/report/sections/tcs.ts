/** Section (TCS only): the training stage of every round and the validity it was decided on. */
import type { StageRow } from '../run-data.js';
import { pct, table } from './html-parts.js';

export function tcsHtml(stages: readonly StageRow[]): string {
  if (stages.length === 0) return '<h2>TCS stages</h2><p>No stage was decided yet.</p>';
  const rows = stages.map((s) => [String(s.round), `stage ${s.stage}`, s.switched ? 'switched' : '', pct(s.validityRate)]);
  return `<h2>TCS stages</h2><p class="meta">stage 1 rewards tests consistent with the reference; stage 2 rewards counterexamples among the buffered tests at the Solver's failure modes. Switch decided from the previous round's validity.</p>
${table(['round', 'stage', 'switch', "previous round's validity"], rows)}`;
}
