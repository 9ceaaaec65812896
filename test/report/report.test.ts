/**
 * After a run: answer selection checked against the Judge's own figures, `crucible runs`,
 * `crucible compare` and `crucible report`, on small real runs made here (real SQLite logs, real
 * sandbox). The report is opened in headless Debian chromium at desktop and laptop widths: no
 * console error, no request but the file itself, every chart drawn with marks, no text box over
 * another; screenshots are written.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { twoProblemConfig } from '../support/small-config.js';
import { runExperiment, type RunOutcome } from '../../src/actors/run.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import type { EventData } from '../../src/events/catalog.js';
import { loadRunDetail, loadRunSummary } from '../../src/report/run-data.js';
import { compareRuns } from '../../src/report/compare.js';
import { ProjectionRunner, type ReducerProjection } from '../../src/projections/runner.js';
import { answerSelectionProjection } from '../../src/projections/run-views.js';
import { emptyAnswerSelection, reduceAnswerSelection, roundSelections, type AnswerSelectionState } from '../../src/projections/answer-selection.js';
import { openReport, CHROMIUM, type PageCheck } from './browser.js';
import type { Headline } from '../../src/report/headline.js';
import { correctPrograms } from '../../src/report/matrix-view.js';
import { capability } from '../support/require.js';
import { runMain } from '../support/cli.js';
import { catalogCache } from '../support/catalog-cache.js';

const NO_CHROMIUM = capability(
  'chromium',
  existsSync(CHROMIUM) ? null : `${CHROMIUM} is missing: install the Debian package chromium (npm test's pretest does as root)`,
);

let root: string;

const smallConfig = (overrides: Record<string, unknown> = {}) => twoProblemConfig(root, overrides);

/** The CLI's commands, through its entry point in this process (what they print and their exit codes). */
const crucible = runMain;

let a: RunOutcome;
let b: RunOutcome;
let frozen: RunOutcome;
let tcs: RunOutcome;
let stopped: RunOutcome;

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-report-'));
  const cacheDir = catalogCache();
  a = await runExperiment({ config: smallConfig(), cacheDir });
  // b: another seed of a's setting; frozen: its control; tcs: a method without a Mistake Book.
  b = await runExperiment({ config: smallConfig({ seed: 4 }), cacheDir });
  frozen = await runExperiment({ config: smallConfig({ name: 'small-frozen', learner: { control: 'frozen' } }), cacheDir });
  tcs = await runExperiment({ config: smallConfig({ name: 'small-tcs', method: 'tcs', rounds: 2, mistakeBook: { enabled: false } }), cacheDir });
  stopped = await runExperiment({ config: smallConfig({ seed: 5, rounds: 3 }), cacheDir, stopWhen: (p) => p.round >= 1 });
}, 600_000);

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('answer selection on a recorded run', () => {
  it("agrees with the Judge's held-out figures in every problem-round, reused verdicts included", async () => {
    const detail = await loadRunDetail(a.dir);
    const log = await openSqliteLog(path.join(a.dir, 'log.db'), { create: false });
    const evaluated: EventData<'ProblemEvaluated'>[] = [];
    let reused = 0;
    for await (const e of log.read({}, { types: ['ProblemEvaluated', 'ExecutionRequested'] })) {
      if (e.type === 'ProblemEvaluated') evaluated.push(e.data as EventData<'ProblemEvaluated'>);
      else reused += (e.data as EventData<'ExecutionRequested'>).reused.length / 2;
    }
    await log.close();
    // The later rounds answer most pairs from earlier verdicts: the check below covers reuse.
    expect(reused).toBeGreaterThan(100);
    expect(detail.problems).toHaveLength(evaluated.length);
    for (const ev of evaluated) {
      const sel = detail.problems.find((p) => p.round === ev.round && p.problemId === ev.problemId)!;
      expect(sel.candidates).toBe(ev.heldOut.programs);
      expect(sel.passing).toBe(ev.heldOut.passed);
      // Every candidate has a verdict on every held-out test, executed or reused.
      const runs = new Set(sel.scores.map((s) => s.heldOut.run));
      expect(runs.size).toBe(1);
      expect([...runs][0]).toBeGreaterThan(0);
      for (const s of sel.scores) expect(s.generated.run).toBeGreaterThan(0);
      // The pick has the best generated-test pass rate.
      const rate = (s: (typeof sel.scores)[number]) => s.generated.passed / s.generated.run;
      const picked = sel.scores.find((s) => s.solutionId === sel.selectedGenerated)!;
      expect(rate(picked)).toBe(Math.max(...sel.scores.map(rate)));
      expect(sel.generatedPass).toBe(picked.passesHeldOut);
    }
    // Equal group sizes: a random pick's expectation is the round table's held-out pass.
    for (const r of detail.rows) expect(detail.selection.find((s) => s.round === r.round)!.random).toBeCloseTo(r.heldOutPass, 12);
    // The report's execution matrices hold the same verdicts, cell by cell, as the scores.
    const key = (x: { round: number; problemId: string }) => `${x.round}/${x.problemId}`;
    expect(detail.matrices.map(key).sort()).toEqual(evaluated.map(key).sort());
    // The matrix of a problem-round carries the Judge's held-out figure of it.
    for (const ev of evaluated) expect(detail.matrices.find((m) => key(m) === key(ev))!.figures.heldOutPass).toBe(ev.heldOut.passed / ev.heldOut.programs);
    for (const m of detail.matrices) {
      const sel = detail.problems.find((p) => p.round === m.round && p.problemId === m.problemId)!;
      expect(m.programs.map((p) => p.solutionId)).toEqual(sel.scores.map((s) => s.solutionId));
      m.programs.forEach((p, i) => {
        const s = sel.scores.find((x) => x.solutionId === p.solutionId)!;
        const count = (kind: string, accepted: boolean) =>
          m.tests.filter((t, j) => t.kind === kind && m.cells[i]![j] !== null && (!accepted || m.cells[i]![j] === 'accepted')).length;
        expect([count('generated', false), count('generated', true)]).toEqual([s.generated.run, s.generated.passed]);
        expect([count('book', false), count('book', true)]).toEqual([s.book.run, s.book.passed]);
        expect([count('heldout', false), count('heldout', true)]).toEqual([s.heldOut.run, s.heldOut.passed]);
      });
    }
    // The oracle bounds every selector.
    for (const s of detail.selection) expect(Math.max(s.generated ?? 0, s.withBook ?? 0, s.random)).toBeLessThanOrEqual(s.oracle);
  });

  it('holds, as rows, what the pure reducer over the same log shows (reused verdicts included)', async () => {
    // The reducer kept as the reference: its state, shown through the same two tables.
    const shown = answerSelectionProjection.tables;
    const reference: ReducerProjection<AnswerSelectionState> = {
      name: 'answer-selection',
      version: 1,
      types: answerSelectionProjection.types!,
      initial: emptyAnswerSelection,
      reduce: reduceAnswerSelection,
      tables: { answer_selection: shown.answer_selection!, answer_selection_rounds: shown.answer_selection_rounds! },
      rows: (state) => ({
        answer_selection: state.problems.map((p) => ({
          round: p.round,
          problem_id: p.problemId,
          candidates: p.candidates,
          passing: p.passing,
          selected_generated: p.selectedGenerated,
          generated_pass: p.generatedPass,
          selected_with_book: p.selectedWithBook,
          with_book_pass: p.withBookPass,
          random_pass: p.randomPass,
          oracle_pass: p.oraclePass,
          scores: p.scores,
        })),
        answer_selection_rounds: roundSelections(state.problems).map((r) => ({
          round: r.round,
          problems: r.problems,
          generated: r.generated,
          with_book: r.withBook,
          random: r.random,
          oracle: r.oracle,
        })),
      }),
    };
    const log = await openSqliteLog(path.join(a.dir, 'log.db'), { create: false });
    const hashes: string[] = [];
    const rows: unknown[] = [];
    for (const [i, ps] of [[reference], [answerSelectionProjection]].entries()) {
      // Small batches: the row projection reads rows written by earlier batches.
      const runner = await ProjectionRunner.replayInto(path.join(root, `selection-${i}.db`), { log, projections: ps, runId: a.runId, batchSize: 97 });
      hashes.push(await runner.stateHash('answer-selection'));
      rows.push(runner.readModel.db.prepare('SELECT * FROM answer_selection_rounds ORDER BY round').all());
      await runner.close();
    }
    await log.close();
    expect(rows[1]).toEqual(rows[0]);
    expect((rows[0] as unknown[]).length).toBe(4);
    expect(hashes[1]).toBe(hashes[0]);
  });

  it('is built when a run is read, kept in views.db, and verified by replay like every read model', async () => {
    await loadRunSummary(a.dir);
    const out = await crucible(['replay', a.dir, '--verify']);
    expect(out.stdout).not.toMatch(/not compared/);
    expect(out.stdout).toMatch(/^answer-selection\s+[0-9a-f]{64}$/m);
    expect(out.stdout).toMatch(/verified: every read model equals its replay/);
    expect(out.code).toBe(0);
  });
});

describe('crucible runs and compare', () => {
  it('lists runs with status, rounds and last-round figures', async () => {
    const out = await crucible(['runs', root]);
    expect(out.code).toBe(0);
    const line = (r: RunOutcome) => out.stdout.split('\n').find((l) => l.trim().startsWith(path.basename(r.dir)))!;
    expect(line(a)).toMatch(/small\s+code-a1\s+3\s+finished\s+4\/4/);
    expect(line(b)).toMatch(/small\s+code-a1\s+4\s+finished\s+4\/4/);
    expect(line(stopped)).toMatch(/small\s+code-a1\s+5\s+unfinished\s+1\/3/);
    const last = a.rows.at(-1)!;
    expect(line(a)).toContain(`${(100 * last.heldOutPass).toFixed(1)}%`);
    const json = (await crucible(['runs', root, '--json'])).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { runId: string; status: string; last: { killRate: number } });
    expect(json.find((r) => r.runId === a.runId)).toMatchObject({ status: 'finished', last: { killRate: last.killRate } });
  });

  it('does not write beside an unfinished run (it may be running)', async () => {
    // Without its views.db, a finished run would get one; an unfinished one is replayed aside.
    const views = path.join(stopped.dir, 'views.db');
    rmSync(views);
    const summary = await loadRunSummary(stopped.dir);
    expect(summary.status).toBe('unfinished');
    expect(summary.rows.map((r) => r.round)).toEqual([1]);
    expect(existsSync(views)).toBe(false);
  });

  it('prints round tables side by side with differences from the first run', async () => {
    const out = await crucible(['compare', a.dir, b.dir, '--json']);
    expect(out.code).toBe(0);
    const parsed = JSON.parse(out.stdout) as { runs: { label: string; runId: string }[]; tables: ReturnType<typeof compareRuns> };
    expect(parsed.runs.map((r) => [r.label, r.runId])).toEqual([
      ['A', a.runId],
      ['B', b.runId],
    ]);
    const held = parsed.tables.find((t) => t.metric === 'heldOutPass')!;
    expect(held.rows.map((r) => r.values)).toEqual(a.rows.map((r, i) => [r.heldOutPass, b.rows[i]!.heldOutPass]));
    for (const t of parsed.tables) for (const r of t.rows) expect(r.diffs[1]).toBeCloseTo(r.values[1]! - r.values[0]!, 12);
    const text = await crucible(['compare', a.dir, b.dir]);
    expect(text.stdout).toMatch(/^held-out pass\nround\s+A\s+B\s+B-A$/m);
    expect((await crucible(['compare', a.dir])).stderr).toMatch(/at least two run directories/);
  });
});

describe('crucible report', () => {
  const skip = NO_CHROMIUM ? ` [skipped: ${NO_CHROMIUM}]` : '';
  /** Every chart drawn with marks, no console error, no fetch, no text over other text. */
  const expectClean = (page: PageCheck, out: string, where: string) => {
    expect(page.consoleErrors, where).toEqual([]);
    expect(page.requests, where).toEqual([`file://${out}`]);
    expect(page.chartErrors, where).toBe(0);
    expect(page.chartsDrawn, where).toBe(page.charts.length);
    for (const c of page.charts) {
      expect(c.type, `${where} ${c.id}`).not.toBe('none');
      expect(c.elements, `${where} ${c.id}`).toBeGreaterThan(0);
      expect(c.painted, `${where} ${c.id}`).toBeGreaterThan(50);
    }
    expect(page.textBoxes, where).toBeGreaterThan(100);
    expect(page.overlaps, where).toEqual([]);
  };
  const dataOf = (html: string) =>
    JSON.parse(/<script type="application\/json" id="report-data">(.*?)<\/script>/s.exec(html)![1]!) as {
      headline: Headline;
      training: { key: string; recorded: boolean }[];
      matrices: { round: number; tests: { kind: string }[] }[];
    };

  it.skipIf(NO_CHROMIUM !== null)(
    `draws the headline of two seeds and their control, configs, training and matrices at desktop and laptop widths${skip}`,
    async () => {
      const out = path.join(root, 'report.html');
      const res = await crucible(['report', a.dir, b.dir, frozen.dir, '--out', out]);
      expect(res.code).toBe(0);
      expect(res.stdout).toMatch(/^wrote .*report\.html \(\d+ KiB, \d+ charts\) for run small-s3-/);
      const html = readFileSync(out, 'utf8');
      // Nothing to fetch: no external script, style sheet or image, and a policy that forbids it.
      expect(html).not.toMatch(/<script[^>]+src=|<link[^>]+href=|<img[^>]+src=/);
      expect(html).toContain(`content="default-src 'none'`);
      const data = dataOf(html);
      // Seeds 3 and 4 of one setting as one mean with a band; the frozen run as a control.
      expect(data.headline.groups.map((g) => [g.control, g.seeds])).toEqual([
        [null, [3, 4]],
        ['frozen', [3]],
      ]);
      const correct = data.headline.metrics.find((m) => m.key === 'exactCorrect')!;
      const last = a.rows.length;
      expect(correct.lines[0]!.mean[last - 1]).toBeCloseTo((a.rows.at(-1)!.exactCorrect! + b.rows.at(-1)!.exactCorrect!) / 2, 12);
      expect(correct.lines[0]!.min![last - 1]).toBe(Math.min(a.rows.at(-1)!.exactCorrect!, b.rows.at(-1)!.exactCorrect!));
      expect(data.headline.x.at(-1)).toBe(`after ${last}`);
      // The config diff names the control; the catalog trainer reports no loss, KL or clip fraction.
      expect(html).toContain('<td>learner.control</td><td>none</td><td>none</td><td>frozen</td>');
      expect(data.training.filter((f) => !f.recorded).map((f) => f.key)).toEqual(['loss', 'kl', 'clip_fraction']);
      expect(html).toContain('Mistake Book: most replayed tests');
      const detail = await loadRunDetail(a.dir);
      expect(detail.replayed.length).toBeGreaterThan(0);
      for (const width of [1440, 1024]) {
        const screenshot = path.join(root, `report-${width}.png`);
        const page = await openReport(out, { width, screenshot });
        expectClean(page, out, `${width}px`);
        // Five headline figures, four training figures, selection, Mistake Book, two reward histograms, the problem trend.
        expect(page.charts.map((c) => c.id).sort()).toEqual(
          [
            ...['exactCorrect', 'exactValid', 'heldOutPass', 'validity', 'killRate'].map((k) => `chart-headline-${k}`),
            ...['reward', 'advantage', 'entropy', 'grad_norm'].map((k) => `chart-train-${k}`),
            'chart-selection',
            'chart-book',
            'chart-rewards-code',
            'chart-rewards-test',
            'chart-problem-trend',
          ].sort(),
        );
        expect(readFileSync(screenshot).subarray(1, 4).toString()).toBe('PNG');
      }
    },
    120_000,
  );

  it.skipIf(NO_CHROMIUM !== null)(
    `pages a matrix's columns to the width it has, and shows the problem and round chosen${skip}`,
    async () => {
      const out = path.join(root, 'report-a.html');
      expect((await crucible(['report', a.dir, '--out', out])).code).toBe(0);
      const detail = await loadRunDetail(a.dir);
      const second = detail.matrices.at(-1)!;
      // A narrow matrix box: columns paged; then the last problem's first round, page 2.
      const before = `(() => {
        document.getElementById('matrix').style.width = '300px';
        window.dispatchEvent(new Event('resize'));
        const p = document.getElementById('matrix-problem');
        p.value = ${JSON.stringify(second.problemId)}; p.dispatchEvent(new Event('change'));
        const r = document.getElementById('matrix-round');
        r.value = '1'; r.dispatchEvent(new Event('change'));
        document.getElementById('matrix-next').click();
      })()`;
      const probe = `({ page: document.getElementById('matrix-page').textContent, meta: document.getElementById('matrix-meta').textContent,
        cells: document.querySelectorAll('#matrix .mx-row:not(.mx-head)')[0].querySelectorAll('i').length,
        rows: document.querySelectorAll('#matrix .mx-row:not(.mx-head)').length,
        correct: document.querySelectorAll('#matrix .mx-row.correct').length,
        titled: [...document.querySelectorAll('#matrix i')].every((i) => / × .*: /.test(i.title)),
        trend: Chart.getChart(document.getElementById('chart-problem-trend')).data.labels })`;
      const page = await openReport(out, { width: 1024, before, probe });
      expectClean(page, out, 'paged');
      const m = detail.matrices.find((x) => x.problemId === second.problemId && x.round === 1)!;
      const shown = page.probe as { page: string; meta: string; cells: number; rows: number; correct: number; titled: boolean; trend: string[] };
      // 300 px less the row labels: 17 columns of 12 px a page.
      const per = Math.floor((300 - 84 - 4) / 12);
      expect(shown.page).toBe(`columns ${per + 1}–${Math.min(m.tests.length, 2 * per)} of ${m.tests.length} (page 2 of ${Math.ceil(m.tests.length / per)})`);
      expect(shown.cells).toBe(Math.min(m.tests.length, 2 * per) - per);
      expect(shown.rows).toBe(m.programs.length);
      expect(shown.correct).toBe(correctPrograms(m).filter(Boolean).length);
      expect(shown.meta).toContain(`${second.problemId}, round 1: ${m.programs.length} programs`);
      expect(shown.titled).toBe(true);
      expect(shown.trend).toEqual(detail.matrices.filter((x) => x.problemId === second.problemId).map((x) => String(x.round)));
    },
    120_000,
  );

  it.skipIf(NO_CHROMIUM !== null)(
    `shows TCS's stages and buffered tests, and no Mistake Book, for a TCS run${skip}`,
    async () => {
      const out = path.join(root, 'report-tcs.html');
      expect((await crucible(['report', tcs.dir, '--out', out])).code).toBe(0);
      const html = readFileSync(out, 'utf8');
      expect(html).toContain('<h2>TCS stages</h2>');
      expect(html).toContain('<td>1</td><td>stage 1</td>');
      expect(html).not.toContain('Mistake Book: most replayed');
      expect(html).not.toContain('id="chart-book"');
      // Round 2 runs round 1's suites again: buffered tests, labelled as such.
      const data = dataOf(html);
      expect(data.matrices.filter((m) => m.round === 2).every((m) => m.tests.some((t) => t.kind === 'buffer'))).toBe(true);
      expect(data.matrices.filter((m) => m.round === 1).some((m) => m.tests.some((t) => t.kind === 'buffer'))).toBe(false);
      expect(html).toContain('TCS buffer (earlier rounds)');
      expectClean(await openReport(out, { width: 1024 }), out, 'tcs');
    },
    120_000,
  );

  it.skipIf(NO_CHROMIUM !== null)(`finds overlapping text where there is some${skip}`, async () => {
    const file = path.join(root, 'overlap.html');
    const words = Array.from({ length: 60 }, (_, i) => `<p>line ${i}</p>`).join('');
    writeFileSync(
      file,
      `<!doctype html><body data-charts="0" data-chart-errors="0">${words}<span style="position:absolute;top:8px;left:8px">on top</span></body>`,
    );
    const page = await openReport(file);
    expect(page.overlaps).toContainEqual({ a: 'line 0', b: 'on top' });
  });

  it('names a directory that is not a run', async () => {
    const res = await crucible(['report', root, '--out', path.join(root, 'x.html')]);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/not a crucible run directory/);
  });
});
