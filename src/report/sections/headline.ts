/** Section: did the run learn? The headline figures by round, every run (or setting) overlaid. */
import type { Headline } from '../headline.js';
import { card, esc, notRecorded } from './html-parts.js';

export function headlineHtml(h: Headline): string {
  const groups = h.groups
    .map((g) => {
      const seeds = g.seeds.length > 1 ? `${g.seeds.length} seeds (${g.seeds.join(', ')}): mean, band min–max` : `seed ${g.seeds[0]}`;
      const role = g.control === null ? 'trained' : `control: ${g.control}`;
      return `<li><b>${esc(g.label)}</b> · ${esc(role)} · ${esc(seeds)}</li>`;
    })
    .join('');
  const cards = h.metrics
    .map((m) =>
      m.recorded
        ? card(`${m.label} by round`, `chart-headline-${m.key}`, `<p class="meta">${esc(m.note)}</p>`)
        : notRecorded(
            `${m.label} by round`,
            `${m.note}: no run has this figure (its policies cannot be evaluated exactly, or the method judges no generated test)`,
          ),
    )
    .join('');
  const after = h.x.at(-1)?.startsWith('after') ? ` "${h.x.at(-1)}" is the policy the last training step made.` : '';
  return `<h2>Did it learn?</h2>
<p class="meta">Solid lines: trained settings; dashed: controls (learner.control frozen or shuffled).${esc(after)}</p>
<ul class="legend">${groups}</ul>
<div class="grid headline">${cards}</div>`;
}
