/** Section: the Learner's per-step figures (those the trainer reports, and each batch's spread). */
import type { TrainingFigure } from '../training.js';
import { card, esc, notRecorded } from './html-parts.js';

export function trainingHtml(t: { figures: TrainingFigure[]; others: string[]; controls: string[] }, steps: number, runId: string): string {
  if (steps === 0) return `<h2>Training steps</h2><p>No training step is recorded in ${esc(runId)}.</p>`;
  const cards = t.figures.map((f) => (f.recorded ? card(f.title, `chart-train-${f.key}`) : notRecorded(f.title, 'this trainer does not report it'))).join('');
  const others = t.others.length > 0 ? ` Also recorded, not drawn: ${t.others.join(', ')}.` : '';
  const control = t.controls.length > 0 ? ` The steps ran under the control ${t.controls.join(', ')}: they are recorded as the method forms them.` : '';
  return `<h2>Training steps</h2>
<p class="meta">${esc(runId)}: ${steps} steps; x: the policy version each step made, one line per role.${esc(control)}${esc(others)}</p>
<div class="grid">${cards}</div>`;
}
