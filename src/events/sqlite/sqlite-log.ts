/**
 * The SQLite backend of the EventLog port (better-sqlite3, WAL). One append is one immediate
 * transaction: idempotency check, optimistic concurrency check, then the rows. Hot paths use raw
 * prepared statements only. Every row carries a checksum of what was validated on append: a read
 * trusts a matching row at its type's current version and decodes any other in full.
 *
 * A commit's events share its id and (nearly always) its time: only its first row stores them
 * (format 3). A later row of the commit stores '' in `commit_id`, and in `at` when its time is
 * the previous row's; a reader takes them from the row before it (values no event can have:
 * both are non-empty). About 5 bytes per execution result in a run of Code-A1's shape.
 */
import { existsSync, realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import type Database from 'better-sqlite3';
import { SqliteBlobStore } from './blob-store.js';
import { catalog } from '../catalog.js';
import { decodeChecked, encodeCommit, storedSum, type StoredEvent } from '../commit.js';
import type { EventEnvelope, NewEvent } from '../envelope.js';
import { ConcurrencyError, DuplicateEventIdError, LogClosedError, MalformedEventError } from '../errors.js';
import { dataBytes, storedData } from './stored-data.js';
import { parseAppendArgs, parseReadArgs, parseStreamName, parseSubscribeOptions } from '../log-args.js';
import {
  DEFAULT_MAX_COMMIT_BYTES,
  MAX_COMMIT_EVENTS,
  ORIGIN,
  type AppendOptions,
  type AppendResult,
  type CommitRequest,
  type EventLog,
  type LogCapabilities,
  type Position,
  type ReadFilter,
  type ReadRange,
  type SubscribeOptions,
  type Subscription,
} from '../log.js';
import { WakeSubscription } from '../wake-subscription.js';
import { LocalWorkQueue, parseWorkQueueOptions, type WorkQueue, type WorkQueueOptions } from '../work-queue.js';
import type { EventCodec } from '../registry.js';
import { logIdOf, openLogFile, tidyAfterReadOnly } from './sqlite-file.js';

export interface SqliteLogOptions {
  /** Event types, versions and upcasters; default: the crucible catalog. */
  registry?: EventCodec;
  /** 'full' (default): every commit survives power loss. 'normal': faster, a crash of the machine
   * may lose the last commits (never corrupts). */
  synchronous?: 'full' | 'normal';
  /** How often an idle subscription looks for appends made by other processes. Default 50 ms. */
  pollIntervalMs?: number;
  /** Rows fetched per page when reading. Default 1000. */
  pageSize?: number;
  /** How long a writer waits for another process's write lock. Default 5000 ms. */
  busyTimeoutMs?: number;
  /** Create the file when it does not exist. Default true. */
  create?: boolean;
  /** Read only (what `runs`, `compare`, `report` and `replay` read): the file is never written,
   * and no -wal or -shm file is left beside it. Appends fail. */
  readOnly?: boolean;
  /** Largest commit accepted (bytes of encoded events). Default: what fits one JetStream message. */
  maxCommitBytes?: number;
}

/** A stored row as an array (better-sqlite3 raw mode: about twice as fast as objects), in COLUMNS order. */
type Row = [
  position: number,
  id: string,
  commitId: string,
  stream: string,
  type: string,
  v: number,
  runId: string,
  causationId: string | null,
  correlationId: string | null,
  at: string,
  /** JSON text, or that text deflated (see stored-data.ts). */
  data: string | Buffer,
  sum: number | null,
];

const COLUMNS = 'position, id, commit_id, stream, type, v, run_id, causation_id, correlation_id, at, data, sum';

/** What a row stores in `commit_id` and `at` when they are the row before it's (same commit). */
const AS_BEFORE = '';

/** SQL for a row's commit id and time with elided ones filled in, for programs that read the
 * table directly (`e` is the row's alias): the nearest row at or before it that stores them,
 * which is never before its commit's first row. */
export const RESOLVED_COMMIT_COLUMNS = `(SELECT h.commit_id FROM events h WHERE h.position <= e.position AND h.commit_id <> '' ORDER BY h.position DESC LIMIT 1) AS commit_id, (SELECT h.at FROM events h WHERE h.position <= e.position AND h.at <> '' ORDER BY h.position DESC LIMIT 1) AS at`;

/** Stored bytes of data decoded before a page of events is handed on (see pagesSync). */
const DECODED_PAGE_BYTES = 32 * 1024;

/** Same-process appends wake subscriptions of every log handle on the same file at once. */
const listeners = new Map<string, Set<() => void>>();

function fileKey(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return resolve(path);
  }
}

export async function openSqliteLog(path: string, opts: SqliteLogOptions = {}): Promise<SqliteEventLog> {
  const walExisted = existsSync(`${path}-wal`);
  const db = openLogFile(path, {
    synchronous: opts.synchronous ?? 'full',
    busyTimeoutMs: opts.busyTimeoutMs ?? 5000,
    create: opts.create ?? true,
    readOnly: opts.readOnly ?? false,
  });
  let log: SqliteEventLog;
  try {
    log = new SqliteEventLog(db, fileKey(path), opts);
  } catch (err) {
    db.close();
    throw err;
  }
  if (opts.readOnly) log.afterClose = () => tidyAfterReadOnly(path, walExisted);
  return log;
}

export class SqliteEventLog implements EventLog {
  readonly capabilities: LogCapabilities;
  readonly location: string;
  readonly identity: string;
  readonly blobs: SqliteBlobStore;
  readonly registry: EventCodec;
  readonly #db: Database.Database;
  readonly #key: string;
  readonly #pollMs: number;
  readonly #pageSize: number;
  readonly #subs = new Set<Subscription>();
  readonly #pageStmts = new Map<string, Database.Statement>();
  #closed = false;
  /** Run once the file is closed (a read-only log tidies the files SQLite left). */
  afterClose: (() => void) | null = null;

  readonly #head: Database.Statement;
  readonly #streamHead: Database.Statement;
  readonly #findCommit: Database.Statement;
  #insertEvent: Database.Statement | null = null;
  #insertCommit: Database.Statement | null = null;
  #insertGivenId: Database.Statement | null = null;
  readonly #idExists: Database.Statement;
  readonly #commitBefore: Database.Statement;
  readonly #atBefore: Database.Statement;
  #at: Database.Statement | null = null;

  constructor(db: Database.Database, key: string, opts: SqliteLogOptions) {
    this.#db = db;
    this.#key = key;
    this.location = key;
    this.identity = `sqlite:${logIdOf(db)!}`;
    this.capabilities = {
      // Commit ids are a unique key of the file: remembered forever.
      dedupWindowMs: Number.POSITIVE_INFINITY,
      maxCommitBytes: opts.maxCommitBytes ?? DEFAULT_MAX_COMMIT_BYTES,
      maxCommitEvents: MAX_COMMIT_EVENTS,
      multiProcess: true,
      durable: true,
      sharedWorkQueues: false,
      refusesReusedEventIds: true,
    };
    this.registry = opts.registry ?? catalog;
    this.#pollMs = opts.pollIntervalMs ?? 50;
    this.#pageSize = opts.pageSize ?? 1000;
    this.blobs = new SqliteBlobStore(db);
    this.#head = db.prepare('SELECT max(position) FROM events').pluck();
    this.#streamHead = db.prepare('SELECT max(position) FROM events WHERE stream = ?').pluck();
    this.#findCommit = db.prepare('SELECT first_position, count FROM commits WHERE commit_id = ?');
    // The insert statements are prepared at the first append: a read-only log may read its
    // events through a view (see openLogFile), which takes no insert.
    this.#idExists = db.prepare('SELECT position FROM events WHERE id = ?').pluck();
    this.#commitBefore = db.prepare("SELECT commit_id FROM events WHERE position < ? AND commit_id <> '' ORDER BY position DESC LIMIT 1").pluck();
    this.#atBefore = db.prepare("SELECT at FROM events WHERE position < ? AND at <> '' ORDER BY position DESC LIMIT 1").pluck();
  }

  async append(stream: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    return (await this.appendCommits([{ stream, events, options }]))[0]!;
  }

  /** Commits in one immediate transaction: a dispatcher that records several effects' outputs
   * at once pays one sync instead of one per commit. */
  async appendCommits(commits: readonly CommitRequest[]): Promise<AppendResult[]> {
    this.#assertOpen();
    // Validate and encode everything before the transaction: one bad event writes nothing.
    const encoded = commits.map(({ stream, events, options }) => {
      const args = parseAppendArgs(stream, options);
      return { args, commit: encodeCommit(this.registry, args.stream, events, args.options.commitId, this.capabilities) };
    });
    let results: AppendResult[];
    try {
      results = this.#db
        .transaction((): AppendResult[] => {
          // Blobs the events may name land in the same transaction (see SqliteBlobStore).
          this.blobs.writePending();
          return encoded.map(({ args, commit }) => this.#write(args.stream, args.options, commit.events, commit.derivedIds));
        })
        .immediate();
    } catch (err) {
      this.blobs.rolledBack();
      throw err;
    }
    this.blobs.committed();
    this.blobs.mergeIfDue();
    if (results.some((r) => !r.duplicate)) for (const wake of listeners.get(this.#key) ?? []) wake();
    return results;
  }

  /** One commit's rows, inside the caller's transaction. */
  #write(stream: string, options: AppendOptions, rows: readonly StoredEvent[], derivedIds: readonly boolean[]): AppendResult {
    const { commitId, expectedPosition } = options;
    const earlier = this.#findCommit.get(commitId) as { first_position: number; count: number } | undefined;
    if (earlier) {
      return {
        positions: Array.from({ length: earlier.count }, (_, i) => (earlier.first_position + i) as Position),
        duplicate: true,
      };
    }
    if (expectedPosition !== undefined) {
      const actual = (this.#streamHead.get(stream) as number | null) ?? 0;
      if (actual !== expectedPosition) throw new ConcurrencyError(stream, expectedPosition, actual);
    }
    const first = ((this.#head.get() as number | null) ?? 0) + 1;
    this.#insertEvent ??= this.#db.prepare(`INSERT INTO events (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    this.#insertCommit ??= this.#db.prepare('INSERT INTO commits (commit_id, first_position, count) VALUES (?, ?, ?)');
    this.#insertGivenId ??= this.#db.prepare('INSERT INTO event_ids (id) VALUES (?)');
    // Ids derived from the commit id are unique with it (the commit is new: checked above); an
    // id the appender gave is kept in event_ids, where a reused one is refused. encodeCommit
    // refuses given ids of the derived form that are not the event's own.
    const positions: Position[] = new Array(rows.length);
    for (let i = 0; i < rows.length; i++) {
      const r = rows[i]!;
      const position = first + i;
      positions[i] = position as Position;
      if (!derivedIds[i]) {
        try {
          this.#insertGivenId.run(r.id);
        } catch (err) {
          if ((err as { code?: unknown }).code === 'SQLITE_CONSTRAINT_PRIMARYKEY') throw new DuplicateEventIdError(r.id, { index: i, stream, commitId });
          throw err;
        }
      }
      try {
        const at = i > 0 && r.at === rows[i - 1]!.at ? AS_BEFORE : r.at;
        this.#insertEvent.run(
          position,
          r.id,
          i === 0 ? commitId : AS_BEFORE,
          stream,
          r.type,
          r.v,
          r.runId,
          r.causationId,
          r.correlationId,
          at,
          storedData(r.data),
          storedSum(this.registry, r, stream, commitId),
        );
      } catch (err) {
        if (isUniqueViolation(err) && this.#idExists.get(r.id) !== undefined) {
          throw new DuplicateEventIdError(r.id, { index: i, stream, commitId });
        }
        throw err;
      }
    }
    this.#insertCommit.run(commitId, first, rows.length);
    return { positions, duplicate: false };
  }

  async *read(range?: ReadRange, filter?: ReadFilter): AsyncIterable<EventEnvelope> {
    for await (const page of this.readPages(range, filter)) yield* page;
  }

  async *readPages(range?: ReadRange, filter?: ReadFilter): AsyncIterable<readonly EventEnvelope[]> {
    this.#assertOpen();
    const args = parseReadArgs(range, filter);
    // A read is a snapshot: it ends at the head it saw when it began (or at `to`, "as of").
    const head = this.headSync();
    const to = Math.min(args.range.to ?? head, head);
    yield* this.pagesSync(args.range.after ?? ORIGIN, to, args.filter, args.range.limit);
  }

  /** Events in (after, to] matching the filter, in position order. */
  *readSync(after: Position, to: number, filter: ReadFilter, limit = Number.POSITIVE_INFINITY): Generator<EventEnvelope> {
    for (const page of this.pagesSync(after, to, filter, limit)) yield* page;
  }

  /** Pages of decoded events in (after, to] matching the filter, in position order. */
  *pagesSync(after: Position, to: number, filter: ReadFilter, limit = Number.POSITIVE_INFINITY): Generator<EventEnvelope[]> {
    const { stmt, params } = this.#pageQuery(filter);
    // SQLite numbers events 1, 2, 3...: the backend itself may count.
    let next = Math.max(1, after + 1);
    let left = limit;
    // The last row decoded, its elided columns filled in: the next row's commit id and time
    // when that row follows it directly.
    let before: Row | undefined;
    while (next <= to && left > 0) {
      // A read cut short by close() must not look like the end of the log.
      if (this.#closed) throw new LogClosedError();
      const page = Math.min(this.#pageSize, left);
      const rows = stmt.all(next, to, ...params, page) as Row[];
      // Events before a bad row are still delivered, then the error names the bad row's position.
      // Decoded events are handed on a few at a time (DECODED_PAGE_BYTES of stored data): a
      // page of large events decoded whole would keep tens of megabytes alive until its last
      // event is used, and every young collection would copy them.
      let events: EventEnvelope[] = [];
      let bytes = 0;
      let failure: unknown = null;
      for (const row of rows) {
        try {
          events.push(this.#decode(row, before));
          before = row;
        } catch (err) {
          failure = err;
          break;
        }
        bytes += row[10].length;
        if (bytes >= DECODED_PAGE_BYTES) {
          yield events;
          events = [];
          bytes = 0;
        }
      }
      if (events.length) yield events;
      if (failure !== null) throw failure;
      if (rows.length < page) return;
      left -= rows.length;
      next = rows[rows.length - 1]![0] + 1;
    }
  }

  #pageQuery(filter: ReadFilter): { stmt: Database.Statement; params: unknown[] } {
    const where: string[] = ['position >= ?', 'position <= ?'];
    const params: unknown[] = [];
    let key = '';
    if (filter.runId !== undefined) {
      where.push('run_id = ?');
      params.push(filter.runId);
      key += 'r';
    }
    if (filter.types !== undefined) {
      where.push(filter.types.length ? `type IN (${filter.types.map(() => '?').join(', ')})` : '0');
      params.push(...filter.types);
      key += `t${filter.types.length}`;
    }
    if (filter.streams !== undefined) {
      where.push(filter.streams.length ? `stream IN (${filter.streams.map(() => '?').join(', ')})` : '0');
      params.push(...filter.streams);
      key += `s${filter.streams.length}`;
    }
    if (filter.streamPrefix !== undefined) {
      where.push('substr(stream, 1, length(?)) = ?');
      params.push(filter.streamPrefix, filter.streamPrefix);
      key += 'p';
    }
    let stmt = this.#pageStmts.get(key);
    if (!stmt) {
      // Walk the primary key in order (never a sort): pages stay cheap however large the log.
      stmt = this.#db.prepare(`SELECT ${COLUMNS} FROM events NOT INDEXED WHERE ${where.join(' AND ')} ORDER BY position LIMIT ?`).raw();
      this.#pageStmts.set(key, stmt);
    }
    return { stmt, params };
  }

  async readAt(positions: readonly Position[]): Promise<(EventEnvelope | undefined)[]> {
    this.#assertOpen();
    this.#at ??= this.#db.prepare(`SELECT ${COLUMNS} FROM events WHERE position = ?`).raw();
    const at = this.#at;
    let before: Row | undefined;
    return positions.map((position) => {
      const row = at.get(position) as Row | undefined;
      if (row === undefined) return undefined;
      const event = this.#decode(row, before);
      before = row;
      return event;
    });
  }

  /** Fills in a row's elided commit id and time, from `before` when it is the row just before
   * it (a read in order), otherwise from the file. */
  #resolve(row: Row, before: Row | undefined): void {
    const position = row[0];
    const adjacent = before !== undefined && before[0] === position - 1;
    if (row[2] === AS_BEFORE) {
      const commitId = adjacent ? before[2] : (this.#commitBefore.get(position) as string | undefined);
      if (commitId === undefined)
        throw new MalformedEventError(row[4], row[5], [{ path: 'commit_id', message: 'continues a commit, but no row before it starts one' }], {
          position: position as Position,
        });
      row[2] = commitId;
    }
    if (row[9] === AS_BEFORE) {
      const at = adjacent ? before[9] : (this.#atBefore.get(position) as string | undefined);
      if (at === undefined)
        throw new MalformedEventError(row[4], row[5], [{ path: 'at', message: 'takes the time of the row before it, but there is none' }], {
          position: position as Position,
        });
      row[9] = at;
    }
  }

  #decode(row: Row, before: Row | undefined): EventEnvelope {
    this.#resolve(row, before);
    const [position, id, commitId, stream, type, v, runId, causationId, correlationId, at, stored, sum] = row;
    let bytes: Buffer | undefined;
    try {
      if (typeof stored !== 'string') bytes = dataBytes(stored);
    } catch (err) {
      throw new MalformedEventError(type, v, [{ path: 'data', message: `stored data does not inflate (${(err as Error).message})` }], {
        position: position as Position,
      });
    }
    const data = bytes === undefined ? (stored as string) : bytes.toString('utf8');
    return decodeChecked(this.registry, { id, type, v, runId, causationId, correlationId, at, data }, sum, position as Position, stream, commitId, bytes);
  }

  async head(): Promise<Position> {
    this.#assertOpen();
    return this.headSync();
  }

  headSync(): Position {
    return ((this.#head.get() as number | null) ?? 0) as Position;
  }

  async streamHead(stream: string): Promise<Position> {
    this.#assertOpen();
    return ((this.#streamHead.get(parseStreamName('streamHead', stream)) as number | null) ?? 0) as Position;
  }

  subscribe(options?: SubscribeOptions): Subscription {
    this.#assertOpen();
    const opts = parseSubscribeOptions(options);
    const sub = new WakeSubscription(
      opts.after ?? ORIGIN,
      (after, to) => this.readSync(after, to, opts.filter ?? {}),
      () => this.headSync(),
      (wake) => this.onAppend(wake),
      () => this.#closed,
      () => this.#subs.delete(sub),
      this.#pollMs,
    );
    this.#subs.add(sub);
    return sub;
  }

  async workQueue(options: WorkQueueOptions): Promise<WorkQueue> {
    this.#assertOpen();
    return new LocalWorkQueue(this, parseWorkQueueOptions(options));
  }

  /** Registers a wake-up for appends made through any handle of this file in this process. */
  onAppend(wake: () => void): () => void {
    let set = listeners.get(this.#key);
    if (!set) listeners.set(this.#key, (set = new Set()));
    set.add(wake);
    return () => {
      set.delete(wake);
      if (set.size === 0) listeners.delete(this.#key);
    };
  }

  get closed(): boolean {
    return this.#closed;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    // Synchronous on purpose: once close() is called the file is released, even if not awaited.
    this.#closed = true;
    for (const s of this.#subs) void s.close();
    if (!this.#db.readonly) this.blobs.flush();
    this.#db.close();
    this.afterClose?.();
  }

  #assertOpen(): void {
    if (this.#closed) throw new LogClosedError();
  }
}

function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === 'SQLITE_CONSTRAINT_UNIQUE';
}
