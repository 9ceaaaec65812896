/**
 * After a run: answer selection checked against the Judge's own figures, `crucible runs`,
 * `crucible compare` and `crucible report`, on small real runs made here (real SQLite logs, real
 * sandbox). The report is opened in headless Debian chromium: no console error, no request but
 * the file itself, every chart drawn with marks; a screenshot is written.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
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
import { answerSelectionProjection, executionsProjection } from '../../src/projections/run-views.js';
import { emptyAnswerSelection, reduceAnswerSelection, roundSelections, type AnswerSelectionState } from '../../src/projections/answer-selection.js';
import { openReport, CHROMIUM } from './browser.js';
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
let stopped: RunOutcome;

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-report-'));
  const cacheDir = catalogCache();
  a = await runExperiment({ config: smallConfig(), cacheDir });
  b = await runExperiment({ config: smallConfig({ seed: 4, rewards: { alpha: 0.3 } }), cacheDir });
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
    expect(detail.matrices.map((m) => m.problemId).sort()).toEqual([...new Set(evaluated.map((e) => e.problemId))].sort());
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
    // The row projection reads the requests' lists the executions read model keeps.
    for (const [i, ps] of [[reference], [executionsProjection, answerSelectionProjection]].entries()) {
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

  it('is kept live and verified by replay like every read model', async () => {
    const out = await crucible(['replay', a.dir, '--verify']);
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
  it.skipIf(NO_CHROMIUM !== null)(
    `writes one self-contained HTML file that chromium draws with no error and no fetch${NO_CHROMIUM ? ` [skipped: ${NO_CHROMIUM}]` : ''}`,
    async () => {
      const out = path.join(root, 'report.html');
      const res = await crucible(['report', a.dir, b.dir, '--out', out]);
      expect(res.code).toBe(0);
      expect(res.stdout).toMatch(/^wrote .*report\.html \(\d+ KiB, \d+ charts\) for run small-s3-/);
      const html = readFileSync(out, 'utf8');
      // Nothing to fetch: no external script, style sheet or image, and a policy that forbids it.
      expect(html).not.toMatch(/<script[^>]+src=|<link[^>]+href=|<img[^>]+src=/);
      expect(html).toContain(`content="default-src 'none'`);
      const detail = await loadRunDetail(a.dir);
      const screenshot = path.join(root, 'report.png');
      const page = await openReport(out, screenshot);
      expect(page.consoleErrors).toEqual([]);
      expect(page.requests).toEqual([`file://${out}`]);
      expect(page.chartErrors).toBe(0);
      // Rounds, selection, Mistake Book, two reward histograms, one matrix per problem, the compare chart.
      expect(page.charts).toHaveLength(5 + detail.matrices.length + 1);
      expect(page.chartsDrawn).toBe(page.charts.length);
      for (const c of page.charts) {
        expect(c.type, c.id).not.toBe('none');
        expect(c.elements, c.id).toBeGreaterThan(0);
        expect(c.painted, c.id).toBeGreaterThan(50);
      }
      expect(readFileSync(screenshot).subarray(1, 4).toString()).toBe('PNG');
      // The Mistake Book section shows replayed tests with the programs they caught.
      expect(detail.replayed.length).toBeGreaterThan(0);
      expect(html).toContain('replayed in');
    },
    120_000,
  );

  it('names a directory that is not a run', async () => {
    const res = await crucible(['report', root, '--out', path.join(root, 'x.html')]);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/not a crucible run directory/);
  });
});
