/**
 * The page script's matrix explorer (plain browser JavaScript after PAGE_COMMON): one
 * problem-round at a time as a grid of coloured cells, columns paged to the width the page
 * gives it, each cell titled with its program, test and verdict; and the selected problem's
 * figures across rounds as a chart.
 */
export const PAGE_MATRIX = String.raw`
  (function () {
    var box = document.getElementById('matrix');
    if (!box || data.matrices.length === 0) return;
    var CELL = 12, LABEL = 84;
    // Cells as large as the width allows (12 to 22 px), columns beyond it paged.
    var pSel = document.getElementById('matrix-problem'), rSel = document.getElementById('matrix-round');
    var page = 0;
    var verdictOf = {};
    Object.keys(data.verdictCodes).forEach(function (v) { verdictOf[data.verdictCodes[v]] = v; });
    function esc(s) { return String(s).replace(/[&<>"']/g, function (c) { return '&#' + c.charCodeAt(0) + ';'; }); }
    function current() {
      var p = pSel.value, r = Number(rSel.value);
      return data.matrices.find(function (m) { return m.problemId === p && m.round === r; });
    }
    function fillRounds() {
      var rs = data.matrices.filter(function (m) { return m.problemId === pSel.value; }).map(function (m) { return m.round; });
      rSel.innerHTML = rs.map(function (r) { return '<option value="' + r + '">' + r + '</option>'; }).join('');
      rSel.value = String(rs[rs.length - 1]);
    }
    function draw() {
      var m = current();
      if (!m) return;
      var nt = m.tests.length, avail = box.clientWidth - LABEL - 4;
      CELL = Math.max(12, Math.min(22, Math.floor(avail / Math.max(1, nt))));
      box.style.setProperty('--cell', CELL + 'px');
      var per = Math.max(8, Math.floor(avail / CELL));
      var pages = Math.max(1, Math.ceil(nt / per));
      page = Math.min(page, pages - 1);
      var from = page * per, to = Math.min(nt, from + per);
      var segs = [];
      for (var j = from; j < to; j++) {
        var k = m.tests[j].kind;
        if (segs.length && segs[segs.length - 1].kind === k) segs[segs.length - 1].n++;
        else segs.push({ kind: k, n: 1, first: j });
      }
      var total = {};
      m.tests.forEach(function (t) { total[t.kind] = (total[t.kind] || 0) + 1; });
      var head = '<div class="mx-row mx-head"><div class="mx-label">program</div><div class="mx-cells">' + segs.map(function (s) {
        var name = data.kindLabels[s.kind] + ' (' + total[s.kind] + ')';
        return '<div class="mx-seg kind-' + s.kind + '" style="width:' + (s.n * CELL) + 'px" title="' + esc(name + ': columns ' + (s.first + 1) + '–' + (s.first + s.n)) + '"><span>' + esc(name) + '</span></div>';
      }).join('') + '</div></div>';
      var rows = m.programs.map(function (p, i) {
        var row = m.rows[i], cells = '';
        for (var j = from; j < to; j++) {
          var c = row.charAt(j), v = verdictOf[c];
          var t = m.tests[j];
          cells += '<i class="' + (v ? 'v-' + v : 'v-none') + '" title="' + esc(p.label + ' × ' + t.id + ' (' + data.kindLabels[t.kind] + '): ' + (v || 'not run')) + '"></i>';
        }
        return '<div class="mx-row' + (p.correct ? ' correct' : '') + '"><div class="mx-label" title="' + esc(p.id + (p.correct ? ': passes every held-out test' : '')) + '">' + (p.correct ? '✓ ' : '') + esc(p.label) + '</div><div class="mx-cells">' + cells + '</div></div>';
      }).join('');
      box.innerHTML = head + rows;
      var correct = m.programs.filter(function (p) { return p.correct; }).length;
      document.getElementById('matrix-meta').textContent = m.problemId + ', round ' + m.round + ': ' + m.programs.length + ' programs (' + correct + ' correct) × ' + nt + ' tests';
      document.getElementById('matrix-page').textContent = 'columns ' + (from + 1) + '–' + to + ' of ' + nt + (pages > 1 ? ' (page ' + (page + 1) + ' of ' + pages + ')' : '');
      document.getElementById('matrix-prev').disabled = page === 0;
      document.getElementById('matrix-next').disabled = page >= pages - 1;
    }
    var trend = chart('chart-problem-trend', { type: 'line', data: { labels: [], datasets: [
      line('held-out pass', [], 0), line('test validity', [], 1), line('kill rate', [], 2)] },
      options: { scales: { x: axis('round'), y: share('share of the problem-round') } } });
    function drawTrend() {
      var t = data.trends.find(function (x) { return x.problemId === pSel.value; });
      document.getElementById('trend-note').textContent = t.problemId + ': the Judge\'s figures of each round it was scheduled';
      if (!trend) return;
      trend.data.labels = t.rounds.map(String);
      trend.data.datasets[0].data = t.heldOutPass;
      trend.data.datasets[1].data = t.validity;
      trend.data.datasets[2].data = t.killRate;
      trend.update();
    }
    pSel.addEventListener('change', function () { page = 0; fillRounds(); draw(); drawTrend(); });
    rSel.addEventListener('change', function () { page = 0; draw(); });
    document.getElementById('matrix-prev').addEventListener('click', function () { page = Math.max(0, page - 1); draw(); });
    document.getElementById('matrix-next').addEventListener('click', function () { page++; draw(); });
    window.addEventListener('resize', draw);
    fillRounds();
    draw();
    drawTrend();
  })();
`;
