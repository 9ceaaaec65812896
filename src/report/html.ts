/**
 * The run report: one self-contained HTML file (Chart.js and the data inlined, a content
 * security policy that forbids every network fetch), readable offline. The sections
 * (`sections/`) render the tables and text; the page script (page-charts.ts, page-matrix.ts)
 * draws the charts and the matrix explorer from the embedded data.
 *
 * The page sets `document.body.dataset.charts` to the number of charts drawn, and
 * `dataset.chartErrors` to the number that failed, once it is done (the browser test waits on it).
 */
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { keepsMistakeBook } from '../projections/round-table.js';
import type { RunDetail } from './run-data.js';
import { headline } from './headline.js';
import { trainingFigures } from './training.js';
import { KIND_LABELS, VERDICT_CODES, matrixView, problemTrends } from './matrix-view.js';
import { PAGE_CHARTS, PAGE_COMMON } from './page-charts.js';
import { PAGE_MATRIX } from './page-matrix.js';
import { PAGE_STYLE } from './page-style.js';
import { esc } from './sections/html-parts.js';
import { headlineHtml } from './sections/headline.js';
import { configHtml } from './sections/config.js';
import { trainingHtml } from './sections/training.js';
import { roundsHtml } from './sections/rounds.js';
import { tcsHtml } from './sections/tcs.js';
import { matricesHtml } from './sections/matrices.js';
import { mistakeBookHtml } from './sections/mistake-book.js';
import { compareHtml, effectHtml } from './sections/compare.js';

/** The Chart.js UMD bundle of the installed package, source-map comment removed (no fetch). */
export function chartJsSource(): string {
  const require = createRequire(import.meta.url);
  const dist = path.dirname(require.resolve('chart.js'));
  const text = readFileSync(path.join(dist, 'chart.umd.min.js'), 'utf8').replace(/\/\/# sourceMappingURL=\S+\s*$/, '');
  // An inlined script ends at the first "</script": the bundle must not hold one.
  if (/<\/script/i.test(text)) throw new Error('chart.umd.min.js contains "</script" and cannot be inlined');
  return text;
}

export interface Histogram {
  /** Bin edges, bins + 1 of them. */
  edges: number[];
  /** One series per round: counts per bin. */
  series: { round: number; counts: number[] }[];
}

/** Rewards of one role binned over their overall range, per round. */
export function rewardHistogram(samples: readonly { round: number; reward: number }[], bins = 10): Histogram {
  if (samples.length === 0) return { edges: [], series: [] };
  let lo = Infinity;
  let hi = -Infinity;
  for (const s of samples) {
    lo = Math.min(lo, s.reward);
    hi = Math.max(hi, s.reward);
  }
  if (hi === lo) hi = lo + 1;
  const width = (hi - lo) / bins;
  const edges = Array.from({ length: bins + 1 }, (_, i) => lo + i * width);
  const byRound = new Map<number, number[]>();
  for (const s of samples) {
    let counts = byRound.get(s.round);
    if (!counts) byRound.set(s.round, (counts = new Array<number>(bins).fill(0)));
    counts[Math.min(bins - 1, Math.floor((s.reward - lo) / width))]!++;
  }
  return { edges, series: [...byRound.entries()].sort(([a], [b]) => a - b).map(([round, counts]) => ({ round, counts })) };
}

const PAGE_SCRIPT = `(function () {${PAGE_COMMON}${PAGE_CHARTS}${PAGE_MATRIX}
  document.body.dataset.chartErrors = String(failed);
  document.body.dataset.charts = String(drawn);
})();`;

/**
 * The report of `runs[0]` (its training, rounds, matrices and Mistake Book), with every run's
 * headline figures overlaid (seeds of one setting as a mean and band) and, for several runs,
 * their configs' differences, the effect over seeds and the compare tables.
 * `chartJs` is the library's source (see chartJsSource), inlined as is.
 */
export function renderReport(runs: readonly RunDetail[], chartJs: string): string {
  if (runs.length === 0) throw new Error('a report needs at least one run');
  const run = runs[0]!;
  const keepsBook = keepsMistakeBook(run.method, run.config);
  const training = trainingFigures(run.steps, run.rewards);
  const views = run.matrices.map(matrixView);
  const head = headline(runs);
  const rewards = {
    code: rewardHistogram(run.rewards.filter((r) => r.role === 'code')),
    test: rewardHistogram(run.rewards.filter((r) => r.role === 'test')),
  };
  const data = {
    headline: head,
    training: training.figures,
    rows: run.rows,
    selection: run.selection,
    keepsBook,
    rewards,
    matrices: views,
    trends: problemTrends(run.matrices),
    verdictCodes: VERDICT_CODES,
    kindLabels: KIND_LABELS,
  };
  const json = JSON.stringify(data).replace(/</g, '\\u003c');
  const status = run.status === 'failed' ? `failed: ${run.failure ?? ''}` : run.status;
  const others = runs.length > 1 ? ` · compared with ${runs.length - 1} more run${runs.length > 2 ? 's' : ''}` : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<title>crucible report: ${esc(run.runId)}</title>
<style>${PAGE_STYLE}</style>
</head>
<body>
<h1>crucible report: ${esc(run.runId)}</h1>
<p class="meta">config ${esc(run.name)} · method ${esc(run.method)} · seed ${run.seed} · ${esc(status)} · ${run.rows.length}${run.plannedRounds !== null ? ` of ${run.plannedRounds}` : ''} rounds${esc(others)}</p>
${headlineHtml(head)}
${runs.length > 1 ? effectHtml(runs) : ''}
${configHtml(runs)}
${trainingHtml(training, run.steps.length, run.runId)}
${roundsHtml(run.rows, run.selection, keepsBook, { code: rewards.code.series.length > 0, test: rewards.test.series.length > 0 })}
${run.method === 'tcs' ? tcsHtml(run.stages) : ''}
${matricesHtml(views)}
${keepsBook ? mistakeBookHtml(run) : ''}
${runs.length > 1 ? compareHtml(runs) : ''}
<script type="application/json" id="report-data">${json}</script>
<script>${chartJs}</script>
<script>${PAGE_SCRIPT}</script>
</body>
</html>
`;
}
