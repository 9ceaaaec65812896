/**
 * The records of a dataset path, whatever holds them: a JSON or JSON lines file (gzipped or
 * not), a Parquet file, or a folder of Parquet shards (the Hub's `data/` layout, read in name
 * order as one table).
 */
import { stat } from 'node:fs/promises';
import { DatasetError } from './errors.js';
import { isJsonName, readJsonRecords, type RawRecord } from './jsonl.js';
import { hasParquetMagic, isParquetName, parquetShards, readParquetFiles, readParquetRecords } from './parquet.js';

export type { RawRecord };

/** Whether a path is Parquet data: a `.parquet` file, a file starting with Parquet's magic bytes
 * (unless named as JSON), or a folder holding `.parquet` files. */
export async function isParquetSource(path: string): Promise<boolean> {
  const info = await stat(path).catch(() => undefined);
  if (!info) return false;
  if (info.isDirectory()) return (await parquetShards(path)).length > 0;
  return isParquetName(path) || (!isJsonName(path) && (await hasParquetMagic(path)));
}

export async function* readRecords(path: string): AsyncGenerator<RawRecord> {
  const info = await stat(path).catch(() => undefined);
  if (!info) throw new DatasetError(`dataset file not found: ${path}`);
  if (info.isDirectory()) {
    const shards = await parquetShards(path);
    if (shards.length === 0) throw new DatasetError(`${path} is a folder without .parquet files`);
    yield* readParquetFiles(shards);
  } else if (await isParquetSource(path)) {
    yield* readParquetRecords(path);
  } else {
    yield* readJsonRecords(path);
  }
}
