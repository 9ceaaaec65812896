/**
 * Opening a SQLite file as a crucible log: checks that it is one (or a new file) before anything
 * is written, so another application's database, a non-SQLite file or a log of a newer format
 * is refused untouched.
 */
import { randomUUID } from 'node:crypto';
import { closeSync, existsSync, openSync, readSync, statSync } from 'node:fs';
import Database from 'better-sqlite3';
import { NewerLogFormatError, NotACrucibleLogError } from '../errors.js';
import { useWal } from '../../core/sqlite-wal.js';

/** Bump when the tables change in a way older code cannot read; add a migration from the old one.
 * 2: blob keys are the 32 bytes of the sha256 (format 1 stored its hex text; both are read).
 * 3: a commit's later rows leave out its id and a time equal to the row before's (sqlite-log.ts);
 *    rows written before keep them, and both are read.
 * 4: packed blobs are found through sorted runs (blob-index.ts), not blob_members alone: code of
 *    format 3 would not find the blobs packed since. blob_members keeps the older ones.
 * 5: event ids are not indexed, but for ids an appender gave (event_ids): an id derived from its
 *    commit's id is unique with the commit (commits), and its index put each commit in a random
 *    leaf (a tenth of what a run wrote). Code of format 4 would let a given id be reused. Files
 *    made before keep their index of every id, which goes on refusing reuse. */
export const LOG_FORMAT_VERSION = 5;
const LOG_KIND = 'event-log';
/** The ids appenders gave their events (not derived from the commit id): unique among them. */
const EVENT_IDS = 'CREATE TABLE IF NOT EXISTS event_ids (id TEXT PRIMARY KEY) WITHOUT ROWID;';
const SQLITE_MAGIC = 'SQLite format 3\u0000';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS crucible_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
  position INTEGER PRIMARY KEY,
  id TEXT NOT NULL,
  commit_id TEXT NOT NULL,
  stream TEXT NOT NULL,
  type TEXT NOT NULL,
  v INTEGER NOT NULL,
  run_id TEXT NOT NULL,
  causation_id TEXT,
  correlation_id TEXT,
  at TEXT NOT NULL,
  data TEXT NOT NULL,
  sum INTEGER
);
CREATE INDEX IF NOT EXISTS events_by_stream ON events (stream, position);
CREATE TABLE IF NOT EXISTS commits (commit_id TEXT PRIMARY KEY, first_position INTEGER NOT NULL, count INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS blobs (hash TEXT PRIMARY KEY, bytes BLOB NOT NULL) WITHOUT ROWID;
${EVENT_IDS}
`;
// blobs is kept in its key's b-tree (WITHOUT ROWID): no second index of 64-character hashes
// beside the table. Files made before hold a rowid table with the same columns; both answer
// the same statements.

export interface OpenFileOptions {
  synchronous: 'full' | 'normal';
  busyTimeoutMs: number;
  /** Create the log when the file does not exist (default true). */
  create: boolean;
  /** Open it read-only: nothing is written to the file, its format marker included. */
  readOnly?: boolean;
}

type Inspection = { state: 'new' } | { state: 'existing'; format: number };

export interface CrucibleFileKind {
  /** Value of the `kind` row of crucible_meta, e.g. "event-log". */
  kind: string;
  /** Newest format this code reads. */
  format: number;
  notOurs(path: string, reason: string): Error;
  newer(path: string, found: number, supported: number): Error;
}

const LOG_FILE: CrucibleFileKind = {
  kind: LOG_KIND,
  format: LOG_FORMAT_VERSION,
  notOurs: (path, reason) => new NotACrucibleLogError(path, reason),
  newer: (path, found, supported) => new NewerLogFormatError(path, found, supported),
};

/** Looks at a crucible SQLite file of the given kind without writing to it; throws the kind's errors. */
export function inspectCrucibleFile(path: string, k: CrucibleFileKind): Inspection {
  const ours = new Set<unknown>();
  const fail = (reason: string) => {
    const e = k.notOurs(path, reason);
    ours.add(e);
    return e;
  };
  if (!existsSync(path)) return { state: 'new' };
  const size = statSync(path).size;
  if (size > 0) {
    const header = Buffer.alloc(16);
    const fd = openSync(path, 'r');
    try {
      readSync(fd, header, 0, 16, 0);
    } finally {
      closeSync(fd);
    }
    if (size < 16 || header.toString('latin1') !== SQLITE_MAGIC) {
      throw fail('the file is not an SQLite database');
    }
  }
  let db: Database.Database;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true });
  } catch (err) {
    throw fail(`SQLite cannot open it (${(err as Error).message})`);
  }
  try {
    const tables = db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table'`).pluck().all() as string[];
    if (tables.length === 0) return { state: 'new' };
    if (!tables.includes('crucible_meta')) {
      throw fail(`it is another SQLite database (tables: ${tables.slice(0, 5).join(', ')})`);
    }
    const meta = new Map((db.prepare('SELECT key, value FROM crucible_meta').all() as { key: string; value: string }[]).map((r) => [r.key, r.value]));
    const kind = meta.get('kind');
    if (kind !== k.kind) throw fail(`it is a crucible ${kind ?? 'file of unknown kind'}`);
    const format = Number(meta.get('format'));
    if (!Number.isInteger(format) || format < 1) {
      throw fail(`its format marker is "${meta.get('format')}"`);
    }
    if (format > k.format) {
      const e = k.newer(path, format, k.format);
      ours.add(e);
      throw e;
    }
    return { state: 'existing', format };
  } catch (err) {
    if (ours.has(err)) throw err;
    throw fail(`SQLite cannot read it (${(err as Error).message})`);
  } finally {
    db.close();
  }
}

/** Opens (creating when allowed) a crucible log file in WAL mode with the requested durability. */
export function openLogFile(path: string, opts: OpenFileOptions): Database.Database {
  const found = inspectCrucibleFile(path, LOG_FILE);
  if (found.state === 'new' && (!opts.create || opts.readOnly)) throw new NotACrucibleLogError(path, 'the file does not exist');
  if (opts.readOnly) return openReadOnly(path, opts.busyTimeoutMs);
  const db = new Database(path);
  try {
    db.pragma(`busy_timeout = ${Math.max(0, Math.floor(opts.busyTimeoutMs))}`);
    useWal(db);
    db.pragma(`synchronous = ${opts.synchronous === 'normal' ? 'NORMAL' : 'FULL'}`);
    // Index pages of a long log stay in memory (the default cache is 2 MB).
    db.pragma('cache_size = -32768');
    if (found.state === 'new') {
      // Two processes may create the same log at once: the immediate transaction serializes them.
      db.transaction(() => {
        db.exec(SCHEMA);
        const put = db.prepare('INSERT OR IGNORE INTO crucible_meta (key, value) VALUES (?, ?)');
        put.run('kind', LOG_KIND);
        put.run('format', String(LOG_FORMAT_VERSION));
      }).immediate();
    }
    addChecksumColumn(db);
    markFormat(db);
    addLogId(db);
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

/** Logs written before rows carried checksums get the (nullable) column: their rows keep NULL
 * and are validated in full on every read; rows appended from now on are checked instead.
 * Code that does not know the column names its columns and leaves it NULL. */
function addChecksumColumn(db: Database.Database): void {
  const has = () => (db.prepare('SELECT name FROM pragma_table_info(?)').pluck().all('events') as string[]).includes('sum');
  if (has()) return;
  db.transaction(() => {
    if (!has()) db.exec('ALTER TABLE events ADD COLUMN sum INTEGER');
  }).immediate();
}

const LOG_ID_KEY = 'log-id';

/** The log's identity (see EventLog.identity): a random id the file keeps, so that a copy or a
 * move of the file is the same log and a file made again in the same place is another. A file
 * made before ids existed gets one the first time it is opened. */
function addLogId(db: Database.Database): void {
  if (logIdOf(db) !== undefined) return;
  // Two processes may add it at once: the first one's stays.
  db.prepare('INSERT OR IGNORE INTO crucible_meta (key, value) VALUES (?, ?)').run(LOG_ID_KEY, randomUUID());
}

export function logIdOf(db: Database.Database): string | undefined {
  return db.prepare('SELECT value FROM crucible_meta WHERE key = ?').pluck().get(LOG_ID_KEY) as string | undefined;
}

/** A file of an older format opened by this code is of the current one from now on: the blobs
 * it puts have binary keys (2), a commit's later rows it appends leave out what the row before
 * holds (3), its packed blobs are indexed in runs (4) and the ids appenders give are kept in
 * event_ids (5), which older code would not read or keep. Nothing already stored changes. */
function markFormat(db: Database.Database): void {
  const current = () => Number(db.prepare("SELECT value FROM crucible_meta WHERE key = 'format'").pluck().get());
  if (current() >= LOG_FORMAT_VERSION) return;
  db.transaction(() => {
    if (current() >= LOG_FORMAT_VERSION) return;
    db.exec(EVENT_IDS);
    db.prepare("UPDATE crucible_meta SET value = ? WHERE key = 'format'").run(String(LOG_FORMAT_VERSION));
  }).immediate();
}

/**
 * A read-only connection: SQLite refuses any write through it. A log written before rows
 * carried checksums is read through a temporary view that adds the column (temporary objects
 * live outside the file and shadow its table).
 */
function openReadOnly(path: string, busyTimeoutMs: number): Database.Database {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    db.pragma(`busy_timeout = ${Math.max(0, Math.floor(busyTimeoutMs))}`);
    db.pragma('cache_size = -32768');
    const columns = db.prepare('SELECT name FROM pragma_table_info(?)').pluck().all('events') as string[];
    if (!columns.includes('sum')) db.exec('CREATE TEMP VIEW events AS SELECT *, NULL AS sum FROM main.events');
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

/**
 * After a read-only connection to `path` closed: a read-only connection to a file in WAL mode
 * creates its -wal and -shm files but may not remove them. When they were not there before it
 * opened (no other connection had the file open), a plain connection that only reads is
 * opened and closed: SQLite removes them as the last connection closes, and keeps them while
 * another connection (a run started meanwhile) holds the file. Nothing is written to the log.
 */
export function tidyAfterReadOnly(path: string, walExistedBefore: boolean): void {
  if (walExistedBefore || !existsSync(`${path}-wal`)) return;
  try {
    const db = new Database(path, { fileMustExist: true });
    try {
      db.prepare('SELECT 1 FROM sqlite_master LIMIT 1').get();
    } finally {
      db.close();
    }
  } catch {
    // A directory or file this process may not write: the files stay, as SQLite left them.
  }
}
