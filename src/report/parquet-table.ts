/**
 * One table written as one Parquet file, from a declared schema: each column's name, type,
 * whether it may be null, and what it means (the same declarations docs/export.md lists). Rows
 * stream in a row group at a time, so a table larger than memory can be written; the file is
 * written beside its name and renamed, so a reader never sees half a table.
 */
import { renameSync, rmSync } from 'node:fs';
import { fileWriter, parquetWriteRows } from 'hyparquet-writer';

/** Column types, as Parquet stores them: int32 and int64 are INT32 and INT64, double is DOUBLE,
 * string is UTF-8 BYTE_ARRAY, json is BYTE_ARRAY of logical type JSON (the value serialized). */
export type ColumnType = 'string' | 'int32' | 'int64' | 'double' | 'boolean' | 'json';

export interface ColumnSpec {
  name: string;
  type: ColumnType;
  /** Whether the column may hold nulls (OPTIONAL); otherwise every row has a value (REQUIRED). */
  nullable: boolean;
  /** What the column means, for docs/export.md. */
  doc: string;
}

export interface TableSpec {
  /** The table's name; its file is `<name>.parquet`. */
  name: string;
  /** What one row is. */
  doc: string;
  columns: readonly ColumnSpec[];
}

export type Row = Record<string, unknown>;

/** A row that does not fit its table's schema: a bug of the code that made it, named exactly. */
export class TableRowError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TableRowError';
  }
}

const PARQUET_TYPES = {
  string: { type: 'BYTE_ARRAY', converted_type: 'UTF8' },
  json: { type: 'BYTE_ARRAY', converted_type: 'JSON' },
  int32: { type: 'INT32' },
  int64: { type: 'INT64' },
  double: { type: 'DOUBLE' },
  boolean: { type: 'BOOLEAN' },
} as const;

type SchemaElement = NonNullable<Parameters<typeof parquetWriteRows>[0]['schema']>[number];

export function parquetSchema(spec: TableSpec): SchemaElement[] {
  return [
    { name: 'schema', num_children: spec.columns.length },
    ...spec.columns.map((c): SchemaElement => ({ name: c.name, repetition_type: c.nullable ? 'OPTIONAL' : 'REQUIRED', ...PARQUET_TYPES[c.type] })),
  ];
}

const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

function fits(type: ColumnType, v: unknown): boolean {
  switch (type) {
    case 'string':
      return typeof v === 'string';
    case 'int32':
      return Number.isInteger(v) && (v as number) >= INT32_MIN && (v as number) <= INT32_MAX;
    case 'int64':
      return Number.isSafeInteger(v);
    case 'double':
      return typeof v === 'number';
    case 'boolean':
      return typeof v === 'boolean';
    case 'json':
      return v !== undefined;
  }
}

/** The row as the writer takes it (int64 as bigint), checked against the schema. */
function checkedRow(spec: TableSpec, row: Row, index: number): Row {
  const out: Row = {};
  for (const c of spec.columns) {
    const v = row[c.name];
    if (v === null || v === undefined) {
      if (!c.nullable) throw new TableRowError(`${spec.name} row ${index}: column ${c.name} is null, but it is required`);
      out[c.name] = null;
      continue;
    }
    if (!fits(c.type, v)) throw new TableRowError(`${spec.name} row ${index}: column ${c.name} is not ${c.type}: ${JSON.stringify(v)}`);
    out[c.name] = c.type === 'int64' ? BigInt(v as number) : v;
  }
  return out;
}

async function* checkedRows(spec: TableSpec, rows: AsyncIterable<Row> | Iterable<Row>, counted: { n: number }): AsyncGenerator<Row> {
  for await (const row of rows) yield checkedRow(spec, row, counted.n++);
}

/**
 * Writes `rows` to `file` as the table `spec` (snappy pages, as the Hub's files and pandas'
 * default), with `metadata` as the file's key-value metadata. Returns the number of rows.
 */
export async function writeParquetTable(
  file: string,
  spec: TableSpec,
  rows: AsyncIterable<Row> | Iterable<Row>,
  metadata: Record<string, string> = {},
): Promise<number> {
  const tmp = `${file}.tmp-${process.pid}`;
  const counted = { n: 0 };
  try {
    await parquetWriteRows({
      writer: fileWriter(tmp),
      rows: checkedRows(spec, rows, counted),
      columns: spec.columns.map((c) => ({ name: c.name })),
      schema: parquetSchema(spec),
      codec: 'SNAPPY',
      kvMetadata: Object.entries(metadata).map(([key, value]) => ({ key, value })),
      createdBy: 'crucible export (hyparquet-writer)',
    });
    renameSync(tmp, file);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
  return counted.n;
}
