/**
 * Typed reads of the read models. The tables are declared as specs (`TableSpec`); `DatabaseOf`
 * derives the row types kysely checks queries against from those same specs, so a column that
 * a spec does not declare, or a wrong type, is a compile error rather than an `as` cast.
 *
 * Kysely here only builds and compiles the query; better-sqlite3 runs it. The reads that use it
 * are synchronous (reports and ablation read a finished file), and kysely's own drivers are
 * async only: compiling once and running the statement keeps them synchronous and as fast as a
 * hand-written prepared statement.
 */
import type Database from 'better-sqlite3';
import { DummyDriver, Kysely, SqliteAdapter, SqliteIntrospector, SqliteQueryCompiler, type Compilable, type InferResult } from 'kysely';
import type { ColumnSpec, ColumnType, TableSpec } from './readmodel.js';

/** What better-sqlite3 returns for a column of each declared type (booleans are stored 0/1,
 * json as its text). */
type SqlValue<T extends ColumnType> = T extends 'text' | 'json'
  ? string
  : T extends 'integer' | 'real' | 'boolean'
    ? number
    : T extends 'blob'
      ? Buffer
      : never;
type ValueOf<S extends ColumnSpec> = S extends `${infer T extends ColumnType}?` ? SqlValue<T> | null : S extends ColumnType ? SqlValue<S> : never;

/** The row of a table spec declared `as const`. */
export type RowOf<T extends TableSpec> = { -readonly [C in keyof T['columns']]: ValueOf<T['columns'][C]> };
/** The database of a set of table specs declared `as const`, as kysely types it. */
export type DatabaseOf<Tables extends Readonly<Record<string, TableSpec>>> = { -readonly [N in keyof Tables]: RowOf<Tables[N]> };

/** A query builder that only compiles (SQLite syntax); run its queries with `all`/`first`. */
export function queryBuilder<DB>(): Kysely<DB> {
  return new Kysely<DB>({
    dialect: {
      createAdapter: () => new SqliteAdapter(),
      createDriver: () => new DummyDriver(),
      createIntrospector: (db) => new SqliteIntrospector(db),
      createQueryCompiler: () => new SqliteQueryCompiler(),
    },
  });
}

/** A compiled query prepared on `db`; `params` replace the compiled ones in order (the same
 * statement run for many keys). */
export class TypedStatement<Row> {
  readonly #stmt: Database.Statement;
  readonly #params: readonly unknown[];

  constructor(db: Database.Database, query: Compilable<Row>) {
    const compiled = query.compile();
    this.#stmt = db.prepare(compiled.sql);
    this.#params = compiled.parameters;
  }

  all(...params: unknown[]): Row[] {
    return this.#stmt.all(...(params.length > 0 ? params : this.#params)) as Row[];
  }

  first(...params: unknown[]): Row | undefined {
    return this.#stmt.get(...(params.length > 0 ? params : this.#params)) as Row | undefined;
  }
}

/** Runs a query once: every row, typed by the query. */
export function all<Q extends Compilable<unknown>>(db: Database.Database, query: Q): InferResult<Q> {
  return new TypedStatement(db, query as Compilable<unknown>).all() as unknown as InferResult<Q>;
}
