/** Section: each run's recorded config (collapsed), and the settings in which the runs differ. */
import { configDiff, flattenConfig, formatSetting } from '../config-diff.js';
import { runLabel } from '../compare.js';
import type { RunSummary } from '../run-data.js';
import { esc, table } from './html-parts.js';

export function configHtml(runs: readonly RunSummary[]): string {
  const each = runs
    .map((r, i) => {
      const rows = [...flattenConfig(r.config)].map(([k, v]) => [k, formatSetting(v)]);
      return `<details class="config"><summary><b>${runLabel(i)}</b> ${esc(r.runId)}: ${esc(r.name)}, ${esc(r.method)}, seed ${r.seed} (${rows.length} settings)</summary>${table(['setting', 'value'], rows, 'kv')}</details>`;
    })
    .join('');
  if (runs.length < 2) return `<h2>Config</h2>${each}`;
  const diff = configDiff(runs.map((r) => r.config));
  const diffTable =
    diff.length === 0
      ? '<p>The configs are the same.</p>'
      : table(
          ['setting', ...runs.map((_, i) => runLabel(i))],
          diff.map((d) => [d.key, ...d.values.map(formatSetting)]),
          'kv',
        );
  return `<h2>Config</h2><h3>Settings that differ</h3>${diffTable}<h3>Each run's config</h3>${each}`;
}
