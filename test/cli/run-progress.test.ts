/**
 * What `crucible run` says while it runs: the progress reporter over given progress and clock
 * readings, and the real command without a terminal on a real small run: a line per round, a
 * resumed run saying where it goes on from, and a resumed round's seconds without the time the
 * run was stopped.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { stringify } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { twoProblemConfig } from '../support/small-config.js';
import { catalogCache } from '../support/catalog-cache.js';
import { runProcess } from '../support/cli.js';
import { runExperiment, type RunProgress } from '../../src/actors/run.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import type { EventData } from '../../src/events/catalog.js';
import type { RoundRow } from '../../src/projections/round-table.js';
import { LINE_EVERY_MS, ProgressReporter, duration, progressBar } from '../../src/cli/progress.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'crucible-progress-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const at = (round: number, position: number, executions: number): RunProgress => ({ round, rounds: 4, events: position, position, executions });

describe('the progress reporter', () => {
  it('without a terminal, prints a line per round completed and one per minute of a long round', () => {
    const lines: string[] = [];
    const r = new ProgressReporter(false, (t) => lines.push(t));
    r.report(at(0, 10, 0), 0);
    r.report(at(0, 50, 100), LINE_EVERY_MS - 1);
    expect(lines).toEqual([]);
    r.report(at(0, 60, 120), LINE_EVERY_MS);
    expect(lines).toEqual(['crucible: round 1/4 under way: log position 60, 120 executions, time left: after the first round\n']);
    r.report(at(1, 80, 200), 100_000);
    // One round in 100 s, three left.
    expect(lines[1]).toBe('crucible: round 1/4 done: log position 80, 200 executions, about 5m 00s left\n');
    r.report(at(1, 81, 201), 100_001);
    expect(lines).toHaveLength(2);
  });

  it('before round 1 of a run with a warm start: its last recorded step and loss, a line per minute and one as each role ends', () => {
    const warm = (role: 'code' | 'test', step: number, steps: number, loss: number | null): RunProgress => ({
      ...at(0, 100 + step, 0),
      warmStart: { role, step, steps, loss },
    });
    expect(progressBar(warm('code', 40, 250, 1.23456), null)).toBe(
      `\r[${'#'.repeat(5)}${'.'.repeat(25)}] warm start code step 40/250, loss 1.235  position 140`,
    );
    const lines: string[] = [];
    const r = new ProgressReporter(false, (t) => lines.push(t));
    r.report(warm('code', 10, 20, 2.5), 0);
    r.report(warm('code', 15, 20, 2.0), LINE_EVERY_MS - 1);
    expect(lines).toEqual([]);
    r.report(warm('code', 18, 20, 1.5), LINE_EVERY_MS);
    r.report(warm('code', 20, 20, 1.25), LINE_EVERY_MS + 1);
    r.report(warm('code', 20, 20, 1.25), LINE_EVERY_MS + 2);
    // A role's checkpoint from the warm-start cache has no loss of its own.
    r.report(warm('test', 8, 8, null), LINE_EVERY_MS + 3);
    expect(lines).toEqual([
      'crucible: warm start code step 18/20, loss 1.500: log position 118\n',
      'crucible: warm start code step 20/20, loss 1.250: log position 120\n',
      'crucible: warm start test step 8/8 (cached): log position 108\n',
    ]);
    // Then the rounds, whose estimate leaves the warm start's minutes out.
    r.report(at(0, 200, 0), 10 * LINE_EVERY_MS);
    r.report(at(1, 300, 50), 10 * LINE_EVERY_MS + 100_000);
    expect(lines[3]).toBe('crucible: round 1/4 done: log position 300, 50 executions, about 5m 00s left\n');
  });

  it('on a terminal, redraws a bar with the log position, the executions and the time left', () => {
    expect(progressBar(at(2, 1234, 812), 125)).toBe(`\r[${'#'.repeat(15)}${'.'.repeat(15)}] round 2/4  position 1234  812 executions  about 2m 05s left`);
    expect([duration(42), duration(3725)]).toEqual(['42s', '1h 02m']);
  });
});

describe('crucible run without a terminal', () => {
  it("prints a line per round; a resumed run says where it goes on from, and its round's seconds leave out the time it was stopped", async () => {
    const config = twoProblemConfig(path.join(root, 'runs'), { rounds: 2 });
    const file = path.join(root, 'small.yaml');
    writeFileSync(file, stringify(config));
    // Stopped in the middle of round 1, as a killed process stops.
    const stopped = await runExperiment({ config, cacheDir: catalogCache(), stopWhen: (p) => p.events >= 40 });
    expect(stopped.rows).toEqual([]);
    const log = await openSqliteLog(path.join(stopped.dir, 'log.db'), { create: false, readOnly: true });
    const head = await log.head();
    await log.close();
    // Stopped for a while before it is resumed.
    await sleep(2500);
    const out = await runProcess(['run', file, '--json']);
    expect(out.code).toBe(0);
    const lines = out.stderr.split('\n').filter((l) => l.startsWith('crucible: '));
    expect(lines[0]).toBe(`crucible: resuming run ${stopped.runId} from position ${head}, round 1`);
    expect(
      lines
        .filter((l) => /^crucible: round \d\/2 done: log position \d+, \d+ executions, (about [\dhms ]+ left|time left: after the first round)$/.test(l))
        .map((l) => l.slice(16, 19)),
    ).toEqual(['1/2', '2/2']);

    // Round 1's seconds: from RoundStarted to RoundCompleted, less the time stopped.
    const rows = out.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as RoundRow);
    const resumedLog = await openSqliteLog(path.join(stopped.dir, 'log.db'), { create: false, readOnly: true });
    const times: Record<string, string> = {};
    let stoppedAt: string | null = null;
    for await (const e of resumedLog.read({}, { types: ['RoundStarted', 'RoundCompleted', 'RunResumed'] })) {
      if (e.type === 'RunResumed') stoppedAt = (e.data as EventData<'RunResumed'>).stoppedAt;
      const round = (e.data as { round?: number }).round;
      times[round === undefined ? e.type : `${e.type} ${round}`] = e.at;
    }
    await resumedLog.close();
    const ms = (k: string) => Date.parse(times[k]!);
    const gap = ms('RunResumed') - Date.parse(stoppedAt!);
    expect(gap).toBeGreaterThanOrEqual(2500);
    expect(rows[0]!.seconds).toBeCloseTo((ms('RoundCompleted 1') - ms('RoundStarted 1') - gap) / 1000, 6);
    expect(rows[1]!.seconds).toBeCloseTo((ms('RoundCompleted 2') - ms('RoundStarted 2')) / 1000, 6);
  }, 240_000);
});
