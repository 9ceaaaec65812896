/**
 * Actor snapshots: an actor's machine state and side index as they stood at one log position,
 * stored as a blob with its sha256 in a checkpoint table beside the run (`snapshots.db`, one row
 * per actor, replaced by the next snapshot), so that a restarted actor folds only the events
 * after that position.
 *
 * A snapshot is a cache of a fold, never a source of truth: the log holds no trace of it (a run
 * writes the same events with or without snapshots, and the log's blob store does not grow with
 * them), and one that is corrupt, of another run or another log, or of another version (its
 * actor's schemas or machine changed since, see snapshot-schema.ts) is refused or ignored, the
 * reason reported, and the actor refolded from the start of the log.
 */
import { createHash } from 'node:crypto';
import { crc32, deflateSync, inflateSync } from 'node:zlib';
import Database from 'better-sqlite3';
import { z } from 'zod';
import type { Position } from '../events/log.js';
import path from 'node:path';
import { DamagedFileError, derivedFailure } from '../projections/damaged-file.js';
import { useWal } from '../core/sqlite-wal.js';

/** Bump when the body below or the side rows change shape (2: binary side rows; 4: rows keyed by
 * a program's number; 3 numbered programs in each process's own order; 5: the log folded is
 * named in the body; 6: a row per program, where its results are in the log, see
 * program-history.ts, not a row per result; 7: a program's history in parts of bounded size,
 * only its head and new parts rewritten; 8: a program's rows keyed by its number, found through
 * its problem's directory, the Executor's too). */
export const SNAPSHOT_FORMAT = 8;

/** What the checkpoint table says about an actor's latest snapshot. */
export interface SnapshotRef {
  actor: string;
  /** The log position the snapshot was folded up to (inclusive). */
  position: Position;
  /** sha256 of the body as stored, checked before the body is trusted. */
  hash: string;
  /** Its actor's snapshot version when written (see snapshot-schema.ts): another version's
   * snapshot is ignored. */
  version: string;
}

/** The blob's content. `machine` is xstate's persisted snapshot, `index` the side index's
 * serialized form (null when the actor keeps none). */
export const SnapshotBody = z
  .object({
    format: z.literal(SNAPSHOT_FORMAT),
    runId: z.string().min(1),
    /** The identity of the log folded (EventLog.identity): `position` is a position of that log. */
    log: z.string().min(1),
    actor: z.string().min(1),
    version: z.string().min(1),
    position: z.number().int().nonnegative(),
    /** The last event folded at or before `position` and the commit that held it: a log that can
     * drop messages it showed (JetStream failing over) is asked whether it still holds that
     * commit there before the snapshot is used. Absent in snapshots written before it was kept. */
    lastRead: z.strictObject({ position: z.number().int().nonnegative(), commitId: z.string().min(1) }).optional(),
    machine: z.record(z.string(), z.unknown()),
    index: z.unknown(),
  })
  .strict();
export type SnapshotBody = z.infer<typeof SnapshotBody>;

/** Bodies from this size on are stored deflated: a Learner's or a Judge's body of a real run is
 * megabytes of JSON (open samples, Mistake Books) that deflate to a fifth or less, and each
 * snapshot writes it again (twice, with SQLite's WAL). Smaller ones stay as text. */
export const DEFLATE_BODIES_FROM = 64 * 1024;
const ZLIB_FIRST_BYTE = 0x78;
const JSON_FIRST_BYTE = 0x7b; // '{'

/** A body's JSON text as stored: as it is, or deflated (zlib) from `deflateFrom` bytes on. */
export function encodeBody(text: string, deflateFrom = DEFLATE_BODIES_FROM): Buffer {
  const bytes = Buffer.from(text);
  return bytes.length >= deflateFrom ? deflateSync(bytes, { level: 1 }) : bytes;
}

/** A stored body's JSON text (see encodeBody); a body that is neither is named as such. */
export function decodeBody(bytes: Uint8Array): string {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (b[0] === JSON_FIRST_BYTE) return b.toString('utf8');
  if (b[0] !== ZLIB_FIRST_BYTE) throw new Error(`it is neither JSON text nor deflated JSON (first byte 0x${(b[0] ?? 0).toString(16)})`);
  try {
    return inflateSync(b).toString('utf8');
  } catch (err) {
    throw new Error(`it does not inflate (${(err as Error).message})`);
  }
}

export interface StoredSnapshot {
  ref: SnapshotRef;
  /** The body as stored: its JSON text (see SnapshotBody), deflated when large (encodeBody). */
  body: Uint8Array;
  /** Rows kept beside the body (see SideRows), saved with it. */
  side?: SideRows;
}

/**
 * Rows an actor's index keeps beside its snapshot body instead of in it, by key: what grows with
 * the whole run (every recorded verdict) is written once, as it is recorded, not again in every
 * body, and a restarted actor reads the rows it needs instead of parsing them all. Saved in the
 * transaction of the body they go with, so the rows and the body always stand at one position.
 * Keys and values are bytes (see program-history.ts): rows per program an actor has seen.
 */
export interface SideRows {
  /** Drop the actor's rows first: an index folded from the start writes all of its rows. */
  replace: boolean;
  /** Rows written or changed since the actor's last saved snapshot. */
  rows: readonly (readonly [key: Uint8Array, value: Uint8Array])[];
}

/** An actor's side rows as its latest snapshot left them. */
export interface SideReader {
  get(key: Uint8Array): Uint8Array | undefined;
  /** `get` of each key, in one read where the store can (a plan asks about hundreds of pairs). */
  getMany(keys: readonly Uint8Array[]): (Uint8Array | undefined)[];
  /** Every row, in key order (tests, and comparing states whole). */
  all(): IterableIterator<[Uint8Array, Uint8Array]>;
}

/** Where the latest snapshot of each actor is kept. */
export interface SnapshotTable {
  latest(actor: string): StoredSnapshot | null;
  /** Replaces the named actors' snapshots (and writes their side rows), all at once. */
  save(snapshots: readonly StoredSnapshot[]): void;
  /** The side rows of an actor's latest snapshot. */
  side(actor: string): SideReader;
  close(): void;
}

/** A snapshot that cannot be used: the actor is refolded from the start instead. */
export class SnapshotRefusedError extends Error {
  constructor(
    readonly actor: string,
    readonly ref: SnapshotRef,
    readonly reason: string,
  ) {
    super(
      `snapshot of actor ${actor} at position ${ref.position} (sha256 ${ref.hash.slice(0, 12)}) refused: ${reason}; ${actor} refolds the log from the start`,
    );
    this.name = 'SnapshotRefusedError';
  }
}

/** A side row whose checksum no longer matches: read as part of an actor's state, it is never
 * trusted; the actor's work stops with this error (delete snapshots.db to refold from the log). */
export class SideRowCorruptError extends Error {
  /** The row's key, in hex. */
  readonly key: string;
  constructor(
    readonly actor: string,
    key: Uint8Array,
  ) {
    const hex = Buffer.from(key.buffer, key.byteOffset, key.byteLength).toString('hex');
    super(
      `side row ${hex.slice(0, 160)} of actor ${actor}'s snapshot is corrupt: its checksum does not match; delete the snapshot file to refold ${actor} from the log`,
    );
    this.name = 'SideRowCorruptError';
    this.key = hex;
  }
}

/** A row's checksum, as a signed 32-bit integer (4 bytes in SQLite, unsigned would take 6). */
const sideSum = (key: Uint8Array, value: Uint8Array): number => crc32(value, crc32(key)) | 0;

/** Keys per statement of SideReader.getMany: a call costs about as much as several index seeks. */
const MANY = 64;

const Row = z.object({
  actor: z.string(),
  position: z.number().int().nonnegative(),
  hash: z.string().regex(/^[0-9a-f]{64}$/),
  version: z.string(),
  body: z.instanceof(Uint8Array),
});

export const sha256Hex = (bytes: Uint8Array | string) => createHash('sha256').update(bytes).digest('hex');

/**
 * The checkpoint table in its own SQLite file, one row per (run, actor), and the side rows of
 * each (run, actor) under a small integer id: a row per recorded result is the bulk of the file,
 * and an id of a byte or two in each row's key costs less than the run id and actor name as text
 * (one table per actor would save that byte but need table names made from actor names).
 */
/** Tables this file has held (format 1 kept side rows in actor_side). */
const SNAPSHOT_TABLES = new Set(['actor_snapshots', 'side_actors', 'side_rows', 'actor_side']);

/** Opens the snapshot file, refusing one SQLite cannot read or another application's database
 * (untouched: nothing is created in it) as a DamagedFileError naming the file. */
function openSnapshotFile(file: string): Database.Database {
  const runDir = path.dirname(file);
  let db: Database.Database | null = null;
  try {
    db = new Database(file);
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all() as string[];
    const foreign = tables.filter((t) => !SNAPSHOT_TABLES.has(t));
    if (foreign.length > 0) throw new DamagedFileError(file, runDir, `it is another SQLite database (tables: ${foreign.slice(0, 5).join(', ')})`);
    return db;
  } catch (err) {
    db?.close();
    throw derivedFailure(err, file, runDir) ?? err;
  }
}

export class SqliteSnapshotTable implements SnapshotTable {
  readonly #db: Database.Database;
  readonly #runId: string;
  readonly #select: Database.Statement;
  readonly #upsert: Database.Statement;
  readonly #actorId: Database.Statement;
  readonly #newActor: Database.Statement;
  readonly #sideGet: Database.Statement;
  readonly #sideGetMany: Database.Statement;
  readonly #sideAll: Database.Statement;
  readonly #sidePut: Database.Statement;
  readonly #sideDrop: Database.Statement;
  /** Side row ids of this run's actors, once known. */
  readonly #ids = new Map<string, number>();

  constructor(file: string, runId: string) {
    this.#db = openSnapshotFile(file);
    useWal(this.#db);
    this.#db.pragma('synchronous = FULL');
    this.#db.exec(`CREATE TABLE IF NOT EXISTS actor_snapshots (
      run_id TEXT NOT NULL, actor TEXT NOT NULL, position INTEGER NOT NULL, version TEXT NOT NULL, hash TEXT NOT NULL, body BLOB NOT NULL,
      PRIMARY KEY (run_id, actor))`);
    // Format 1's side rows (text keys and JSON values, run id and actor in each row): its
    // snapshots are of another version, ignored, and their rows never read again.
    this.#db.exec('DROP TABLE IF EXISTS actor_side');
    this.#db.exec(`CREATE TABLE IF NOT EXISTS side_actors (
      id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, actor TEXT NOT NULL, UNIQUE (run_id, actor))`);
    this.#db.exec(`CREATE TABLE IF NOT EXISTS side_rows (
      actor INTEGER NOT NULL, key BLOB NOT NULL, value BLOB NOT NULL, sum INTEGER NOT NULL,
      PRIMARY KEY (actor, key)) WITHOUT ROWID`);
    this.#runId = runId;
    this.#actorId = this.#db.prepare('SELECT id FROM side_actors WHERE run_id = ? AND actor = ?').pluck();
    this.#newActor = this.#db.prepare('INSERT INTO side_actors (run_id, actor) VALUES (?, ?)');
    this.#sideGet = this.#db.prepare('SELECT value, sum FROM side_rows WHERE actor = ? AND key = ?').raw();
    this.#sideGetMany = this.#db.prepare(`SELECT key, value, sum FROM side_rows WHERE actor = ? AND key IN (${Array(MANY).fill('?').join(', ')})`).raw();
    this.#sideAll = this.#db.prepare('SELECT key, value, sum FROM side_rows WHERE actor = ? ORDER BY key').raw();
    this.#sidePut = this.#db.prepare(
      'INSERT INTO side_rows (actor, key, value, sum) VALUES (?, ?, ?, ?) ON CONFLICT (actor, key) DO UPDATE SET value = excluded.value, sum = excluded.sum',
    );
    this.#sideDrop = this.#db.prepare('DELETE FROM side_rows WHERE actor = ?');
    this.#select = this.#db.prepare('SELECT actor, position, hash, version, body FROM actor_snapshots WHERE run_id = ? AND actor = ?');
    this.#upsert = this.#db.prepare(
      `INSERT INTO actor_snapshots (run_id, actor, position, version, hash, body) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (run_id, actor) DO UPDATE SET position = excluded.position, version = excluded.version, hash = excluded.hash, body = excluded.body`,
    );
  }

  /** The actor's side row id; undefined when it has none yet and `create` is false. */
  #idOf(actor: string, create: boolean): number | undefined {
    let id = this.#ids.get(actor);
    if (id === undefined) {
      id = this.#actorId.get(this.#runId, actor) as number | undefined;
      if (id === undefined && create) id = Number(this.#newActor.run(this.#runId, actor).lastInsertRowid);
      if (id !== undefined) this.#ids.set(actor, id);
    }
    return id;
  }

  latest(actor: string): StoredSnapshot | null {
    const row = this.#select.get(this.#runId, actor);
    if (row === undefined) return null;
    // A row this code cannot read is no snapshot: the actor folds from the start.
    const parsed = Row.safeParse(row);
    if (!parsed.success) return null;
    const { body, ...ref } = parsed.data;
    return { ref: { ...ref, position: ref.position as Position }, body };
  }

  save(snapshots: readonly StoredSnapshot[]): void {
    this.#db.transaction(() => {
      for (const { ref, body, side } of snapshots) {
        this.#upsert.run(this.#runId, ref.actor, ref.position, ref.version, ref.hash, body);
        if (!side || (side.rows.length === 0 && !side.replace)) continue;
        const id = this.#idOf(ref.actor, true)!;
        if (side.replace) this.#sideDrop.run(id);
        for (const [key, value] of side.rows) this.#sidePut.run(id, key, value, sideSum(key, value));
      }
    })();
  }

  side(actor: string): SideReader {
    const checked = (key: Uint8Array, value: Uint8Array, sum: number): Uint8Array => {
      if (sideSum(key, value) !== sum) throw new SideRowCorruptError(actor, key);
      return value;
    };
    // Looked up at each read: rows saved after this reader was made are its actor's too.
    const id = () => this.#idOf(actor, false);
    const sideGet = this.#sideGet;
    const sideGetMany = this.#sideGetMany;
    const sideAll = this.#sideAll;
    return {
      get(key) {
        const at = id();
        const row = at === undefined ? undefined : (sideGet.get(at, key) as [Uint8Array, number] | undefined);
        return row && checked(key, row[0], row[1]);
      },
      getMany(keys) {
        const at = id();
        const out = new Array<Uint8Array | undefined>(keys.length);
        if (at === undefined) return out;
        const found = new Map<string, Uint8Array>();
        for (let i = 0; i < keys.length; i += MANY) {
          const chunk = keys.slice(i, i + MANY);
          // The last chunk padded with its first key: one statement for every size.
          while (chunk.length < MANY) chunk.push(chunk[0]!);
          for (const [key, value, sum] of sideGetMany.all(at, ...chunk) as [Buffer, Uint8Array, number][])
            found.set(key.toString('latin1'), checked(key, value, sum));
        }
        keys.forEach((key, i) => {
          out[i] = found.get(Buffer.from(key.buffer, key.byteOffset, key.byteLength).toString('latin1'));
        });
        return out;
      },
      *all() {
        const at = id();
        if (at === undefined) return;
        for (const [key, value, sum] of sideAll.iterate(at) as IterableIterator<[Uint8Array, Uint8Array, number]>) yield [key, checked(key, value, sum)];
      },
    };
  }

  close(): void {
    this.#db.close();
  }
}
