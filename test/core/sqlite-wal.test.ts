import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { useWal, WAL_CHECKPOINT_BYTES } from '../../src/core/sqlite-wal.js';
import { ReadModel } from '../../src/projections/readmodel.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'crucible-wal-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Commits `count` transactions of one 100 KB row each; returns the WAL file's largest size seen. */
function commitRows(db: Database.Database, count: number): number {
  db.exec('CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, b BLOB)');
  const ins = db.prepare('INSERT INTO t (b) VALUES (?)');
  let largest = 0;
  for (let i = 0; i < count; i++) {
    ins.run(randomBytes(100_000));
    largest = Math.max(largest, statSync(`${db.name}-wal`).size);
  }
  return largest;
}

describe('useWal: WAL mode checkpointed every WAL_CHECKPOINT_BYTES', () => {
  it("lets the WAL grow past SQLite's default of 1,000 pages, and checkpoints it near the bound", () => {
    const db = new Database(path.join(dir, 'a.db'));
    db.pragma('synchronous = OFF');
    useWal(db);
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    // 100 commits, 10 MB: at the default the WAL restarts after about 4 MB and never passes 5.
    expect(commitRows(db, 100)).toBeGreaterThan(9_000_000);
    // 700 commits, 70 MB in all: checkpointed once past 64 MB, so the WAL restarts from its
    // beginning and its file stays near the bound.
    const largest = commitRows(db, 600);
    expect(largest).toBeGreaterThan(WAL_CHECKPOINT_BYTES);
    expect(largest).toBeLessThan(WAL_CHECKPOINT_BYTES + 2_000_000);
    db.close();
  });

  it('sets the interval in pages of the file: a read model of 16 KiB pages checkpoints at the same bytes', async () => {
    const model = ReadModel.open(path.join(dir, 'views.db'));
    expect(model.db.pragma('page_size', { simple: true })).toBe(16384);
    expect(model.db.pragma('wal_autocheckpoint', { simple: true })).toBe(WAL_CHECKPOINT_BYTES / 16384);
    await model.close();
  });
});
