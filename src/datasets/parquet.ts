/**
 * Dataset rows from Parquet files, as the Hugging Face Hub serves them (`data/*.parquet` shards):
 * read one row group at a time, each row as the plain value the Hub's JSON export of the same
 * row holds (64-bit integers as numbers, timestamps as ISO text, lists and structs as arrays and
 * objects), so the loaders read both alike. Snappy, gzip, zstd, brotli and lz4 pages are read.
 * A file that is not Parquet, or whose pages cannot be decoded, is a DatasetError naming the file
 * and the rows it could not read; a row the loader refuses is the loader's row error as ever.
 */
import { open, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { asyncBufferFromFile, parquetMetadataAsync, parquetReadObjects, type AsyncBuffer, type FileMetaData } from 'hyparquet';
import { compressors } from 'hyparquet-compressors';
import { DatasetError } from './errors.js';
import type { RawRecord } from './jsonl.js';

const MAGIC = 'PAR1';

export const isParquetName = (path: string): boolean => path.toLowerCase().endsWith('.parquet');

/** Whether a file starts with Parquet's magic bytes (for files named otherwise). */
export async function hasParquetMagic(path: string): Promise<boolean> {
  const handle = await open(path, 'r');
  try {
    const head = Buffer.alloc(4);
    const { bytesRead } = await handle.read(head, 0, 4, 0);
    return bytesRead === 4 && head.toString('latin1') === MAGIC;
  } finally {
    await handle.close();
  }
}

/** The `.parquet` files directly inside a folder, in name order (the Hub numbers its shards so
 * that name order is row order); empty when it holds none. */
export async function parquetShards(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  return entries
    .filter((e) => e.isFile() && isParquetName(e.name))
    .map((e) => e.name)
    .sort()
    .map((name) => join(dir, name));
}

/** A value as JSON would hold it: the Hub's JSON export writes int64 as numbers, and a number
 * past 2^53 as digits JSON.parse would round, so it is kept exact as text here. */
export function plainValue(value: unknown): unknown {
  if (typeof value === 'bigint') {
    const n = Number(value);
    return Number.isSafeInteger(n) ? n : value.toString();
  }
  if (value === null || typeof value !== 'object') return value;
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map(plainValue);
  if (ArrayBuffer.isView(value)) return Array.from(value as unknown as ArrayLike<unknown>, plainValue);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = plainValue(v);
  return out;
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

async function openParquet(path: string): Promise<{ file: AsyncBuffer; metadata: FileMetaData }> {
  let file: AsyncBuffer;
  try {
    file = await asyncBufferFromFile(path);
  } catch (err) {
    throw new DatasetError(`cannot open ${path}: ${message(err)}`);
  }
  try {
    return { file, metadata: await parquetMetadataAsync(file) };
  } catch (err) {
    throw new DatasetError(`${path} is not a Parquet file, or is cut short: ${message(err)}`);
  }
}

/**
 * Every row of one Parquet file, in order; `index` counts from `firstIndex` (rows of earlier
 * shards), `row` is the row's place in this file. Rows are decoded a row group at a time, so a
 * shard of large rows is never held whole.
 */
export async function* readParquetRecords(path: string, firstIndex = 0): AsyncGenerator<RawRecord> {
  const { file, metadata } = await openParquet(path);
  let rowStart = 0;
  for (const [g, group] of metadata.row_groups.entries()) {
    const rowEnd = rowStart + Number(group.num_rows);
    let rows: Record<string, unknown>[];
    try {
      rows = await parquetReadObjects({ file, metadata, rowStart, rowEnd, compressors });
    } catch (err) {
      throw new DatasetError(`${path}: cannot read rows ${rowStart} to ${rowEnd - 1} (row group ${g}): ${message(err)}`);
    }
    if (rows.length !== rowEnd - rowStart) {
      throw new DatasetError(`${path}: row group ${g} should hold ${rowEnd - rowStart} rows, ${rows.length} were read`);
    }
    for (let i = 0; i < rows.length; i++) {
      const row = rowStart + i;
      yield { index: firstIndex + row, file: path, row, value: plainValue(rows[i]) };
    }
    rowStart = rowEnd;
  }
}

/** The rows of several Parquet files, one after the other, indexed as one table. */
export async function* readParquetFiles(paths: readonly string[]): AsyncGenerator<RawRecord> {
  let index = 0;
  for (const path of paths) {
    for await (const rec of readParquetRecords(path, index)) {
      index = rec.index + 1;
      yield rec;
    }
  }
}
