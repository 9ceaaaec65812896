/**
 * The page script's charts (plain browser JavaScript, run after Chart.js is defined): the
 * headline, the training steps, answer selection, Mistake Book and reward histograms. Every
 * chart has axis titles with units. `chart(id, config)` and the palette come from PAGE_COMMON.
 */

/** Shared by every part of the page script: data, counters, the chart helper, axes. */
export const PAGE_COMMON = String.raw`
  var data = JSON.parse(document.getElementById('report-data').textContent);
  var drawn = 0, failed = 0;
  var palette = ['#2563eb', '#16a34a', '#dc2626', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777'];
  Chart.defaults.animation = false;
  Chart.defaults.responsive = true;
  Chart.defaults.maintainAspectRatio = false;
  Chart.defaults.plugins.legend.labels.boxWidth = 14;
  function chart(id, config) {
    var canvas = document.getElementById(id);
    if (!canvas) return null;
    try { var c = new Chart(canvas, config); drawn++; return c; } catch (e) { failed++; console.error('chart ' + id + ': ' + e); return null; }
  }
  function axis(text, extra) { return Object.assign({ title: { display: true, text: text } }, extra || {}); }
  function share(text) { return axis(text + ' (%)', { min: 0, max: 1, ticks: { callback: function (v) { return Math.round(v * 100) + '%'; } } }); }
  function alpha(hex, a) { var n = parseInt(hex.slice(1), 16); return 'rgba(' + (n >> 16) + ',' + ((n >> 8) & 255) + ',' + (n & 255) + ',' + a + ')'; }
  function line(label, values, i, extra) {
    var c = palette[i % palette.length];
    return Object.assign({ label: label, data: values, borderColor: c, backgroundColor: c, tension: 0, pointRadius: 3 }, extra || {});
  }
  /** A min-max (or ±sd) band under a line: two datasets the legend leaves out. */
  function band(lo, hi, i) {
    var c = palette[i % palette.length];
    return [{ label: '', band: true, data: lo, borderWidth: 0, pointRadius: 0, fill: false, borderColor: c },
      { label: '', band: true, data: hi, borderWidth: 0, pointRadius: 0, fill: '-1', backgroundColor: alpha(c, 0.18), borderColor: c }];
  }
  var noBands = { labels: { filter: function (item, d) { return !d.datasets[item.datasetIndex].band; } } };
`;

export const PAGE_CHARTS = String.raw`
  data.headline.metrics.forEach(function (m) {
    if (!m.recorded) return;
    var sets = [];
    m.lines.forEach(function (l, i) {
      var g = data.headline.groups[i];
      if (l.min) sets = sets.concat(band(l.min, l.max, i));
      var name = g.label + (g.control ? ' (' + g.control + ')' : '') + (g.seeds.length > 1 ? ', ' + g.seeds.length + ' seeds' : '');
      sets.push(line(name, l.mean, i, g.control ? { borderDash: [6, 4] } : {}));
    });
    chart('chart-headline-' + m.key, { type: 'line', data: { labels: data.headline.x, datasets: sets },
      options: { plugins: { legend: noBands }, scales: { x: axis('round'), y: share(m.label) } } });
  });
  data.training.forEach(function (f) {
    if (!f.recorded) return;
    var sets = [];
    f.series.forEach(function (s, i) {
      var pts = function (ys) { return s.x.map(function (x, k) { return { x: x, y: ys[k], round: s.rounds[k] }; }); };
      if (s.lo) sets = sets.concat(band(pts(s.lo), pts(s.hi), i));
      sets.push(line(s.role + ' policy', pts(s.y), i));
    });
    chart('chart-train-' + f.key, { type: 'line', data: { datasets: sets },
      options: { parsing: true, plugins: { legend: noBands, tooltip: { callbacks: { afterLabel: function (c) { return c.raw && c.raw.round !== undefined ? 'round ' + c.raw.round : ''; } } } },
        scales: { x: axis('training step (policy version it made)', { type: 'linear', ticks: { precision: 0 } }), y: axis(f.axis) } } });
  });
  var rounds = data.rows.map(function (r) { return String(r.round); });
  var sel = function (k) { return data.rows.map(function (r) { var s = data.selection.find(function (x) { return x.round === r.round; }); return s ? s[k] : null; }); };
  var selSets = [line('best-of-N (generated tests)', sel('generated'), 0)];
  if (data.keepsBook) selSets.push(line('best-of-N (with Mistake Book)', sel('withBook'), 3, { borderDash: [6, 4] }));
  selSets.push(line('random pick (expected)', sel('random'), 2), line('oracle best', sel('oracle'), 1));
  chart('chart-selection', { type: 'line', data: { labels: rounds, datasets: selSets }, options: { scales: { x: axis('round'), y: share('held-out pass of the pick') } } });
  if (data.keepsBook) chart('chart-book', { type: 'bar', data: { labels: rounds, datasets: [
    { label: 'Mistake Book tests', data: data.rows.map(function (r) { return r.mistakeBook; }), backgroundColor: palette[3] }] },
    options: { scales: { x: axis('round'), y: axis('tests in the Mistake Book (count)', { beginAtZero: true }) } } });
  ['code', 'test'].forEach(function (role) {
    var h = data.rewards[role];
    var labels = h.edges.slice(0, -1).map(function (e, i) { return e.toFixed(2) + '–' + h.edges[i + 1].toFixed(2); });
    chart('chart-rewards-' + role, { type: 'bar', data: { labels: labels, datasets: h.series.map(function (s, i) {
      return { label: 'round ' + s.round, data: s.counts, backgroundColor: palette[i % palette.length] }; }) },
      options: { scales: { x: axis(role + ' reward (bin, method scale)'), y: axis('samples (count)') } } });
  });
`;
