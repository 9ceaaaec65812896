/** The log file's blob table: kept WITHOUT ROWID in new files; files made with the rowid table still read and write. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { openSqliteLog } from '../../src/events/sqlite-log.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'crucible-blobs-table-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const tableSql = (file: string) => {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare("SELECT sql FROM sqlite_master WHERE name = 'blobs'").pluck().get() as string;
  } finally {
    db.close();
  }
};

it('a new log keeps blobs without a rowid; a log with the older rowid table still reads and writes them', async () => {
  const file = path.join(dir, 'log.db');
  const log = await openSqliteLog(file);
  const first = await log.blobs.put('print(1)\n');
  await log.close();
  expect(tableSql(file)).toMatch(/WITHOUT ROWID/);

  // The older table: same columns, a rowid and a second index on the hash.
  const db = new Database(file);
  db.exec('CREATE TABLE old_blobs (hash TEXT PRIMARY KEY, bytes BLOB NOT NULL); INSERT INTO old_blobs SELECT hash, bytes FROM blobs; DROP TABLE blobs; ALTER TABLE old_blobs RENAME TO blobs;');
  db.close();
  expect(tableSql(file)).not.toMatch(/WITHOUT ROWID/);

  const again = await openSqliteLog(file);
  try {
    expect(await again.blobs.getText(first)).toBe('print(1)\n');
    const second = await again.blobs.put('print(2)\n');
    expect(await again.blobs.getText(second)).toBe('print(2)\n');
  } finally {
    await again.close();
  }
  expect(tableSql(file)).not.toMatch(/WITHOUT ROWID/);
});
