/**
 * The execution matrix as recorded, one row per (request, program hash): the verdicts as the
 * compact ProgramExecuted carries them (the request's pair positions, one verdict letter each,
 * the result indexes copied from an earlier execution), beside each request's pair lists in
 * stored form. A run of 15M results keeps about a row per 64 results instead of one per pair,
 * and a program's event is written without reading its request back.
 *
 * `executionVerdicts` is the one reader of these tables: it names every verdict by its
 * (program, test) pair again. Nothing else reads the rows' columns.
 */
import type Database from 'better-sqlite3';
import type { EventData } from '../events/catalog.js';
import { VERDICT_CODES, verdictOfCode, type Verdict } from '../core/verdicts.js';
import { put, type ReadView, type RowWrite, type TableSpec } from './readmodel.js';
import type { RowProjection } from './runner.js';
import { EXECUTION_REQUESTS, packRequest, REQUEST_LIST_TABLES, requestListsOf, REQUEST_TESTS, type RequestLists } from './request-lists.js';
import { all, queryBuilder, TypedStatement, type DatabaseOf, type RowOf } from './typed-sql.js';

const EXECUTIONS = 'executions';
/** Each request's lists, stored once (request-lists.ts): answer selection reads them too (its `reads`). */
export { EXECUTION_REQUESTS, REQUEST_TESTS };
const REQUESTS = EXECUTION_REQUESTS;

/** The read model's tables. An executions row: `positions`, the request's pair positions,
 * ascending, comma-separated; `verdicts`, one letter per position (see VERDICT_CODES);
 * `cached`, indexes (into positions) of results copied from an earlier execution. */
const TABLES = {
  [EXECUTIONS]: {
    columns: { request_id: 'text', program_hash: 'text', positions: 'text', verdicts: 'text', cached: 'text' },
    key: ['request_id', 'program_hash'],
  },
  ...REQUEST_LIST_TABLES,
} as const satisfies Readonly<Record<string, TableSpec>>;
type ExecutionsRow = RowOf<(typeof TABLES)[typeof EXECUTIONS]>;
const query = queryBuilder<DatabaseOf<typeof TABLES>>();

// The event's fields are read here only: a change of the event shapes touches these three.
type Executed = EventData<'ProgramExecuted'>;
type Requested = EventData<'ExecutionRequested'>;
type Completed = EventData<'ExecutionCompleted'>;

const joined = (list: readonly number[]) => list.join(',');
const numbers = (text: string): number[] => (text === '' ? [] : text.split(',').map(Number));

/** A compact record as a row, its results in position order (executors write them so; another
 * order is sorted, so the row does not depend on it). */
function executedRow(d: Executed): ExecutionsRow {
  let ascending = true;
  for (let i = 1; i < d.pairs.length; i++) if (d.pairs[i]! <= d.pairs[i - 1]!) ascending = false;
  if (ascending) return { request_id: d.requestId, program_hash: d.programHash, positions: joined(d.pairs), verdicts: d.verdicts, cached: joined(d.cached) };
  const order = d.pairs.map((_, i) => i).sort((a, b) => d.pairs[a]! - d.pairs[b]!);
  const cached = new Set(d.cached);
  // A position recorded twice in one event keeps its last result.
  const at = new Map<number, number>();
  for (const i of order) at.set(d.pairs[i]!, i);
  const kept = [...at.values()];
  return {
    request_id: d.requestId,
    program_hash: d.programHash,
    positions: joined(kept.map((i) => d.pairs[i]!)),
    verdicts: kept.map((i) => d.verdicts[i]!).join(''),
    cached: joined(kept.flatMap((i, j) => (cached.has(i) ? [j] : []))),
  };
}

/** An older log's per-pair result, merged into its (request, program hash) row at its pair's
 * position; a result naming no pair of an announced request names nothing to show. */
function completedWrites(d: Completed, view: ReadView): RowWrite[] {
  const b = requestListsOf(view, d.requestId);
  if (b === undefined) return [];
  let position = -1;
  for (let i = 0; i < b.pairCount && position < 0; i++) {
    const pi = b.pairs[2 * i]!;
    const ti = b.pairs[2 * i + 1]!;
    const programId = b.programIds[pi];
    const programHash = b.programHash(pi);
    const testId = b.testIds[ti];
    const testHash = b.testHash(ti);
    if (programId === d.programId && programHash === d.programHash && testId === d.testId && testHash === d.testHash) position = i;
  }
  if (position < 0) return [];
  const key = { request_id: d.requestId, program_hash: d.programHash };
  const row = view.get(EXECUTIONS, key) as ExecutionsRow | undefined;
  const positions = row ? numbers(row.positions) : [];
  const letters = row ? row.verdicts.split('') : [];
  const cached = new Set(row ? numbers(row.cached).map((i) => positions[i]!) : []);
  let at = positions.findIndex((p) => p >= position);
  if (at < 0) at = positions.length;
  if (positions[at] === position) letters[at] = VERDICT_CODES[d.verdict];
  else {
    positions.splice(at, 0, position);
    letters.splice(at, 0, VERDICT_CODES[d.verdict]);
  }
  if (d.cached) cached.add(position);
  else cached.delete(position);
  const cachedAt = positions.flatMap((p, i) => (cached.has(p) ? [i] : []));
  return [put(EXECUTIONS, { ...key, positions: joined(positions), verdicts: letters.join(''), cached: joined(cachedAt) })];
}

export const executionsProjection: RowProjection = {
  name: 'executions',
  // 8: a request's lists packed, its test ids stored once per text (see request-lists.ts).
  version: 8,
  types: ['ExecutionRequested', 'ProgramExecuted', 'ExecutionCompleted'],
  tables: TABLES,
  apply: (e, view) => {
    if (e.type === 'ProgramExecuted') return [put(EXECUTIONS, executedRow(e.data as Executed) as unknown as Record<string, unknown>)];
    if (e.type === 'ExecutionRequested') return packRequest(e.data as Requested, view);
    return completedWrites(e.data as Completed, view);
  },
};

/** One recorded verdict, named by its pair. */
export interface ExecutionVerdict {
  requestId: string;
  programId: string;
  programHash: string;
  testId: string;
  testHash: string;
  verdict: Verdict;
  /** Copied from an earlier execution of the same program and test. */
  cached: boolean;
}

export class ExecutionsTableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ExecutionsTableError';
  }
}

/**
 * Every verdict in the executions read model of `db` (a read model built with
 * executionsProjection), by request id, then pair position; with `requestId`, that request's.
 * A row naming a position its request does not have is refused with the request and position.
 */
export function executionVerdicts(db: Database.Database, opts: { requestId?: string } = {}): ExecutionVerdict[] {
  let select = query.selectFrom(EXECUTIONS).select(['request_id', 'program_hash', 'positions', 'verdicts', 'cached']).orderBy('request_id');
  if (opts.requestId !== undefined) select = select.where('request_id', '=', opts.requestId);
  const rows = all(db, select);
  const getRequest = new TypedStatement(db, query.selectFrom(REQUESTS).selectAll().where('request_id', '=', ''));
  const getTests = new TypedStatement(db, query.selectFrom(REQUEST_TESTS).selectAll().where('test_ids', '=', ''));
  const view: ReadView = {
    get: (table, key) => (table === REQUESTS ? getRequest.first(key.request_id) : getTests.first(key.test_ids)),
  };
  let b: RequestLists | undefined;
  const out: (ExecutionVerdict & { at: number })[] = [];
  let request = '';
  let sorted = 0;
  const flushRequest = () => {
    const part = out.splice(sorted).sort((a, b) => a.at - b.at);
    out.push(...part);
    sorted = out.length;
  };
  for (const row of rows) {
    if (row.request_id !== request) {
      flushRequest();
      request = row.request_id;
    }
    if (b?.requestId !== row.request_id) b = requestListsOf(view, row.request_id);
    if (b === undefined)
      throw new ExecutionsTableError(`executions of ${row.request_id} (program ${row.program_hash.slice(0, 12)}): the request is not in ${REQUESTS}`);
    const lists = b;
    const positions = numbers(row.positions);
    if (positions.length !== row.verdicts.length) {
      throw new ExecutionsTableError(
        `executions of ${row.request_id} (program ${row.program_hash.slice(0, 12)}): ${positions.length} positions for ${row.verdicts.length} verdicts`,
      );
    }
    const cached = new Set(numbers(row.cached));
    positions.forEach((at, i) => {
      if (!(at >= 0 && at < lists.pairCount)) {
        throw new ExecutionsTableError(
          `executions of ${row.request_id} (program ${row.program_hash.slice(0, 12)}) name pair ${at}, but the request has ${lists.pairCount}`,
        );
      }
      const pi = lists.pairs[2 * at]!;
      const ti = lists.pairs[2 * at + 1]!;
      out.push({
        at,
        requestId: row.request_id,
        programId: lists.programIds[pi]!,
        programHash: lists.programHash(pi)!,
        testId: lists.testIds[ti]!,
        testHash: lists.testHash(ti)!,
        verdict: verdictOfCode(row.verdicts[i]!),
        cached: cached.has(i),
      });
    });
  }
  flushRequest();
  return out.map(({ at: _at, ...v }) => v);
}
