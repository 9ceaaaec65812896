/**
 * The read model: a SQLite database (separate from the log) holding projection tables plus
 * each projection's checkpoint. Tables are declared as small specs; the runner writes rows with
 * raw prepared statements (the hot path) and everything else (DDL, queries, state hashes) goes
 * through kysely.
 */
import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { inspectCrucibleFile } from '../events/sqlite/sqlite-file.js';
import { canonicalJson } from '../core/canonical-json.js';
import { ReadModelError } from './errors.js';
import { useWal } from '../core/sqlite-wal.js';

export { ReadModelError };

/** blob: bytes (a Buffer or Uint8Array), read back as a Buffer; state hashes see it as hex. */
export type ColumnType = 'text' | 'integer' | 'real' | 'boolean' | 'json' | 'blob';
/** A trailing "?" makes the column nullable. */
export type ColumnSpec = ColumnType | `${ColumnType}?`;

export interface TableSpec {
  columns: Readonly<Record<string, ColumnSpec>>;
  /** Primary key columns (not nullable). Rows are hashed in this order. */
  key: readonly string[];
  /** Extra indexes, each a list of columns. */
  indexes?: readonly (readonly string[])[];
  /** Working rows the projection keeps for itself (not what it shows): left out of its state hash. */
  internal?: boolean;
}

export type Row = Record<string, unknown>;

/** One change to the read model, produced by a projection's pure `apply`. */
export type RowWrite =
  /** Insert or replace the whole row (missing nullable columns become null). */
  | { op: 'put'; table: string; row: Row }
  /** Insert, or update only the given columns of an existing row. */
  | { op: 'merge'; table: string; row: Row }
  /** Add to numeric columns, creating the row (other numeric columns 0) when absent. */
  | { op: 'add'; table: string; key: Row; values: Readonly<Record<string, number>> }
  | { op: 'delete'; table: string; key: Row };

export const put = (table: string, row: Row): RowWrite => ({ op: 'put', table, row });
export const merge = (table: string, row: Row): RowWrite => ({ op: 'merge', table, row });
export const add = (table: string, key: Row, values: Record<string, number>): RowWrite => ({ op: 'add', table, key, values });
export const del = (table: string, key: Row): RowWrite => ({ op: 'delete', table, key });

/** Read access for a projection's `apply`: sees the writes of earlier events, batch included. */
export interface ReadView {
  get(table: string, key: Row): Row | undefined;
}

export class NotAReadModelError extends ReadModelError {
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super(`${path} is not a crucible read model: ${reason}`);
  }
}

export const READ_MODEL_FORMAT = 1;
/** Rows per multi-row upsert, and SQLite's bound on parameters per statement. */
const UPSERT_ROWS = 64;
const MAX_PARAMS = 32_000;
const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Tables of the runner itself; projection tables may not use the prefix. */
export const RESERVED_PREFIX = 'crucible_';

export interface Column {
  name: string;
  type: ColumnType;
  nullable: boolean;
}

/** A table spec checked once and turned into the column list and statements it needs. */
export class Table {
  readonly columns: Column[];
  readonly byName: Map<string, Column>;
  readonly key: string[];
  readonly internal: boolean;
  readonly #stmts = new Map<string, Database.Statement>();

  constructor(
    readonly name: string,
    spec: TableSpec,
    private readonly db: Database.Database,
  ) {
    if (!IDENT.test(name)) throw new ReadModelError(`table name "${name}" must be a plain identifier`);
    if (name.startsWith(RESERVED_PREFIX)) throw new ReadModelError(`table name "${name}" uses the reserved prefix ${RESERVED_PREFIX}`);
    this.columns = Object.entries(spec.columns).map(([col, s]) => {
      if (!IDENT.test(col)) throw new ReadModelError(`column "${name}.${col}" must be a plain identifier`);
      const nullable = s.endsWith('?');
      const type = (nullable ? s.slice(0, -1) : s) as ColumnType;
      if (!['text', 'integer', 'real', 'boolean', 'json', 'blob'].includes(type)) {
        throw new ReadModelError(`column "${name}.${col}" has unknown type "${s}"`);
      }
      return { name: col, type, nullable };
    });
    this.byName = new Map(this.columns.map((c) => [c.name, c]));
    this.key = [...spec.key];
    this.internal = spec.internal === true;
    if (this.key.length === 0) throw new ReadModelError(`table "${name}" needs a primary key`);
    for (const k of this.key) {
      const c = this.byName.get(k);
      if (!c) throw new ReadModelError(`key column "${name}.${k}" is not a column`);
      if (c.nullable) throw new ReadModelError(`key column "${name}.${k}" may not be nullable`);
    }
    for (const ix of spec.indexes ?? []) {
      for (const c of ix) if (!this.byName.has(c)) throw new ReadModelError(`index column "${name}.${c}" is not a column`);
    }
  }

  /** Binds a JS value for a column; throws naming the table and column. */
  encode(col: string, value: unknown): unknown {
    const c = this.byName.get(col);
    if (!c) throw new ReadModelError(`table "${this.name}" has no column "${col}"`);
    return this.encodeColumn(c, value);
  }

  /** The same, for a column of this table already looked up (a put's hot path). */
  encodeColumn(c: Column, value: unknown): unknown {
    const col = c.name;
    if (value === null || value === undefined) {
      if (!c.nullable) throw new ReadModelError(`${this.name}.${col} may not be null`);
      return null;
    }
    switch (c.type) {
      case 'text':
        if (typeof value !== 'string') break;
        return value;
      case 'integer':
        if (typeof value !== 'number' || !Number.isSafeInteger(value)) break;
        return value;
      case 'real':
        if (typeof value !== 'number' || !Number.isFinite(value)) break;
        return value;
      case 'boolean':
        if (typeof value !== 'boolean') break;
        return value ? 1 : 0;
      case 'json':
        return canonicalJson(value);
      case 'blob':
        if (!(value instanceof Uint8Array)) break;
        return value;
    }
    throw new ReadModelError(`${this.name}.${col} is ${c.type}, got ${describe(value)}`);
  }

  /** Turns a stored row back into JS values (booleans, parsed JSON). */
  decode(row: Row): Row {
    const out: Row = {};
    for (const c of this.columns) {
      const v = row[c.name];
      out[c.name] = v === null || v === undefined ? null : c.type === 'boolean' ? v === 1 : c.type === 'json' ? JSON.parse(v as string) : v;
    }
    return out;
  }

  /** A row from its values as encoded (`encodeRow`'s order), as `decode` gives it. */
  decodeValues(values: readonly unknown[]): Row {
    const out: Row = {};
    this.columns.forEach((c, i) => {
      const v = values[i];
      out[c.name] = v === null || v === undefined ? null : c.type === 'boolean' ? v === 1 : c.type === 'json' ? JSON.parse(v as string) : v;
    });
    return out;
  }

  statement(sig: string, sql: () => string): Database.Statement {
    let s = this.#stmts.get(sig);
    if (!s) this.#stmts.set(sig, (s = this.db.prepare(sql())));
    return s;
  }

  keyValues(key: Row): unknown[] {
    return this.key.map((k) => {
      if (!(k in key)) throw new ReadModelError(`key of "${this.name}" lacks column "${k}"`);
      return this.encode(k, key[k]);
    });
  }

  get(key: Row): Row | undefined {
    const stmt = this.statement('get', () => `SELECT * FROM ${this.name} WHERE ${this.key.map((k) => `${k} = ?`).join(' AND ')}`);
    const row = stmt.get(...this.keyValues(key)) as Row | undefined;
    return row && this.decode(row);
  }

  /** Writes a complete row (JS values), inserting or replacing. */
  upsert(row: Row): void {
    this.upsertEncoded(this.encodeRow(row));
  }

  /** A complete row's values bound for its columns, in column order. */
  encodeRow(row: Row): unknown[] {
    return this.columns.map((c) => this.encode(c.name, row[c.name]));
  }

  /** Writes a complete row already encoded (as `encodeRow` returns it), inserting or replacing. */
  upsertEncoded(values: readonly unknown[]): void {
    const stmt = this.statement('upsert', () => {
      const cols = this.columns.map((c) => c.name);
      const set = cols.filter((c) => !this.key.includes(c));
      const conflict = set.length ? `DO UPDATE SET ${set.map((c) => `${c} = excluded.${c}`).join(', ')}` : 'DO NOTHING';
      return `INSERT INTO ${this.name} (${cols.join(', ')}) VALUES (${cols.map(() => '?').join(', ')}) ON CONFLICT (${this.key.join(', ')}) ${conflict}`;
    });
    stmt.run(...values);
  }

  /** Writes complete rows already encoded, inserting or replacing, several rows per statement:
   * a statement's call costs more than a row's work in SQLite. */
  upsertManyEncoded(rows: readonly (readonly unknown[])[]): void {
    const per = Math.max(1, Math.min(UPSERT_ROWS, Math.floor(MAX_PARAMS / this.columns.length)));
    const n = this.columns.length;
    const params = new Array<unknown>(per * n);
    let at = 0;
    for (; at + per <= rows.length; at += per) {
      for (let r = 0; r < per; r++) {
        const row = rows[at + r]!;
        for (let c = 0; c < n; c++) params[r * n + c] = row[c];
      }
      this.#upsertStatement(per).run(params);
    }
    for (; at < rows.length; at++) this.upsertEncoded(rows[at]!);
  }

  #upsertStatement(n: number): Database.Statement {
    return this.statement(`upsert*${n}`, () => {
      const cols = this.columns.map((c) => c.name);
      const set = cols.filter((c) => !this.key.includes(c));
      const one = `(${cols.map(() => '?').join(', ')})`;
      const conflict = set.length ? `DO UPDATE SET ${set.map((c) => `${c} = excluded.${c}`).join(', ')}` : 'DO NOTHING';
      return `INSERT INTO ${this.name} (${cols.join(', ')}) VALUES ${Array(n).fill(one).join(', ')} ON CONFLICT (${this.key.join(', ')}) ${conflict}`;
    });
  }

  /** Deletes by keys already encoded, several per statement (as upsertManyEncoded writes). */
  removeManyEncoded(keys: readonly (readonly unknown[])[]): void {
    const n = this.key.length;
    const per = Math.max(1, Math.min(UPSERT_ROWS, Math.floor(MAX_PARAMS / n)));
    const params = new Array<unknown>(per * n);
    let at = 0;
    for (; at + per <= keys.length; at += per) {
      for (let r = 0; r < per; r++) for (let c = 0; c < n; c++) params[r * n + c] = keys[at + r]![c];
      this.statement(`delete*${per}`, () => {
        const one = `(${this.key.map(() => '?').join(', ')})`;
        return `DELETE FROM ${this.name} WHERE (${this.key.join(', ')}) IN (VALUES ${Array(per).fill(one).join(', ')})`;
      }).run(params);
    }
    for (; at < keys.length; at++) this.removeEncoded(keys[at]!);
  }

  /** Deletes by key values already encoded (as `keyValues` returns them). */
  removeEncoded(keyValues: readonly unknown[]): void {
    const stmt = this.statement('delete', () => `DELETE FROM ${this.name} WHERE ${this.key.map((k) => `${k} = ?`).join(' AND ')}`);
    stmt.run(...keyValues);
  }

  /** The row `add` or `merge` creates when the key is absent: numbers 0, booleans false, nullables null. */
  blank(key: Row): Row {
    const row: Row = {};
    for (const c of this.columns) {
      if (this.key.includes(c.name)) row[c.name] = key[c.name];
      else if (c.nullable) row[c.name] = null;
      else if (c.type === 'integer' || c.type === 'real') row[c.name] = 0;
      else if (c.type === 'boolean') row[c.name] = false;
      else row[c.name] = undefined; // must be given: checked when the row is complete
    }
    return row;
  }
}

/** A put row, kept as its encoded values (`encodeRow`'s order). */
class Encoded {
  constructor(readonly values: readonly unknown[]) {}
}

/**
 * The writes of one batch, kept in memory and flushed at commit, each touched row once and
 * many rows per statement: a batch of thousands of events that bump a few counters costs a few
 * statements, and one that adds a hundred thousand rows a few thousand.
 * Reads (a projection's view) see the batch's own writes first.
 */
export class BatchWriter {
  readonly #rows = new Map<Table, Map<string, Row | Encoded | null>>();
  #slot(t: Table): Map<string, Row | Encoded | null> {
    let m = this.#rows.get(t);
    if (!m) this.#rows.set(t, (m = new Map()));
    return m;
  }

  #keyOf(t: Table, key: Row): string {
    // Text and integer keys (the common case) need no JSON nor a list of values: joined by a NUL,
    // which no text of them holds; the prefix keeps them apart from JSON keys. A column's type
    // is fixed, so a text "1" and an integer 1 never meet in the same place.
    let k = 's';
    for (let i = 0; i < t.key.length; i++) {
      const name = t.key[i]!;
      const v = key[name];
      const type = t.byName.get(name)!.type;
      let part: string;
      if (type === 'text' && typeof v === 'string' && !v.includes('\0')) part = v;
      else if (type === 'integer' && typeof v === 'number' && Number.isSafeInteger(v)) part = String(v);
      // Anything else goes through keyValues, which checks (and refuses) as it always did.
      else return `j${JSON.stringify(t.keyValues(key))}`;
      k = i === 0 ? k + part : `${k}\0${part}`;
    }
    return k;
  }

  #decodeKey(t: Table, k: string): unknown[] {
    if (!k.startsWith('s')) return JSON.parse(k.slice(1)) as unknown[];
    const parts: unknown[] = k.slice(1).split('\0');
    for (let i = 0; i < parts.length; i++) if (t.byName.get(t.key[i]!)!.type === 'integer') parts[i] = Number(parts[i]);
    return parts;
  }

  /** The current row (batch writes included), or undefined. */
  get(t: Table, key: Row): Row | undefined {
    const k = this.#keyOf(t, key);
    const row = this.#current(t, key, k);
    return row ? { ...row } : undefined;
  }

  /** The batch's row of a key, read from the read model on first use. A put row is kept
   * encoded only (most are never read back) and decoded here when it is. */
  #current(t: Table, key: Row, k: string): Row | null {
    const m = this.#slot(t);
    let row = m.get(k);
    if (row === undefined) m.set(k, (row = t.get(key) ?? null));
    else if (row instanceof Encoded) m.set(k, (row = t.decodeValues(row.values)));
    return row;
  }

  write(t: Table, w: RowWrite): void {
    switch (w.op) {
      case 'put': {
        const k = this.#keyOf(t, w.row);
        // One pass, checking every column: the values as they will be stored (decoded again
        // only if the batch reads the row back).
        const encoded = new Array<unknown>(t.columns.length);
        let given = 0;
        for (let i = 0; i < t.columns.length; i++) {
          const c = t.columns[i]!;
          const v = w.row[c.name];
          if (v === undefined) {
            if (c.name in w.row) given++;
            if (!c.nullable) throw new ReadModelError(`put on "${t.name}" lacks column "${c.name}"`);
            encoded[i] = null;
          } else {
            given++;
            encoded[i] = t.encodeColumn(c, v);
          }
        }
        // A column the table lacks is refused with encode's message (counted without a key list:
        // a put per row is the hot path).
        let named = 0;
        for (const _ in w.row) named++;
        if (given !== named) for (const c of Object.keys(w.row)) if (!t.byName.has(c)) t.encode(c, w.row[c]);
        this.#slot(t).set(k, new Encoded(encoded));
        return;
      }
      case 'merge': {
        const k = this.#keyOf(t, w.row);
        for (const c in w.row) t.encode(c, w.row[c]);
        // Rows in the batch are owned by it (get() hands out copies): update in place.
        const m = this.#slot(t);
        let row = this.#current(t, w.row, k);
        const created = !row;
        if (!row) m.set(k, (row = t.blank(w.row)));
        Object.assign(row, w.row);
        if (created) this.#complete(t, row, 'merge');
        return;
      }
      case 'add': {
        const k = this.#keyOf(t, w.key);
        const m = this.#slot(t);
        let row = this.#current(t, w.key, k);
        const created = !row;
        if (!row) m.set(k, (row = t.blank(w.key)));
        for (const c in w.values) {
          const v = w.values[c]!;
          const col = t.byName.get(c);
          if (!col || (col.type !== 'integer' && col.type !== 'real') || t.key.includes(c)) {
            throw new ReadModelError(`"${t.name}.${c}" is not a numeric non-key column to add to`);
          }
          t.encode(c, v);
          row[c] = t.encode(c, ((row[c] as number | null) ?? 0) + v);
        }
        if (created) this.#complete(t, row, 'add');
        return;
      }
      case 'delete': {
        const k = this.#keyOf(t, w.key);
        this.#slot(t).set(k, null);
        return;
      }
      default:
        throw new ReadModelError(`unknown row write ${JSON.stringify(w)}`);
    }
  }

  #complete(t: Table, row: Row, op: string): void {
    for (const c of t.columns) {
      if (row[c.name] === undefined) throw new ReadModelError(`${op} creates a row of "${t.name}" without column "${c.name}"`);
    }
  }

  /** Writes every touched row (inside the caller's transaction), many rows per statement. */
  flush(): void {
    for (const [t, rows] of this.#rows) {
      const puts: (readonly unknown[])[] = [];
      for (const row of rows.values()) {
        if (row instanceof Encoded) puts.push(row.values);
        else if (row) puts.push(t.encodeRow(row));
      }
      t.upsertManyEncoded(puts);
      const deletes: unknown[][] = [];
      for (const [k, row] of rows) if (!row) deletes.push(this.#decodeKey(t, k));
      t.removeManyEncoded(deletes);
    }
    this.#rows.clear();
  }
}

function describe(v: unknown): string {
  if (typeof v === 'number') return Number.isFinite(v) ? `the number ${v}` : String(v);
  if (typeof v === 'string') return `the string ${JSON.stringify(v.slice(0, 40))}`;
  return typeof v;
}

const SQL_TYPE: Record<ColumnType, 'text' | 'integer' | 'real' | 'blob'> = {
  text: 'text',
  integer: 'integer',
  real: 'real',
  boolean: 'integer',
  json: 'text',
  blob: 'blob',
};

/** An open read-model database. `kysely` is for queries; writes go through projections. */
export class ReadModel {
  readonly kysely: Kysely<any>;

  private constructor(
    readonly db: Database.Database,
    readonly path: string,
  ) {
    this.kysely = new Kysely<any>({ dialect: new SqliteDialect({ database: db }) });
  }

  /** Opens or creates a read model. Refuses an event log or any other file, untouched.
   * `synchronous: 'off'` is for a file built whole and synced by its caller before anything
   * reads it (an ablation variant's): set first, so that neither the switch of a new file to
   * WAL nor its first commits wait on the disk. */
  static open(path: string, opts: { synchronous?: 'full' | 'normal' | 'off' } = {}): ReadModel {
    const found = inspectCrucibleFile(path, {
      kind: 'read-model',
      format: READ_MODEL_FORMAT,
      notOurs: (p, reason) => new NotAReadModelError(p, reason),
      newer: (p, f, s) => new NotAReadModelError(p, `format ${f} is newer than this crucible supports (${s})`),
    });
    const db = new Database(path);
    if (opts.synchronous === 'off') db.pragma('synchronous = OFF');
    // Pages of 16 KiB in a new file (the size is fixed once a file has tables): a replay writes
    // tens of megabytes of rows, and each page is a system call into the WAL and one more at its
    // checkpoint; a quarter as many of them cost a quarter less of the writes.
    if (found.state === 'new') db.pragma('page_size = 16384');
    useWal(db);
    // A read model can always be rebuilt from the log: NORMAL is enough, and stays consistent.
    db.pragma(`synchronous = ${opts.synchronous === 'full' ? 'FULL' : opts.synchronous === 'off' ? 'OFF' : 'NORMAL'}`);
    db.pragma('busy_timeout = 5000');
    // A batch's multi-row statements each keep a statement journal (pages to undo should one
    // fail half-way): in memory, not a temporary file written and fsynced at every batch.
    db.pragma('temp_store = MEMORY');
    if (found.state === 'new') {
      db.transaction(() => {
        db.exec(`CREATE TABLE IF NOT EXISTS crucible_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`);
        const ins = db.prepare('INSERT OR IGNORE INTO crucible_meta (key, value) VALUES (?, ?)');
        ins.run('kind', 'read-model');
        ins.run('format', String(READ_MODEL_FORMAT));
      }).immediate();
    }
    db.exec(`CREATE TABLE IF NOT EXISTS crucible_projections (
      name TEXT PRIMARY KEY, version INTEGER NOT NULL, spec_hash TEXT NOT NULL, tables TEXT NOT NULL,
      position INTEGER NOT NULL, state TEXT)`);
    return new ReadModel(db, path);
  }

  /** Typed query builder over the projection tables, e.g. `rm.query<{ mistake_book: MistakeRow }>()`. */
  query<DB>(): Kysely<DB> {
    return this.kysely as unknown as Kysely<DB>;
  }

  /** DDL built with kysely, executed synchronously so it can sit inside a runner transaction. */
  createTableSql(table: Table, spec: TableSpec): string[] {
    let ct = this.kysely.schema.createTable(table.name);
    for (const c of table.columns) {
      ct = ct.addColumn(c.name, SQL_TYPE[c.type], (col) => {
        let b = c.nullable ? col : col.notNull();
        if (!c.nullable && (c.type === 'integer' || c.type === 'real' || c.type === 'boolean')) b = b.defaultTo(0);
        return b;
      });
    }
    ct = ct.addPrimaryKeyConstraint(`${table.name}_pk`, table.key as never[]);
    const out = [ct.compile().sql];
    (spec.indexes ?? []).forEach((ix, i) => {
      out.push(
        this.kysely.schema
          .createIndex(`${table.name}_ix${i}`)
          .on(table.name)
          .columns([...ix])
          .compile().sql,
      );
    });
    return out;
  }

  dropTableSql(name: string): string {
    return this.kysely.schema.dropTable(name).ifExists().compile().sql;
  }

  /** sha256 over the rows of the given tables in key order: equal contents, equal hash. */
  async hashTables(tables: readonly Table[]): Promise<string> {
    const h = createHash('sha256');
    for (const t of [...tables].sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const cols = t.columns.map((c) => c.name).sort();
      h.update(`table ${t.name} ${cols.join(',')}\n`);
      let q = this.kysely.selectFrom(t.name).select(cols);
      for (const k of t.key) q = q.orderBy(k);
      // Blobs as hex (JSON.stringify would spell a Buffer out byte by byte).
      const value = (v: unknown) => (v instanceof Uint8Array ? Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('hex') : v);
      for (const row of (await q.execute()) as Row[]) h.update(`${JSON.stringify(cols.map((c) => value(row[c])))}\n`);
    }
    return h.digest('hex');
  }

  async close(): Promise<void> {
    // Kysely's destroy closes the better-sqlite3 handle it was given.
    await this.kysely.destroy();
    if (this.db.open) this.db.close();
  }
}
