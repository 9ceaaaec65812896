/**
 * Runs projections: reads the log from each projection's checkpoint and writes the read-model
 * change AND the checkpoint in the same SQLite transaction, so every event takes effect exactly
 * once however the process stops. Many events go in one transaction, for speed.
 *
 * A projection is pure and comes in one of two shapes:
 *  - rows:    `apply(event, view) -> RowWrite[]` against declared tables (large read models:
 *             Mistake Book, per-sample tables). `view` reads rows already written.
 *  - reducer: `reduce(state, event) -> state` over a JSON-serializable state kept in memory and
 *             stored with the checkpoint, optionally shown as tables through `rows(state)`
 *             (small summaries: per-round table).
 * Bumping a projection's `version` rebuilds it from position 0 on the next open.
 *
 *   const mistakeBook: RowProjection = {
 *     name: 'mistake-book', version: 1, types: ['MistakeBookUpdated'],
 *     tables: { mistake_book: { columns: { problem_id: 'text', test_key: 'text', count: 'integer' }, key: ['problem_id', 'test_key'] } },
 *     apply: (e) => isEvent(e, 'MistakeBookUpdated')
 *       ? e.data.changes.map((c) => c.count > 0
 *           ? put('mistake_book', { problem_id: e.data.problemId, test_key: c.testKey, count: c.count })
 *           : del('mistake_book', { problem_id: e.data.problemId, test_key: c.testKey }))
 *       : [],
 *   };
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import type Database from 'better-sqlite3';
import type { EventEnvelope } from '../events/envelope.js';
import { ORIGIN, asPosition, type EventLog, type Position, type ReadFilter, type Subscription } from '../events/log.js';
import { canonicalJson } from '../core/canonical-json.js';
import { BatchWriter, ReadModel, ReadModelError, Table, type ReadView, type Row, type RowWrite, type TableSpec } from './readmodel.js';
import { ReadModelOfAnotherLogError } from './errors.js';

export { ReadModelOfAnotherLogError };

export interface RowProjection {
  name: string;
  version: number;
  /** Event types it reads; omit for all. A narrow list makes replays faster. */
  types?: readonly string[];
  tables: Readonly<Record<string, TableSpec>>;
  apply(event: EventEnvelope, view: ReadView): readonly RowWrite[];
  /** The event types it reads from here on, given its rows (asked after each batch): a
   * projection that learns from the log that it needs fewer lets a replay skip the rest. Each
   * must be in `types`. */
  readsNow?(view: ReadView): readonly string[];
}

export interface ReducerProjection<S = unknown> {
  name: string;
  version: number;
  types?: readonly string[];
  /** State before the first event (plain JSON data: it is stored with the checkpoint). */
  initial(): S;
  reduce(state: S, event: EventEnvelope): S;
  /** Tables showing the state; rewritten by difference after each batch. */
  tables?: Readonly<Record<string, TableSpec>>;
  rows?(state: S): Readonly<Record<string, readonly Row[]>>;
}

export type Projection = RowProjection | ReducerProjection<any>;

export interface RunnerOptions {
  log: EventLog;
  /** An open read model, or a path to open (and close with the runner). */
  readModel: ReadModel | string;
  projections: readonly Projection[];
  /** Events per transaction. Default 5000. */
  batchSize?: number;
  /** Only events of this run. */
  runId?: string;
  /** Called after each committed batch with the checkpoint reached (tests, progress). */
  onBatch?: (position: Position) => void;
  /** Called when live mode stops on an error. */
  onError?: (err: unknown) => void;
  /** Only the read model as it stands is read (states, state hashes), whichever log built it (a
   * run's read models after the run was copied to another log); catching up is refused. */
  readOnly?: boolean;
  /** Names of read models this code no longer builds: their tables and checkpoints are dropped
   * when the file is opened for writing (a run's views.db made by an earlier version). A runner
   * of some projections leaves the others' alone unless they are named here. */
  retired?: readonly string[];
}

/** The crucible_meta row naming the log a read model's checkpoints belong to. */
const LOG_KEY = 'log';

export class ProjectionError extends Error {
  constructor(
    readonly projection: string,
    readonly position: Position | null,
    message: string,
  ) {
    super(`projection "${projection}"${position !== null ? ` at event position ${position}` : ''}: ${message}`);
    this.name = 'ProjectionError';
  }
}

interface Slot {
  p: Projection;
  kind: 'rows' | 'reducer';
  tables: Table[];
  byName: Map<string, Table>;
  types: Set<string> | null;
  specHash: string;
  position: Position;
  state: unknown;
  /** Reducer tables as last written: table -> key json -> row json. */
  shown: Map<string, Map<string, string>>;
}

const isReducer = (p: Projection): p is ReducerProjection => typeof (p as ReducerProjection).reduce === 'function';

function specHashOf(p: Projection): string {
  const spec = { kind: isReducer(p) ? 'reducer' : 'rows', types: p.types ? [...p.types].sort() : null, tables: p.tables ?? {} };
  return createHash('sha256').update(canonicalJson(spec)).digest('hex');
}

/** A batch being applied: the rows it writes and the reducers' states, in memory until #finish. */
interface Batch {
  writer: BatchWriter;
  states: Map<Slot, unknown>;
  views: Map<Slot, ReadView>;
  /** Events read into it. */
  events: number;
}

interface StoredCheckpoint {
  name: string;
  version: number;
  spec_hash: string;
  tables: string;
  position: number;
  state: string | null;
}

async function* onePerPage(events: AsyncIterable<EventEnvelope>): AsyncIterable<readonly EventEnvelope[]> {
  for await (const e of events) yield [e];
}

export class ProjectionRunner {
  readonly readModel: ReadModel;
  /** Projections that were reset at open because their version changed. */
  readonly rebuilt: string[] = [];
  readonly #opts: RunnerOptions;
  readonly #ownsReadModel: boolean;
  readonly #db: Database.Database;
  readonly #slots: Slot[];
  readonly #batchSize: number;
  readonly #saveCheckpoint: Database.Statement;
  #live: { sub: Subscription; done: Promise<void> } | null = null;
  #error: unknown = null;
  #waiters: { position: Position; resolve: () => void; reject: (e: unknown) => void }[] = [];
  #lock: Promise<unknown> = Promise.resolve();

  private constructor(opts: RunnerOptions) {
    this.#opts = opts;
    this.#ownsReadModel = typeof opts.readModel === 'string';
    this.readModel = typeof opts.readModel === 'string' ? ReadModel.open(opts.readModel) : opts.readModel;
    this.#db = this.readModel.db;
    this.#batchSize = Math.max(1, opts.batchSize ?? 5000);
    const names = new Set<string>();
    const tableOwners = new Map<string, string>();
    this.#slots = opts.projections.map((p) => {
      if (!p.name || names.has(p.name)) throw new ReadModelError(`projection name "${p.name}" is empty or used twice`);
      if (!Number.isInteger(p.version) || p.version < 1) throw new ReadModelError(`projection "${p.name}" needs an integer version >= 1`);
      names.add(p.name);
      const tables = Object.entries(p.tables ?? {}).map(([t, spec]) => {
        const owner = tableOwners.get(t);
        if (owner) throw new ReadModelError(`table "${t}" is declared by both "${owner}" and "${p.name}"`);
        tableOwners.set(t, p.name);
        return new Table(t, spec, this.#db);
      });
      const byName = new Map(tables.map((t) => [t.name, t]));
      return {
        p,
        kind: isReducer(p) ? 'reducer' : 'rows',
        tables,
        byName,
        types: p.types ? new Set(p.types) : null,
        specHash: specHashOf(p),
        position: ORIGIN,
        state: undefined,
        shown: new Map(),
      } satisfies Slot;
    });
    this.#saveCheckpoint = this.#db.prepare('UPDATE crucible_projections SET position = ?, state = ? WHERE name = ?');
  }

  /** Opens the read model, creates or checks each projection's tables and loads checkpoints. */
  static async open(opts: RunnerOptions): Promise<ProjectionRunner> {
    const runner = new ProjectionRunner(opts);
    try {
      runner.#load();
    } catch (err) {
      if (runner.#ownsReadModel) await runner.readModel.close();
      throw err;
    }
    return runner;
  }

  /** Builds the projections from position 0 into a new database file (which must not exist). */
  static async replayInto(path: string, opts: Omit<RunnerOptions, 'readModel'>): Promise<ProjectionRunner> {
    if (existsSync(path)) throw new ReadModelError(`${path} already exists: a replay goes into a fresh database`);
    const runner = await ProjectionRunner.open({ ...opts, readModel: path });
    await runner.catchUp();
    return runner;
  }

  #load(): void {
    const get = this.#db.prepare('SELECT * FROM crucible_projections WHERE name = ?');
    const builtFrom = this.#db.prepare('SELECT value FROM crucible_meta WHERE key = ?').pluck().get(LOG_KEY) as string | undefined;
    this.#db
      .transaction(() => {
        if (!this.#opts.readOnly) this.#dropRetired(get);
        for (const slot of this.#slots) {
          const row = get.get(slot.p.name) as StoredCheckpoint | undefined;
          if (!row || row.version !== slot.p.version) {
            if (row) this.rebuilt.push(slot.p.name);
            this.#reset(slot, row ? (JSON.parse(row.tables) as string[]) : []);
            continue;
          }
          if (row.spec_hash !== slot.specHash) {
            throw new ProjectionError(
              slot.p.name,
              null,
              `its tables, types or kind changed but its version (${slot.p.version}) did not: bump the version to rebuild it`,
            );
          }
          slot.position = asPosition(row.position);
          if (slot.kind === 'reducer') {
            slot.state = row.state === null ? (slot.p as ReducerProjection).initial() : JSON.parse(row.state);
            slot.shown = this.#rowsOf(slot, slot.state);
          }
        }
        if (this.#opts.readOnly) return;
        const log = this.#opts.log;
        // Checkpoints at the start hold no position of any log. A read model made before logs
        // had identities is taken to be of the log it is opened with, as it was then.
        const fresh = this.#slots.every((s) => s.position === ORIGIN);
        if (builtFrom !== undefined && builtFrom !== log.identity && !fresh) {
          throw new ReadModelOfAnotherLogError(this.readModel.path, builtFrom, log);
        }
        if (builtFrom !== log.identity) {
          this.#db
            .prepare('INSERT INTO crucible_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value')
            .run(LOG_KEY, log.identity);
        }
      })
      .immediate();
    this.#narrow();
  }

  /** Sets each row projection's types to what its readsNow says; true when some changed. */
  #narrow(): boolean {
    let changed = false;
    for (const slot of this.#slots) {
      const readsNow = slot.kind === 'rows' ? (slot.p as RowProjection).readsNow : undefined;
      if (!readsNow) continue;
      const now = readsNow(this.#view(slot, new BatchWriter()));
      const declared = slot.p.types;
      const outside = declared ? now.find((t) => !declared.includes(t)) : undefined;
      if (outside !== undefined) throw new ProjectionError(slot.p.name, slot.position, `it reads ${outside} now, which its types do not name`);
      const next = new Set(now);
      if (slot.types !== null && slot.types.size === next.size && [...next].every((t) => slot.types!.has(t))) continue;
      slot.types = next;
      changed = true;
    }
    return changed;
  }

  /** Drops the tables and checkpoints of retired read models (inside #load's transaction). */
  #dropRetired(get: Database.Statement): void {
    const current = new Set(this.#slots.flatMap((slot) => [slot.p.name, ...slot.tables.map((t) => t.name)]));
    for (const name of this.#opts.retired ?? []) {
      if (current.has(name)) throw new ReadModelError(`read model "${name}" is both built and named retired`);
      const row = get.get(name) as StoredCheckpoint | undefined;
      if (!row) continue;
      for (const t of JSON.parse(row.tables) as string[]) if (!current.has(t)) this.#db.exec(this.readModel.dropTableSql(t));
      this.#db.prepare('DELETE FROM crucible_projections WHERE name = ?').run(name);
    }
  }

  #assertWritable(what: string): void {
    if (this.#opts.readOnly) throw new ReadModelError(`${this.readModel.path} was opened read-only: ${what} is refused`);
  }

  /** Drops and recreates a projection's tables and sets its checkpoint to 0 (inside a transaction). */
  #reset(slot: Slot, oldTables: readonly string[]): void {
    for (const t of new Set([...oldTables, ...slot.tables.map((x) => x.name)])) this.#db.exec(this.readModel.dropTableSql(t));
    for (const t of slot.tables) for (const sql of this.readModel.createTableSql(t, slot.p.tables![t.name]!)) this.#db.exec(sql);
    slot.position = ORIGIN;
    slot.state = slot.kind === 'reducer' ? (slot.p as ReducerProjection).initial() : undefined;
    slot.shown = new Map();
    slot.types = slot.p.types ? new Set(slot.p.types) : null;
    this.#db
      .prepare(
        `INSERT INTO crucible_projections (name, version, spec_hash, tables, position, state) VALUES (?, ?, ?, ?, 0, ?)
         ON CONFLICT (name) DO UPDATE SET version = excluded.version, spec_hash = excluded.spec_hash,
           tables = excluded.tables, position = 0, state = excluded.state`,
      )
      .run(
        slot.p.name,
        slot.p.version,
        slot.specHash,
        JSON.stringify(slot.tables.map((t) => t.name)),
        slot.kind === 'reducer' ? JSON.stringify(slot.state) : null,
      );
  }

  /** Last position applied by a projection. */
  checkpoint(name: string): Position {
    return this.#slot(name).position;
  }

  /** The in-memory state of a reducer projection. */
  state<S>(name: string): S {
    const slot = this.#slot(name);
    if (slot.kind !== 'reducer') throw new ReadModelError(`projection "${name}" has rows, not a state`);
    return slot.state as S;
  }

  #slot(name: string): Slot {
    const s = this.#slots.find((x) => x.p.name === name);
    if (!s) throw new ReadModelError(`no projection named "${name}"`);
    return s;
  }

  #filter(): ReadFilter {
    const f: { runId?: string; types?: string[] } = {};
    if (this.#opts.runId !== undefined) f.runId = this.#opts.runId;
    if (this.#slots.every((s) => s.types)) f.types = [...new Set(this.#slots.flatMap((s) => [...s.types!]))];
    return f;
  }

  #min(): Position {
    return this.#slots.length ? (Math.min(...this.#slots.map((s) => s.position)) as Position) : ORIGIN;
  }

  /** Serializes catch-up, rebuild and live flushes. */
  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#lock.then(fn, fn);
    this.#lock = run.catch(() => undefined);
    return run;
  }

  /** The last event this runner applied in a catch-up (this process), to check the log still
   * holds it (EventLog.commitIdAt). */
  #lastRead: { position: Position; commitId: string } | null = null;
  /** Catch-ups that found the log no longer holding what an earlier one read, and so rebuilt. */
  rebuiltAfterRewrite = 0;

  /** Applies every event up to the log's head (or `to`); returns the checkpoint reached. Where
   * the log no longer holds the last event applied (a cluster failing over dropped messages it
   * had shown), every projection is rebuilt from the start instead. */
  catchUp(opts: { to?: Position } = {}): Promise<Position> {
    return this.#exclusive(async () => {
      this.#assertWritable('catching up');
      const log0 = this.#opts.log;
      if (log0.commitIdAt && this.#lastRead !== null && (await log0.commitIdAt(this.#lastRead.position)) !== this.#lastRead.commitId) {
        this.#db.transaction(() => {
          for (const s of this.#slots)
            this.#reset(
              s,
              s.tables.map((t) => t.name),
            );
        })();
        this.#lastRead = null;
        this.rebuiltAfterRewrite++;
      }
      const head = await this.#opts.log.head();
      const to = opts.to !== undefined && opts.to < head ? opts.to : head;
      const after = this.#min();
      if (after >= to) return after;
      const log = this.#opts.log;
      // Each event is applied as it is read: the batch holds its writes, not the decoded events.
      let batch = this.#begin();
      let from = after;
      reading: for (;;) {
        const range = { after: from, to };
        const pages = log.readPages ? log.readPages(range, this.#filter()) : onePerPage(log.read(range, this.#filter()));
        for await (const page of pages) {
          for (const e of page) {
            this.#lastRead = { position: e.position, commitId: e.commitId };
            this.#apply(batch, e);
            if (++batch.events >= this.#batchSize) {
              this.#finish(batch, e.position);
              batch = this.#begin();
              // A projection now reading fewer types: the rest is read with the narrower filter.
              if (this.#narrow()) {
                from = e.position;
                continue reading;
              }
            }
          }
        }
        break;
      }
      this.#finish(batch, to);
      this.#narrow();
      return to;
    });
  }

  /** Drops the named projections (default all) and replays them from position 0. */
  async rebuild(names?: readonly string[]): Promise<Position> {
    this.#assertWritable('a rebuild');
    const wasLive = this.#live !== null;
    if (wasLive) await this.stop();
    await this.#exclusive(async () => {
      const slots = names ? names.map((n) => this.#slot(n)) : this.#slots;
      this.#db.transaction(() => {
        for (const s of slots)
          this.#reset(
            s,
            s.tables.map((t) => t.name),
          );
      })();
    });
    const reached = await this.catchUp();
    if (wasLive) this.start();
    return reached;
  }

  /** Applies one batch and moves the checkpoints to `end`, all in one transaction. */
  #commit(events: readonly EventEnvelope[], end: Position): void {
    const batch = this.#begin();
    for (const e of events) this.#apply(batch, e);
    this.#finish(batch, end);
    this.#narrow();
  }

  #begin(): Batch {
    const writer = new BatchWriter();
    return {
      writer,
      states: new Map(this.#slots.map((s) => [s, s.state])),
      views: new Map(this.#slots.map((s) => [s, this.#view(s, writer)])),
      events: 0,
    };
  }

  /** One event into the batch: rows into its writer, reducer states into its states. Nothing is
   * written to the read model before #finish (a view's reads see the batch's writes first). */
  #apply(batch: Batch, e: EventEnvelope): void {
    for (const s of this.#slots) {
      if (e.position <= s.position || (s.types && !s.types.has(e.type))) continue;
      try {
        if (s.kind === 'reducer') {
          batch.states.set(s, (s.p as ReducerProjection).reduce(batch.states.get(s), e));
        } else {
          for (const w of (s.p as RowProjection).apply(e, batch.views.get(s)!)) {
            const t = s.byName.get(w.table);
            if (!t) throw new ReadModelError(`it writes to table "${w.table}", which it does not declare`);
            batch.writer.write(t, w);
          }
        }
      } catch (err) {
        throw new ProjectionError(s.p.name, e.position, `${e.type}: ${(err as Error).message ?? String(err)}`);
      }
    }
  }

  /** Writes the batch's rows, shown tables and checkpoints (moved to `end`) in one transaction. */
  #finish(batch: Batch, end: Position): void {
    // A projection at or past `end` applied none of the batch's events.
    const active = this.#slots.filter((s) => s.position < end);
    if (active.length === 0) return;
    const { states, writer } = batch;
    const shown = new Map<Slot, Map<string, Map<string, string>>>();
    this.#db.transaction(() => {
      for (const s of active) {
        let stateJson: string | null = null;
        if (s.kind === 'reducer') {
          const state = states.get(s);
          try {
            stateJson = JSON.stringify(state) ?? null;
            shown.set(s, this.#writeShown(s, state, writer));
          } catch (err) {
            throw new ProjectionError(s.p.name, end, (err as Error).message);
          }
        }
        this.#saveCheckpoint.run(end, stateJson, s.p.name);
      }
      try {
        writer.flush();
      } catch (err) {
        throw new ProjectionError(active.map((s) => s.p.name).join(', '), end, (err as Error).message);
      }
    })();
    // Only once the transaction committed does memory move on: a failed batch leaves no trace.
    for (const s of active) {
      s.position = end;
      if (s.kind === 'reducer') {
        s.state = states.get(s);
        s.shown = shown.get(s)!;
      }
    }
    this.#opts.onBatch?.(end);
    this.#notify();
  }

  #view(slot: Slot, writer: BatchWriter): ReadView {
    return {
      get: (table, key) => {
        const t = slot.byName.get(table);
        if (!t) throw new ReadModelError(`it reads table "${table}", which it does not declare`);
        return writer.get(t, key);
      },
    };
  }

  #rowsOf(slot: Slot, state: unknown): Map<string, Map<string, string>> {
    const out = new Map<string, Map<string, string>>();
    const rows = (slot.p as ReducerProjection).rows?.(state) ?? {};
    for (const t of slot.tables) {
      const m = new Map<string, string>();
      for (const r of rows[t.name] ?? []) m.set(canonicalJson(t.key.map((k) => r[k])), canonicalJson(r));
      out.set(t.name, m);
    }
    for (const name of Object.keys(rows)) {
      if (!slot.byName.has(name)) throw new ReadModelError(`rows() returns table "${name}", which it does not declare`);
    }
    return out;
  }

  /** Writes the difference between the tables as shown and the rows of the new state. */
  #writeShown(slot: Slot, state: unknown, writer: BatchWriter): Map<string, Map<string, string>> {
    const next = this.#rowsOf(slot, state);
    for (const t of slot.tables) {
      const before = slot.shown.get(t.name) ?? new Map<string, string>();
      const after = next.get(t.name)!;
      for (const [k, json] of after) if (before.get(k) !== json) writer.write(t, { op: 'put', table: t.name, row: JSON.parse(json) as Row });
      for (const [k, json] of before) {
        if (!after.has(k)) writer.write(t, { op: 'delete', table: t.name, key: JSON.parse(json) as Row });
      }
    }
    return next;
  }

  /** Live mode: follows the log, committing at each caught-up signal or full batch. */
  start(): void {
    this.#assertWritable('live mode');
    if (this.#live) return;
    this.#error = null;
    const sub = this.#opts.log.subscribe({ after: this.#min(), filter: this.#filter() });
    const done = (async () => {
      let batch: EventEnvelope[] = [];
      for await (const item of sub) {
        if (item.kind === 'event') {
          batch.push(item.event);
          if (batch.length < this.#batchSize) continue;
          const b = batch;
          batch = [];
          await this.#exclusive(async () => this.#commit(b, b[b.length - 1]!.position));
        } else {
          const b = batch;
          batch = [];
          await this.#exclusive(async () => this.#commit(b, item.position));
        }
      }
    })().catch((err: unknown) => {
      this.#error = err;
      for (const w of this.#waiters.splice(0)) w.reject(err);
      if (this.#opts.onError) this.#opts.onError(err);
    });
    this.#live = { sub, done };
  }

  /** Ends live mode after the batch in progress. */
  async stop(): Promise<void> {
    const live = this.#live;
    if (!live) return;
    this.#live = null;
    await live.sub.close();
    await live.done;
  }

  get error(): unknown {
    return this.#error;
  }

  /** Resolves once every projection has applied the log up to `position` (live mode or catch-up). */
  waitFor(position: Position): Promise<void> {
    if (this.#min() >= position) return Promise.resolve();
    if (this.#error) return Promise.reject(this.#error);
    return new Promise((resolve, reject) => this.#waiters.push({ position, resolve, reject }));
  }

  #notify(): void {
    const min = this.#min();
    this.#waiters = this.#waiters.filter((w) => {
      if (w.position > min) return true;
      w.resolve();
      return false;
    });
  }

  /** sha256 over the projection's read model (rows in key order; a table-less reducer: its
   * state). Internal tables (working rows) are left out: the hash is of what it shows. */
  async stateHash(name: string): Promise<string> {
    const slot = this.#slot(name);
    if (slot.tables.length === 0) {
      return createHash('sha256')
        .update(canonicalJson(slot.kind === 'reducer' ? slot.state : null))
        .digest('hex');
    }
    return this.readModel.hashTables(slot.tables.filter((t) => !t.internal));
  }

  async close(): Promise<void> {
    await this.stop();
    await this.#lock;
    if (this.#ownsReadModel) await this.readModel.close();
  }
}
