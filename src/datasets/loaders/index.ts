/**
 * The dataset formats crucible reads, and the driver that turns a file into Problem records:
 * every row is converted and validated on its own; a bad row becomes a RowError (index, reason)
 * and the import goes on.
 */
import { DatasetError } from '../errors.js';
import { readRecords, type RawRecord } from '../records.js';
import { Problem } from '../../core/problem.js';
import { appsLoader } from './apps.js';
import { codeContestsLoader } from './codecontests.js';
import { formatIssues } from './common.js';
import { cureLoader } from './cure.js';
import { evolveCoderLoader } from './evolvecoder.js';
import { humanEvalPlusLoader, mbppPlusLoader } from './evalplus.js';
import { humanEvalLoader } from './humaneval.js';
import { liveCodeBenchLoader } from './livecodebench.js';
import { mbppLoader } from './mbpp.js';
import { tacoLoader } from './taco.js';
import { RowRejected, type DatasetLoader, type LoadResult, type LoaderOptions, type RowError } from './types.js';

export * from './types.js';
export { readSpecialJudge } from './taco.js';

export const LOADERS: Readonly<Record<string, DatasetLoader>> = Object.fromEntries(
  [
    codeContestsLoader,
    tacoLoader,
    appsLoader,
    liveCodeBenchLoader,
    mbppLoader,
    mbppPlusLoader,
    humanEvalLoader,
    humanEvalPlusLoader,
    evolveCoderLoader,
    cureLoader,
  ].map((l) => [l.format, l]),
);

export const FORMATS = Object.keys(LOADERS);

export function getLoader(format: string): DatasetLoader {
  const loader = LOADERS[format];
  if (!loader) throw new DatasetError(`unknown dataset format "${format}"; known formats: ${FORMATS.join(', ')}`);
  return loader;
}

/** A row's own id, for reporting a row that could not be converted. */
function rawId(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const row = value as Record<string, unknown>;
  for (const key of ['task_id', 'problem_id', 'question_id', 'id', 'name']) {
    const v = row[key];
    if (typeof v === 'string' || typeof v === 'number') return String(v);
  }
  return undefined;
}

export type ImportItem = { ok: true; problem: Problem } | { ok: false; error: RowError };

/** The records of one path or several (shards of one table, in the order given): indexes
 * continue from one path to the next, and each record of several paths names its file. */
async function* sourceRecords(loader: DatasetLoader, paths: readonly string[]): AsyncGenerator<RawRecord> {
  let offset = 0;
  for (const path of paths) {
    let next = offset;
    for await (const rec of loader.rows ? loader.rows(path) : readRecords(path)) {
      next = offset + rec.index + 1;
      yield { ...rec, index: offset + rec.index, ...(paths.length > 1 && rec.file === undefined ? { file: path } : {}) };
    }
    offset = next;
  }
}

/** Converts a dataset file, folder (APPS, Parquet shards) or list of files row by row, in order.
 * Never throws for a row; a file that cannot be read at all is a DatasetError. */
export async function* importRows(format: string, path: string | readonly string[], options: LoaderOptions = {}): AsyncGenerator<ImportItem> {
  const loader = getLoader(format);
  const source = options.source ?? loader.defaultSource;
  const limits = { ...loader.defaultLimits, ...options.defaultLimits };
  const seen = new Map<string, number>();
  const paths = typeof path === 'string' ? [path] : path;
  if (paths.length === 0) throw new DatasetError('no dataset path given');
  for await (const rec of sourceRecords(loader, paths)) {
    const where = {
      index: rec.index,
      ...(rec.line !== undefined ? { line: rec.line } : {}),
      ...(rec.file !== undefined ? { file: rec.file } : {}),
      ...(rec.row !== undefined ? { row: rec.row } : {}),
    };
    if (rec.error !== undefined) {
      yield { ok: false, error: { ...where, reason: rec.error } };
      continue;
    }
    let input;
    try {
      input = loader.convert(rec.value, { index: rec.index, source, limits, options });
    } catch (err) {
      const id = (err instanceof RowRejected ? err.id : undefined) ?? rawId(rec.value);
      const reason = err instanceof RowRejected ? err.message : `cannot convert: ${(err as Error).message}`;
      yield { ok: false, error: { ...where, ...(id !== undefined ? { id } : {}), reason } };
      continue;
    }
    const parsed = Problem.safeParse(input);
    if (!parsed.success) {
      yield { ok: false, error: { ...where, id: input.id, reason: `invalid problem record: ${formatIssues(parsed.error)}` } };
      continue;
    }
    const first = seen.get(parsed.data.id);
    if (first !== undefined) {
      yield { ok: false, error: { ...where, id: parsed.data.id, reason: `duplicate id (first seen at row ${first})` } };
      continue;
    }
    seen.set(parsed.data.id, rec.index);
    yield { ok: true, problem: parsed.data };
  }
}

/** All problems of a dataset file (or files) plus the rows that were skipped, with reasons. */
export async function loadDataset(format: string, path: string | readonly string[], options: LoaderOptions = {}): Promise<LoadResult> {
  const result: LoadResult = { problems: [], errors: [] };
  for await (const item of importRows(format, path, options)) {
    if (item.ok) result.problems.push(item.problem);
    else result.errors.push(item.error);
  }
  return result;
}

/** "row 12 (line 13, id X): reason"; "row 1012 (data/train-00001.parquet row 12, id X): reason" */
export function describeRowError(e: RowError): string {
  const inFile = e.row !== undefined ? `row ${e.row}` : e.line !== undefined ? `line ${e.line}` : undefined;
  const place = e.file !== undefined ? [e.file, inFile].filter(Boolean).join(' ') : inFile;
  const where = [place, e.id !== undefined ? `id ${e.id}` : undefined].filter(Boolean).join(', ');
  return `row ${e.index}${where ? ` (${where})` : ''}: ${e.reason}`;
}
