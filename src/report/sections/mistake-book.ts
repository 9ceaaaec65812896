/** Section (methods with a Mistake Book): its most replayed tests and the programs they caught. */
import type { RunDetail } from '../run-data.js';
import { esc } from './html-parts.js';

export function mistakeBookHtml(run: RunDetail): string {
  if (run.replayed.length === 0) return '<h2>Mistake Book: most replayed tests</h2><p>No Mistake Book test was replayed in this run.</p>';
  const tests = run.replayed
    .map((t) => {
      const programs = t.failing
        .slice(0, 3)
        .map(
          (f) =>
            `<details><summary>failed ${f.times}× by program ${esc(f.programHash.slice(0, 12))}</summary><pre>${esc(run.texts[f.programHash] ?? '')}</pre></details>`,
        )
        .join('');
      const fails = t.failing.reduce((s, f) => s + f.times, 0);
      return `<div class="book"><h4>${esc(t.problemId)} · replayed in ${t.replays} round${t.replays === 1 ? '' : 's'} · ${fails} fails, ${t.passes} passes</h4><pre>${esc(run.texts[t.testHash] ?? '')}</pre>${programs || '<p>No sampled program failed it.</p>'}</div>`;
    })
    .join('');
  return `<h2>Mistake Book: most replayed tests</h2>${tests}`;
}
