/**
 * Actor snapshots: an actor's machine state and side index as they stood at one log position,
 * stored as a blob with its sha256 in a checkpoint table beside the run (`snapshots.db`, one row
 * per actor, replaced by the next snapshot), so that a restarted actor folds only the events
 * after that position.
 *
 * A snapshot is a cache of a fold, never a source of truth: the log holds no trace of it (a run
 * writes the same events with or without snapshots, and the log's blob store does not grow with
 * them), and one that is corrupt, of another run or written by another code version is refused
 * or ignored, the reason reported, and the actor refolded from the start of the log.
 */
import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import Database from 'better-sqlite3';
import { z } from 'zod';
import type { Position } from '../events/log.js';

/** Bump when the body below changes shape. */
export const SNAPSHOT_FORMAT = 1;

/** What the checkpoint table says about an actor's latest snapshot. */
export interface SnapshotRef {
  actor: string;
  /** The log position the snapshot was folded up to (inclusive). */
  position: Position;
  /** sha256 of the body, checked before the body is trusted. */
  hash: string;
  /** The code version that wrote it (see `ActorRuntime`): another version's snapshot is ignored. */
  version: string;
}

/** The blob's content. `machine` is xstate's persisted snapshot, `index` the side index's
 * serialized form (null when the actor keeps none). */
export const SnapshotBody = z
  .object({
    format: z.literal(SNAPSHOT_FORMAT),
    runId: z.string().min(1),
    actor: z.string().min(1),
    version: z.string().min(1),
    position: z.number().int().nonnegative(),
    machine: z.record(z.string(), z.unknown()),
    index: z.unknown(),
  })
  .strict();
export type SnapshotBody = z.infer<typeof SnapshotBody>;

export interface StoredSnapshot {
  ref: SnapshotRef;
  /** The body's JSON text as stored (see SnapshotBody). */
  body: Uint8Array;
  /** Rows kept beside the body (see SideRows), saved with it. */
  side?: SideRows;
}

/**
 * Rows an actor's index keeps beside its snapshot body instead of in it, by key: what grows with
 * the whole run (every recorded verdict) is written once, as it is recorded, not again in every
 * body, and a restarted actor reads the rows it needs instead of parsing them all. Saved in the
 * transaction of the body they go with, so the rows and the body always stand at one position.
 */
export interface SideRows {
  /** Drop the actor's rows first: an index folded from the start writes all of its rows. */
  replace: boolean;
  /** Rows written or changed since the actor's last saved snapshot. */
  rows: readonly (readonly [key: string, value: string])[];
}

/** An actor's side rows as its latest snapshot left them. */
export interface SideReader {
  get(key: string): string | undefined;
  /** Every row, in key order (tests, and comparing states whole). */
  all(): IterableIterator<[string, string]>;
  /** The rows whose keys start with `prefix` and go on in ASCII, in key order. */
  withPrefix(prefix: string): IterableIterator<[string, string]>;
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
    super(`snapshot of actor ${actor} at position ${ref.position} (sha256 ${ref.hash.slice(0, 12)}) refused: ${reason}; ${actor} refolds the log from the start`);
    this.name = 'SnapshotRefusedError';
  }
}

/** A side row whose checksum no longer matches: read as part of an actor's state, it is never
 * trusted; the actor's work stops with this error (delete snapshots.db to refold from the log). */
export class SideRowCorruptError extends Error {
  constructor(
    readonly actor: string,
    readonly key: string,
  ) {
    super(`side row ${JSON.stringify(key.slice(0, 80))} of actor ${actor}'s snapshot is corrupt: its checksum does not match; delete the snapshot file to refold ${actor} from the log`);
    this.name = 'SideRowCorruptError';
  }
}

const sideSum = (key: string, value: string): number => crc32(value, crc32(key));

/** A version string for an actor's snapshots: the snapshot format, the code's version, the
 * actor's own snapshot version, and the shape of its machine (state ids, event types). */
export function snapshotVersion(codeVersion: string, actorVersion: number, shape: readonly string[]): string {
  const digest = createHash('sha256').update(shape.join('\n')).digest('hex').slice(0, 12);
  return `${SNAPSHOT_FORMAT}/${codeVersion}/${actorVersion}/${digest}`;
}

const Row = z.object({
  actor: z.string(),
  position: z.number().int().nonnegative(),
  hash: z.string().regex(/^[0-9a-f]{64}$/),
  version: z.string(),
  body: z.instanceof(Uint8Array),
});

export const sha256Hex = (bytes: Uint8Array | string) => createHash('sha256').update(bytes).digest('hex');

/** The checkpoint table in its own SQLite file, one row per (run, actor). */
export class SqliteSnapshotTable implements SnapshotTable {
  readonly #db: Database.Database;
  readonly #runId: string;
  readonly #select: Database.Statement;
  readonly #upsert: Database.Statement;
  readonly #sideGet: Database.Statement;
  readonly #sideAll: Database.Statement;
  readonly #sideRange: Database.Statement;
  readonly #sidePut: Database.Statement;
  readonly #sideDrop: Database.Statement;

  constructor(file: string, runId: string) {
    this.#db = new Database(file);
    this.#db.pragma('journal_mode = WAL');
    this.#db.pragma('synchronous = FULL');
    this.#db.exec(`CREATE TABLE IF NOT EXISTS actor_snapshots (
      run_id TEXT NOT NULL, actor TEXT NOT NULL, position INTEGER NOT NULL, version TEXT NOT NULL, hash TEXT NOT NULL, body BLOB NOT NULL,
      PRIMARY KEY (run_id, actor))`);
    this.#db.exec(`CREATE TABLE IF NOT EXISTS actor_side (
      run_id TEXT NOT NULL, actor TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, sum INTEGER NOT NULL,
      PRIMARY KEY (run_id, actor, key)) WITHOUT ROWID`);
    this.#runId = runId;
    this.#sideGet = this.#db.prepare('SELECT value, sum FROM actor_side WHERE run_id = ? AND actor = ? AND key = ?').raw();
    this.#sideAll = this.#db.prepare('SELECT key, value, sum FROM actor_side WHERE run_id = ? AND actor = ? ORDER BY key').raw();
    this.#sideRange = this.#db.prepare('SELECT key, value, sum FROM actor_side WHERE run_id = ? AND actor = ? AND key >= ? AND key < ? ORDER BY key').raw();
    this.#sidePut = this.#db.prepare(
      'INSERT INTO actor_side (run_id, actor, key, value, sum) VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id, actor, key) DO UPDATE SET value = excluded.value, sum = excluded.sum',
    );
    this.#sideDrop = this.#db.prepare('DELETE FROM actor_side WHERE run_id = ? AND actor = ?');
    this.#select = this.#db.prepare('SELECT actor, position, hash, version, body FROM actor_snapshots WHERE run_id = ? AND actor = ?');
    this.#upsert = this.#db.prepare(
      `INSERT INTO actor_snapshots (run_id, actor, position, version, hash, body) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (run_id, actor) DO UPDATE SET position = excluded.position, version = excluded.version, hash = excluded.hash, body = excluded.body`,
    );
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
        if (side?.replace) this.#sideDrop.run(this.#runId, ref.actor);
        for (const [key, value] of side?.rows ?? []) this.#sidePut.run(this.#runId, ref.actor, key, value, sideSum(key, value));
      }
    })();
  }

  side(actor: string): SideReader {
    const checked = (key: string, value: string, sum: number): string => {
      if (sideSum(key, value) !== sum) throw new SideRowCorruptError(actor, key);
      return value;
    };
    const get = this.#sideGet;
    const all = this.#sideAll;
    const range = this.#sideRange;
    const runId = this.#runId;
    return {
      get(key) {
        const row = get.get(runId, actor, key) as [string, number] | undefined;
        return row && checked(key, row[0], row[1]);
      },
      *all() {
        for (const [key, value, sum] of all.iterate(runId, actor) as IterableIterator<[string, string, number]>) yield [key, checked(key, value, sum)];
      },
      *withPrefix(prefix) {
        // Keys compare as UTF-8 bytes: every ASCII continuation of the prefix sorts below U+FFFF.
        for (const [key, value, sum] of range.iterate(runId, actor, prefix, `${prefix}\uffff`) as IterableIterator<[string, string, number]>) yield [key, checked(key, value, sum)];
      },
    };
  }

  close(): void {
    this.#db.close();
  }
}
