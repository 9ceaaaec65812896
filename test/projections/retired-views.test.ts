/**
 * A run's views.db written before the executions read model was retired, opened as a run opens
 * its read models: the retired tables go, the changed read model is rebuilt, the others are kept,
 * and every read model equals a replay of the same log (test/fixtures/views-before-retirement).
 */
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRunViews } from '../../src/actors/run.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/events/sqlite/sqlite-log.js';
import { ProjectionRunner } from '../../src/projections/runner.js';
import { RUN_PROJECTIONS } from '../../src/projections/run-views.js';

const fixtures = path.join(import.meta.dirname, '../fixtures');
let dir: string;
let log: SqliteEventLog;
let runId: string;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'crucible-retired-'));
  cpSync(path.join(fixtures, 'format5-run/log.db'), path.join(dir, 'log.db'));
  cpSync(path.join(fixtures, 'views-before-retirement/views.db'), path.join(dir, 'views.db'));
  log = await openSqliteLog(path.join(dir, 'log.db'), { create: false });
  for await (const e of log.read({}, { types: ['RunStarted'] })) runId ??= e.runId;
});
afterAll(async () => {
  await log.close();
  rmSync(dir, { recursive: true, force: true });
});

const tablesOf = (file: string) => {
  const db = new Database(file, { readonly: true });
  try {
    return {
      tables: db.prepare(`SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name`).pluck().all() as string[],
      checkpoints: db.prepare('SELECT name FROM crucible_projections ORDER BY name').pluck().all() as string[],
    };
  } finally {
    db.close();
  }
};

describe('a views.db of the version before', () => {
  it('loses the retired tables, rebuilds answer selection, keeps the rest, and equals a replay', async () => {
    const before = tablesOf(path.join(dir, 'views.db'));
    expect(before.tables).toEqual(expect.arrayContaining(['executions', 'execution_requests', 'request_test_ids']));
    expect(before.checkpoints).toContain('executions');

    const views = await openRunViews(log, dir, runId);
    try {
      expect(views.rebuilt).toEqual(['answer-selection']);
      await views.catchUp();
      const after = tablesOf(path.join(dir, 'views.db'));
      for (const t of ['executions', 'execution_requests', 'request_test_ids']) expect(after.tables).not.toContain(t);
      expect(after.checkpoints).toEqual(RUN_PROJECTIONS.map((p) => p.name).sort());

      const replayed = await ProjectionRunner.replayInto(path.join(dir, 'replayed.db'), { log, projections: RUN_PROJECTIONS, runId });
      try {
        for (const p of RUN_PROJECTIONS) expect({ [p.name]: await views.stateHash(p.name) }).toEqual({ [p.name]: await replayed.stateHash(p.name) });
      } finally {
        await replayed.close();
      }
    } finally {
      await views.close();
    }
  });
});
