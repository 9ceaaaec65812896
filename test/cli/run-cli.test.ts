/** `crucible run` and `crucible replay` as a user runs them: the real command, in a child process. */
import { smallDemoArgs } from '../support/small-config.js';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runProcess } from '../support/cli.js';
import Database from 'better-sqlite3';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import type { EventData } from '../../src/events/catalog.js';
import type { RoundRow } from '../../src/projections/round-table.js';
import type { SummaryRow } from '../../src/cli/seed-summary.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'crucible-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const crucible = runProcess;

const small = [...smallDemoArgs(dir)];

describe('the crucible command', () => {
  let rows: (RoundRow & { runId: string })[] = [];

  it('runs the demo config and prints one JSON row per round, the figures of its log; replay --verify agrees', async () => {
    const out = await crucible(['run', 'configs/demo.yaml', ...small, '--json']);
    expect(out.code).toBe(0);
    rows = out.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as RoundRow & { runId: string });
    expect(rows.map((r) => r.round)).toEqual([1, 2]);
    const runDir = path.join(dir, rows[0]!.runId);

    // The printed rates are the log's counts: recomputed here from ProblemEvaluated.
    const log = await openSqliteLog(path.join(runDir, 'log.db'), { create: false });
    const sums = new Map<number, { programs: number; passed: number; sampled: number; valid: number; pairs: number; killed: number }>();
    const exact = new Map<number, EventData<'PolicyEvaluated'>>();
    for await (const e of log.read({}, { types: ['ProblemEvaluated', 'PolicyEvaluated'] })) {
      if (e.type === 'PolicyEvaluated') {
        const d = e.data as EventData<'PolicyEvaluated'>;
        exact.set(d.round, d);
        continue;
      }
      const d = e.data as EventData<'ProblemEvaluated'>;
      const s = sums.get(d.round) ?? { programs: 0, passed: 0, sampled: 0, valid: 0, pairs: 0, killed: 0 };
      sums.set(d.round, {
        programs: s.programs + d.heldOut.programs,
        passed: s.passed + d.heldOut.passed,
        sampled: s.sampled + d.tests.sampled,
        valid: s.valid + d.tests.valid,
        pairs: s.pairs + d.kill.targets * d.kill.suites,
        killed: s.killed + d.kill.killed,
      });
    }
    await log.close();
    for (const r of rows) {
      const s = sums.get(r.round)!;
      expect(s.programs).toBe(2 * 4);
      expect(r.heldOutPass).toBe(s.passed / s.programs);
      expect(r.validity).toBe(s.valid / s.sampled);
      expect(r.killRate).toBe(s.killed / s.pairs);
      // The exact figures are the Learner's recorded ones, probabilities strictly inside (0, 1).
      const d = exact.get(r.round)!;
      expect(r.exactCorrect).toBe(d.sampled.correct);
      expect(r.trainedCorrect).toBe(d.trained.correct);
      expect(r.exactCorrect).toBeGreaterThan(0);
      expect(r.exactCorrect).toBeLessThan(1);
      expect(r.exactValid).toBeGreaterThan(0);
      expect(r.exactValid).toBeLessThan(1);
    }
    // Every problem is scheduled in every round: round 2 samples from what round 1 trained.
    expect(rows[1]!.exactCorrect).toBe(rows[0]!.trainedCorrect);
    expect(rows[1]!.exactValid).toBe(rows[0]!.trainedValid);

    // The live read model holds the same rows.
    const views = new Database(path.join(runDir, 'views.db'), { readonly: true });
    const table = views.prepare('SELECT round, held_out_pass, exact_correct, kill_rate FROM rounds ORDER BY round').all();
    views.close();
    expect(table).toEqual(rows.map((r) => ({ round: r.round, held_out_pass: r.heldOutPass, exact_correct: r.exactCorrect, kill_rate: r.killRate })));

    const verify = await crucible(['replay', runDir, '--verify']);
    expect(verify.code).toBe(0);
    // Answer selection is built by the first report, not by the run: not compared yet.
    expect(verify.stdout).toMatch(/answer-selection: built when a report reads it, and not up to date in views.db: not compared/);
    expect(verify.stdout).toMatch(/verified: every read model compared equals its replay/);
  }, 240_000);

  it('--seeds 2 runs seeds 7 and 8 and prints, per round, the mean and spread of the two runs', async () => {
    const out = await crucible(['run', 'configs/demo.yaml', ...small, '--seeds', '2', '--json']);
    expect(out.code).toBe(0);
    const summary = out.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as SummaryRow & { runIds: string[] });
    expect(summary.map((r) => r.round)).toEqual([1, 2]);
    // Seed 7 is the run of the test above (same config, same directory): resumed, not redone.
    expect(summary[0]!.runIds[0]).toBe(rows[0]!.runId);
    const seed8 = await crucible(['run', 'configs/demo.yaml', ...small, '--seed', '8', '--json']);
    const rows8 = seed8.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as RoundRow);
    summary.forEach((s, i) => {
      const a = rows[i]!.heldOutPass;
      const b = rows8[i]!.heldOutPass;
      expect(s.columns.heldOutPass!.mean).toBeCloseTo((a + b) / 2, 12);
      expect(s.columns.heldOutPass!.min).toBe(Math.min(a, b));
      expect(s.columns.heldOutPass!.max).toBe(Math.max(a, b));
      expect(s.columns.exactCorrect!.mean).toBeCloseTo((rows[i]!.exactCorrect! + rows8[i]!.exactCorrect!) / 2, 12);
    });
  }, 240_000);

  it('refuses --dir with --seeds (each seed needs its own directory)', async () => {
    const out = await crucible(['run', 'configs/demo.yaml', '--seeds', '2', '--dir', dir]);
    expect(out.code).toBe(2);
    expect(out.stderr).toMatch(/--dir names one run directory/);
  });

  it('exits 2 with the key named on a bad override', async () => {
    const out = await crucible(['run', 'configs/demo.yaml', '--set', 'sampling.groupSise=3']);
    expect(out.code).toBe(2);
    expect(out.stderr).toMatch(/unknown key "sampling\.groupSise"/);
  });

  it('exits 2 on a directory that is not a run', async () => {
    const out = await crucible(['replay', dir]);
    expect(out.code).toBe(2);
    expect(out.stderr).toMatch(/not a crucible run directory/);
  });
});
