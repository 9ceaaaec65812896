/**
 * A run directory belongs to the log its run was on. The run id names only config and seed, so
 * the same config run on SQLite and then on JetStream goes to the same directory by default:
 * its read models and snapshots hold positions of the SQLite log, which mean nothing on
 * JetStream. The directory is refused before anything is written to it, and snapshots of
 * another log are refused (the actors refold), on a real nats-server and real SQLite files.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunMismatchError, runExperiment, type RunOutcome } from '../../src/actors/run.js';
import type { RestartReport } from '../../src/actors/runtime.js';
import type { RoundRow } from '../../src/projections/round-table.js';
import { twoProblemConfig } from '../support/small-config.js';
import { catalogCache } from '../support/catalog-cache.js';
import { startTestNats, type TestNats } from '../support/nats.js';

let root: string;
let nats: TestNats;
let onSqlite: RunOutcome;
const config = () => twoProblemConfig(root, { rounds: 2 });
const figures = (rows: RoundRow[]) => rows.map(({ seconds: _s, ...r }) => r);

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-log-identity-'));
  nats = await startTestNats(1);
  // Snapshots every 40 events: every actor has one at a position of the SQLite log.
  onSqlite = await runExperiment({ config: config(), cacheDir: catalogCache(), snapshotEvery: 40 });
}, 300_000);
afterAll(async () => {
  await nats?.stop();
  rmSync(root, { recursive: true, force: true });
});

describe('a run directory and the log it was made on', () => {
  it('the directory of a SQLite run, reused by the same run on JetStream, is refused naming it and --dir, before anything is written there', async () => {
    expect(onSqlite.finished).toBe(true);
    const run = runExperiment({ config: config(), cacheDir: catalogCache(), log: nats.urls[0]! });
    await expect(run).rejects.toBeInstanceOf(RunMismatchError);
    await expect(run).rejects.toThrow(
      new RegExp(
        `^${onSqlite.dir} holds this run as it ran on another log \\(sqlite:[0-9a-f-]+: the read models in views.db\\); a run on nats://\\S+ needs a directory of its own: give it another --dir$`,
      ),
    );
    expect(existsSync(path.join(onSqlite.dir, 'log.json'))).toBe(false);
  }, 120_000);

  it("snapshots of the SQLite run are refused on JetStream: every actor refolds, and the run ends with the SQLite run's table", async () => {
    const dir = path.join(root, 'on-jetstream');
    mkdirSync(dir);
    copyFileSync(path.join(onSqlite.dir, 'snapshots.db'), path.join(dir, 'snapshots.db'));
    const reports: RestartReport[] = [];
    const outcome = await runExperiment({ config: config(), dir, cacheDir: catalogCache(), log: nats.urls[0]!, onRestart: (r) => reports.push(r) });
    expect(reports.map((r) => r.actor).sort()).toEqual(['adversary', 'conductor', 'executor', 'judge', 'learner', 'solver']);
    for (const r of reports) {
      expect(r.snapshot, r.actor).toBe('refused');
      expect(r.refused?.message, r.actor).toMatch(
        /refused: it was folded from another log \(sqlite:[0-9a-f-]+\), not from jetstream:CRUCIBLE_RUN_\S+@\S+; \w+ refolds the log from the start$/,
      );
      expect(r.from, r.actor).toBe(0);
    }
    expect(outcome.finished).toBe(true);
    expect(figures(outcome.rows)).toEqual(figures(onSqlite.rows));
  }, 300_000);
});
