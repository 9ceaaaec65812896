/** Section: execution matrices, one problem-round at a time (a problem and round selector, columns
 * paged to the page's width), and the selected problem's figures across its rounds. */
import type { Verdict } from '../../core/verdicts.js';
import { KIND_LABELS, VERDICT_COLOURS, type MatrixView } from '../matrix-view.js';
import { card, esc } from './html-parts.js';

export function matricesHtml(views: readonly MatrixView[]): string {
  if (views.length === 0) return '<h2>Execution matrices</h2><p>No problem was judged yet.</p>';
  const problems = [...new Set(views.map((v) => v.problemId))];
  const present = new Set(views.flatMap((v) => v.tests.map((t) => t.kind)));
  const kinds = (Object.keys(KIND_LABELS) as (keyof typeof KIND_LABELS)[]).filter((k) => present.has(k));
  const swatch = (colour: string, label: string, cls = '') =>
    `<span class="key${cls}"><span class="swatch" style="background:${colour}"></span>${esc(label)}</span>`;
  const verdicts = (Object.entries(VERDICT_COLOURS) as [Verdict, string][]).map(([v, c]) => swatch(c, v)).join('');
  const options = problems.map((p) => `<option value="${esc(p)}">${esc(p)}</option>`).join('');
  return `<h2>Execution matrices</h2>
<p class="meta">Rows: the round's sampled programs by sample index, <b class="ok">✓</b> marks a correct program (it passes every held-out test). Columns: tests grouped by kind (${esc(kinds.map((k) => KIND_LABELS[k]).join(', '))}). Hover a cell for the program, the test and the verdict.</p>
<div class="legend-row">${verdicts}${swatch('#ffffff', 'not run', ' empty')}</div>
<div class="matrix-controls">
<label>problem <select id="matrix-problem">${options}</select></label>
<label>round <select id="matrix-round"></select></label>
<button type="button" id="matrix-prev">◀ previous columns</button>
<span id="matrix-page" class="meta"></span>
<button type="button" id="matrix-next">next columns ▶</button>
</div>
<p id="matrix-meta" class="meta"></p>
<div id="matrix" class="matrix-grid"></div>
<div class="grid">${card('The problem across rounds', 'chart-problem-trend', '<p class="meta" id="trend-note"></p>')}</div>`;
}
