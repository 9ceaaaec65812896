/**
 * Reading JSON dataset files record by record: JSON lines (optionally gzipped) or one JSON array.
 * A line that is not JSON is yielded as an error with its line number, never thrown, so one bad
 * row cannot stop an import.
 */
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { createGunzip, gunzipSync } from 'node:zlib';
import type { Readable } from 'node:stream';
import { DatasetError } from './errors.js';

export interface RawRecord {
  /** 0-based index of the record among the file's records (blank lines are not records). */
  index: number;
  /** 1-based line number in the file, for JSON lines input. */
  line?: number;
  /** The file the record is in, where a source has several files (Parquet shards). */
  file?: string;
  /** 0-based row of the record in that file, for Parquet input. */
  row?: number;
  /** The parsed value; absent when `error` is set. */
  value?: unknown;
  error?: string;
}

const isGzip = (path: string): boolean => path.endsWith('.gz');

function openText(path: string): Readable {
  const raw = createReadStream(path);
  if (!isGzip(path)) return raw;
  const gunzip = createGunzip();
  // A corrupt gzip must surface as an error of the stream that is being read.
  raw.on('error', (err) => gunzip.destroy(err));
  return raw.pipe(gunzip);
}

/** Whether a name says JSON (lines), gzipped or not. */
export const isJsonName = (path: string): boolean => /\.(jsonl|ndjson|json)(\.gz)?$/i.test(path);

/** Whether the file holds one JSON document (an array of rows) rather than JSON lines. */
async function isJsonDocument(path: string): Promise<boolean> {
  const base = path.replace(/\.gz$/, '');
  if (base.endsWith('.jsonl') || base.endsWith('.ndjson')) return false;
  if (base.endsWith('.json')) return true;
  // Unknown extension: sniff the first non-blank character.
  const stream = openText(path);
  try {
    for await (const chunk of stream) {
      const text = String(chunk).trimStart();
      if (text.length > 0) return text.startsWith('[');
    }
    return false;
  } finally {
    stream.destroy();
  }
}

async function assertFile(path: string): Promise<void> {
  let info;
  try {
    info = await stat(path);
  } catch {
    throw new DatasetError(`dataset file not found: ${path}`);
  }
  if (!info.isFile()) throw new DatasetError(`${path} is not a file`);
}

/** Yields every record of a `.jsonl`, `.jsonl.gz`, `.json` or `.json.gz` file. A JSON document
 * must be an array of rows, or an object whose only array-valued entry holds the rows. */
export async function* readJsonRecords(path: string): AsyncGenerator<RawRecord> {
  await assertFile(path);
  if (await isJsonDocument(path)) yield* readJsonDocument(path);
  else yield* readJsonLines(path);
}

/** Every non-blank line of a JSON lines file (gzipped when the name ends in .gz), parsed. */
export async function* readJsonLines(path: string): AsyncGenerator<RawRecord> {
  await assertFile(path);
  const lines = createInterface({ input: openText(path), crlfDelay: Infinity });
  let lineNo = 0;
  let index = 0;
  try {
    for await (const text of lines) {
      lineNo += 1;
      if (text.trim() === '') continue;
      const record: RawRecord = { index, line: lineNo };
      index += 1;
      try {
        record.value = JSON.parse(text);
      } catch (err) {
        record.error = `line ${lineNo} is not valid JSON: ${(err as Error).message}`;
      }
      yield record;
    }
  } catch (err) {
    throw new DatasetError(`cannot read ${path} (after line ${lineNo}): ${(err as Error).message}`);
  }
}

async function* readJsonDocument(path: string): AsyncGenerator<RawRecord> {
  const bytes = await readFile(path);
  let doc: unknown;
  try {
    const text = (isGzip(path) ? gunzipSync(bytes) : bytes).toString('utf8');
    doc = JSON.parse(text);
  } catch (err) {
    throw new DatasetError(`${path} is not a valid JSON document: ${(err as Error).message}`);
  }
  let rows: unknown[] | undefined;
  if (Array.isArray(doc)) rows = doc;
  else if (doc !== null && typeof doc === 'object') {
    const arrays = Object.values(doc).filter(Array.isArray);
    if (arrays.length === 1) rows = arrays[0];
  }
  if (!rows) throw new DatasetError(`${path}: expected a JSON array of rows (or an object holding one)`);
  for (let index = 0; index < rows.length; index++) yield { index, value: rows[index] };
}
