/**
 * The run report: one self-contained HTML file (Chart.js and the data inlined, a content
 * security policy that forbids every network fetch), readable offline. Tables are rendered
 * here; charts are drawn in the page by Chart.js from the embedded data.
 *
 * The page sets `document.body.dataset.charts` to the number of charts drawn, and
 * `dataset.chartErrors` to the number that failed, once it is done (the browser test waits on it).
 */
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { RoundRow } from '../projections/round-table.js';
import type { RoundSelection } from '../projections/answer-selection.js';
import type { RunDetail, RunSummary } from './run-data.js';
import type { ProblemMatrix } from './matrix.js';
import { compareRuns, formatValue, runLabel, type CompareTable } from './compare.js';
import { formatEffect, pairBySeed, seedEffects } from './seed-effect.js';

/** The Chart.js UMD bundle of the installed package, source-map comment removed (no fetch). */
export function chartJsSource(): string {
  const require = createRequire(import.meta.url);
  const dist = path.dirname(require.resolve('chart.js'));
  const text = readFileSync(path.join(dist, 'chart.umd.min.js'), 'utf8').replace(/\/\/# sourceMappingURL=\S+\s*$/, '');
  // An inlined script ends at the first "</script": the bundle must not hold one.
  if (/<\/script/i.test(text)) throw new Error('chart.umd.min.js contains "</script" and cannot be inlined');
  return text;
}

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const pct = (x: number | null) => (x === null ? '-' : `${(100 * x).toFixed(1)}%`);

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

function roundTableHtml(rows: readonly RoundRow[], selection: readonly RoundSelection[]): string {
  const head = [
    'round',
    'held-out pass',
    'test validity',
    'kill rate',
    'mistake book',
    'code reward',
    'test reward',
    'best-of-N',
    'best-of-N + book',
    'random pick',
    'oracle',
  ];
  const body = rows.map((r) => {
    const s = selection.find((x) => x.round === r.round);
    const cells = [
      String(r.round),
      pct(r.heldOutPass),
      pct(r.validity),
      pct(r.killRate),
      r.mistakeBook === null ? '-' : String(r.mistakeBook),
      r.codeReward.toFixed(3),
      r.testReward === null ? '-' : r.testReward.toFixed(3),
    ];
    cells.push(...(s ? [pct(s.generated), pct(s.withBook), pct(s.random), pct(s.oracle)] : ['-', '-', '-', '-']));
    return `<tr>${cells.map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`;
  });
  return `<table><thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>${body.join('')}</tbody></table>`;
}

function compareHtml(runs: readonly RunSummary[], tables: readonly CompareTable[]): string {
  const legend = runs.map((r, i) => `<li><b>${runLabel(i)}</b> ${esc(r.runId)} (${esc(r.method)}, seed ${r.seed}, ${esc(r.status)})</li>`).join('');
  const parts = tables.map((t) => {
    const head = ['round', ...runs.flatMap((_, i) => (i === 0 ? [runLabel(0)] : [runLabel(i), `${runLabel(i)} − ${runLabel(0)}`]))];
    const body = t.rows.map((row) => {
      const cells = [
        String(row.round),
        ...row.values.flatMap((v, i) => (i === 0 ? [formatValue(t.kind, v)] : [formatValue(t.kind, v), formatValue(t.kind, row.diffs[i] ?? null, true)])),
      ];
      return `<tr>${cells.map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`;
    });
    return `<div class="cmp"><h3>${esc(t.label)}</h3><table><thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>${body.join('')}</tbody></table></div>`;
  });
  return `<ul class="legend">${legend}</ul><div class="cmps">${parts.join('')}</div>`;
}

/** The effect of training over seeds, when the runs are seeds of a config and of its control. */
function effectHtml(runs: readonly RunSummary[]): string {
  const paired = pairBySeed(runs);
  if (!paired.ok || paired.pairs.trained.runs.length < 2) return '';
  const { trained, control, differences } = paired.pairs;
  const tables = seedEffects(paired.pairs);
  const head = ['metric', ...tables[0]!.rows.map((r) => (r.round === 'last' ? `rounds ${r.rounds[0]}–${r.rounds.at(-1)}` : `round ${r.round}`))];
  const body = tables.map((t) => `<tr>${[t.label, ...t.rows.map((r) => formatEffect(r.effect))].map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`);
  const seeds = trained.runs.map((r) => r.seed).join(', ');
  return `<h2>Effect over seeds</h2><p class="meta">${esc(trained.label)} minus ${esc(control.label)}, paired by seed (${esc(seeds)}): mean and bootstrap 95% interval over ${trained.runs.length} seeds, in points; the configs differ in ${esc(differences.join(', ') || 'nothing but their names')}</p><table><thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>${body.join('')}</tbody></table>`;
}

function replayedHtml(run: RunDetail): string {
  if (run.replayed.length === 0) return '<p>No Mistake Book test was replayed in this run.</p>';
  return run.replayed
    .map((t) => {
      const programs = t.failing
        .slice(0, 3)
        .map(
          (f) =>
            `<details><summary>failed ${f.times}× by program ${esc(f.programHash.slice(0, 12))}</summary><pre>${esc(run.texts[f.programHash] ?? '')}</pre></details>`,
        )
        .join('');
      return `<div class="book"><h4>${esc(t.problemId)} · replayed in ${t.replays} round${t.replays === 1 ? '' : 's'} · ${t.failing.reduce((s, f) => s + f.times, 0)} fails, ${t.passes} passes</h4><pre>${esc(run.texts[t.testHash] ?? '')}</pre>${programs || '<p>No sampled program failed it.</p>'}</div>`;
    })
    .join('');
}

function kinds(m: ProblemMatrix): string {
  const n = (k: string) => m.tests.filter((t) => t.kind === k).length;
  return `${n('generated')} generated, ${n('book')} Mistake Book, ${n('dataset')} dataset, ${n('heldout')} held-out`;
}

/** What the page script draws from. */
interface PageData {
  rows: RoundRow[];
  selection: RoundSelection[];
  rewards: { code: Histogram; test: Histogram };
  matrices: ProblemMatrix[];
  compare: { label: string; rows: RoundRow[] }[];
}

/** The page script: plain browser JavaScript, run after Chart.js is defined. */
const PAGE_SCRIPT = String.raw`
(function () {
  var data = JSON.parse(document.getElementById('report-data').textContent);
  var drawn = 0, failed = 0;
  var palette = ['#2563eb', '#16a34a', '#dc2626', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777'];
  var verdictColor = { accepted: '#16a34a', wrong_answer: '#dc2626', runtime_error: '#ea580c', time_limit: '#9333ea',
    memory_limit: '#7c3aed', output_limit: '#a16207', compile_error: '#0f172a', sandbox_error: '#94a3b8' };
  Chart.defaults.animation = false;
  Chart.defaults.responsive = true;
  Chart.defaults.maintainAspectRatio = false;
  function chart(id, config) {
    var canvas = document.getElementById(id);
    if (!canvas) return;
    try { new Chart(canvas, config); drawn++; } catch (e) { failed++; console.error('chart ' + id + ': ' + e); }
  }
  var rounds = data.rows.map(function (r) { return 'round ' + r.round; });
  var share = { min: 0, max: 1, ticks: { callback: function (v) { return Math.round(v * 100) + '%'; } } };
  function line(label, values, i) {
    return { label: label, data: values, borderColor: palette[i % palette.length], backgroundColor: palette[i % palette.length], tension: 0 };
  }
  chart('chart-quality', { type: 'line', data: { labels: rounds, datasets: [
    line('held-out pass', data.rows.map(function (r) { return r.heldOutPass; }), 0),
    line('test validity', data.rows.map(function (r) { return r.validity; }), 1),
    line('kill rate', data.rows.map(function (r) { return r.killRate; }), 2)] },
    options: { scales: { y: share } } });
  var sel = function (k) { return data.rows.map(function (r) { var s = data.selection.find(function (x) { return x.round === r.round; }); return s ? s[k] : null; }); };
  chart('chart-selection', { type: 'line', data: { labels: rounds, datasets: [
    line('best-of-N (generated tests)', sel('generated'), 0), Object.assign(line('best-of-N (with Mistake Book)', sel('withBook'), 3), { borderDash: [6, 4] }),
    line('random pick (expected)', sel('random'), 2), line('oracle best', sel('oracle'), 1)] },
    options: { scales: { y: share } } });
  chart('chart-book', { type: 'bar', data: { labels: rounds, datasets: [
    { label: 'Mistake Book tests', data: data.rows.map(function (r) { return r.mistakeBook; }), backgroundColor: palette[3] }] } });
  ['code', 'test'].forEach(function (role) {
    var h = data.rewards[role];
    var labels = h.edges.slice(0, -1).map(function (e, i) { return e.toFixed(2) + '–' + h.edges[i + 1].toFixed(2); });
    chart('chart-rewards-' + role, { type: 'bar', data: { labels: labels, datasets: h.series.map(function (s, i) {
      return { label: 'round ' + s.round, data: s.counts, backgroundColor: palette[i % palette.length] }; }) },
      options: { scales: { x: { title: { display: true, text: role + ' reward' } }, y: { title: { display: true, text: 'samples' } } } } });
  });
  data.matrices.forEach(function (m, mi) {
    var points = [];
    m.cells.forEach(function (row, p) { row.forEach(function (v, t) { if (v) points.push({ x: t, y: p, v: v }); }); });
    var nt = Math.max(1, m.tests.length), np = Math.max(1, m.programs.length);
    chart('chart-matrix-' + mi, { type: 'scatter', data: { datasets: [{ label: 'verdicts', data: points, pointStyle: 'rect',
      backgroundColor: function (c) { return c.raw ? verdictColor[c.raw.v] : '#000'; }, borderWidth: 0,
      pointRadius: function (c) { var a = c.chart.chartArea; return a ? Math.max(1.5, Math.min(a.width / nt, a.height / np) / 2 - 0.5) : 2; },
      pointHoverRadius: function (c) { var a = c.chart.chartArea; return a ? Math.max(2, Math.min(a.width / nt, a.height / np) / 2) : 3; } }] },
      options: { plugins: { legend: { display: false }, tooltip: { callbacks: { label: function (c) {
        return m.programs[c.raw.y].solutionId + ' × ' + m.tests[c.raw.x].testId + ': ' + c.raw.v; } } } },
        scales: { x: { min: -0.5, max: nt - 0.5, grid: { display: false }, ticks: { autoSkip: false, maxRotation: 0, callback: function (v) { return m.tests[v] ? m.tests[v].kind : ''; } },
            afterBuildTicks: function (axis) { axis.ticks = m.tests.map(function (t, i) { return i; }).filter(function (i) { return i === 0 || m.tests[i - 1].kind !== m.tests[i].kind; }).map(function (i) { return { value: i }; }); } },
          y: { reverse: true, min: -0.5, max: np - 0.5, grid: { display: false }, ticks: { autoSkip: false, callback: function (v) { var p = m.programs[v]; return p ? 's' + p.index : ''; } },
            afterBuildTicks: function (axis) { axis.ticks = m.programs.map(function (p, i) { return { value: i }; }); } } } } });
  });
  if (data.compare.length > 1) {
    var all = [];
    data.compare.forEach(function (r) { r.rows.forEach(function (x) { if (all.indexOf(x.round) < 0) all.push(x.round); }); });
    all.sort(function (a, b) { return a - b; });
    chart('chart-compare', { type: 'line', data: { labels: all.map(function (r) { return 'round ' + r; }), datasets: data.compare.map(function (r, i) {
      return line(r.label + ' held-out pass', all.map(function (k) { var x = r.rows.find(function (y) { return y.round === k; }); return x ? x.heldOutPass : null; }), i); }) },
      options: { scales: { y: share } } });
  }
  document.body.dataset.chartErrors = String(failed);
  document.body.dataset.charts = String(drawn);
})();
`;

const STYLE = `
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #0f172a; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #e2e8f0; }
h3 { font-size: 14px; margin: 12px 0 4px; } h4 { font-size: 13px; margin: 8px 0 4px; }
.meta { color: #475569; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 10px; border-bottom: 1px solid #e2e8f0; text-align: right; } th { background: #f8fafc; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(440px, 1fr)); gap: 16px; }
.card { border: 1px solid #e2e8f0; border-radius: 6px; padding: 8px 12px; }
.chart { position: relative; height: 260px; } .matrix { height: 220px; }
.cmps { display: flex; flex-wrap: wrap; gap: 8px 24px; }
pre { background: #f8fafc; padding: 6px 8px; overflow-x: auto; font-size: 12px; max-height: 240px; }
.swatch { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 10px; }
`;

const VERDICT_LEGEND: [string, string][] = [
  ['accepted', '#16a34a'],
  ['wrong_answer', '#dc2626'],
  ['runtime_error', '#ea580c'],
  ['time_limit', '#9333ea'],
  ['memory_limit', '#7c3aed'],
  ['output_limit', '#a16207'],
  ['compile_error', '#0f172a'],
  ['sandbox_error', '#94a3b8'],
];

/**
 * The report of `runs[0]`, with compare tables and a compare chart when more runs are given.
 * `chartJs` is the library's source (see chartJsSource), inlined as is.
 */
export function renderReport(runs: readonly RunDetail[], chartJs: string): string {
  if (runs.length === 0) throw new Error('a report needs at least one run');
  const run = runs[0]!;
  const data: PageData = {
    rows: run.rows,
    selection: run.selection,
    rewards: {
      code: rewardHistogram(run.rewards.filter((r) => r.role === 'code')),
      test: rewardHistogram(run.rewards.filter((r) => r.role === 'test')),
    },
    matrices: run.matrices,
    compare: runs.map((r, i) => ({ label: runLabel(i), rows: r.rows })),
  };
  const json = JSON.stringify(data).replace(/</g, '\\u003c');
  const card = (title: string, id: string, note = '') =>
    `<div class="card"><h3>${esc(title)}</h3>${note}<div class="chart"><canvas id="${id}"></canvas></div></div>`;
  const matrices = run.matrices
    .map(
      (m, i) =>
        `<div class="card"><h3>${esc(m.problemId)} · round ${m.round}</h3><p class="meta">${m.programs.length} programs × ${m.tests.length} tests: ${kinds(m)}</p><div class="chart matrix"><canvas id="chart-matrix-${i}"></canvas></div></div>`,
    )
    .join('');
  const status = run.status === 'failed' ? `failed: ${run.failure ?? ''}` : run.status;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<title>crucible report: ${esc(run.runId)}</title>
<style>${STYLE}</style>
</head>
<body>
<h1>crucible report: ${esc(run.runId)}</h1>
<p class="meta">config ${esc(run.name)} · method ${esc(run.method)} · seed ${run.seed} · ${esc(status)} · ${run.rows.length}${run.plannedRounds !== null ? ` of ${run.plannedRounds}` : ''} rounds</p>
<h2>Rounds</h2>
${roundTableHtml(run.rows, run.selection)}
<div class="grid" style="margin-top:16px">
${card('Held-out pass, test validity, kill rate', 'chart-quality')}
${card('Answer selection: held-out pass of the pick', 'chart-selection', '<p class="meta">best-of-N by generated-test (and Mistake Book) pass rate, against a random pick (exact expectation) and the best sample</p>')}
${card('Mistake Book size', 'chart-book')}
${card('Code rewards', 'chart-rewards-code')}
${card('Test rewards', 'chart-rewards-test')}
</div>
<h2>Execution matrices (last round of each problem)</h2>
<p class="meta">rows: sampled programs (by sample index); columns: generated tests, Mistake Book tests, held-out tests. ${VERDICT_LEGEND.map(([v, c]) => `<span class="swatch" style="background:${c}"></span>${v}`).join('')}</p>
<div class="grid">${matrices || '<p>No problem was judged yet.</p>'}</div>
<h2>Mistake Book: most replayed tests</h2>
${replayedHtml(run)}
${
  runs.length > 1
    ? `${effectHtml(runs)}<h2>Compared runs</h2><div class="grid">${card('Held-out pass per run', 'chart-compare')}</div>${compareHtml(runs, compareRuns(runs))}`
    : ''
}
<script type="application/json" id="report-data">${json}</script>
<script>${chartJs}</script>
<script>${PAGE_SCRIPT}</script>
</body>
</html>
`;
}
