/**
 * Compact execution records (ProgramExecuted) and the per-pair records of older logs
 * (ExecutionCompleted v1, with ExecutionRequested v1 listing every pair) stand for the same verdicts: the same request answers, the same
 * executions table after a replay into the run's read models (real SQLite log and read model).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catalog, makeEvent, requestBody, requestPairs, reusedPairs, type EventData } from '../../src/events/catalog.js';
import type { EventEnvelope, NewEvent } from '../../src/events/envelope.js';
import { MalformedEventError } from '../../src/events/errors.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import { dataText } from '../../src/events/sqlite/stored-data.js';
import { ProjectionRunner } from '../../src/projections/runner.js';
import { RUN_PROJECTIONS } from '../../src/projections/run-views.js';
import { allPairResults, emptyRecordedVerdicts, observeVerdicts, verdictsOf } from '../../src/projections/recorded-verdicts.js';
import { compactResults, expandResults, type PairResult } from '../../src/events/program-executed.js';

const H = (c: string) => c.repeat(64);
const P0 = H('a');
const P1 = H('b');
const T = [H('c'), H('d'), H('e')];
const pair = (programId: string, programHash: string, testId: string, testHash: string) => ({ programId, programHash, testId, testHash });

// Round 1: two programs (s0 = P0, s1 = P1) on three tests, one sandbox error, one cached result; round 2 reuses the recorded verdicts and executes one new pair.
const reward1 = [
  pair('1/p/s0', P0, 'g/0', T[0]!),
  pair('1/p/s1', P1, 'g/0', T[0]!),
  pair('1/p/s0', P0, 'g/1', T[1]!),
  pair('1/p/s1', P1, 'g/1', T[1]!),
  pair('1/p/s0', P0, 'g/2', T[2]!),
];
const figures = (verdict: PairResult['verdict'], extra: Partial<PairResult> = {}) => ({
  verdict,
  timeMs: 1.25,
  memoryKb: 9000,
  outputHash: null,
  exceptionType: null,
  isolated: true,
  cached: false,
  ...extra,
});
const results1 = [
  figures('accepted', { outputHash: H('f') }),
  figures('runtime_error', { exceptionType: 'ValueError' }),
  figures('wrong_answer'),
  figures('accepted', { cached: true }),
  figures('sandbox_error'),
];
const reward2 = [pair('2/p/s0', P1, 'g/2', T[2]!)];
const reused2 = [pair('2/p/s1', P0, 'g/0', T[0]!), pair('2/p/s0', P1, 'g/1', T[1]!)];
const results2 = [figures('time_limit')];

const requested = (round: number, pairs: typeof reward1, reused: typeof reward1 = []) =>
  makeEvent('ExecutionRequested', 'run', { round, problemId: 'p', requestId: `${round}/p/reward`, purpose: 'reward', ...requestBody(pairs, reused) });

/** The same results as one compact event per program hash (in request order). */
function compactLog(): NewEvent[][] {
  const commits: NewEvent[][] = [];
  for (const [round, pairs, results, reused] of [
    [1, reward1, results1, []],
    [2, reward2, results2, reused2],
  ] as const) {
    const byProgram = new Map<string, number[]>();
    pairs.forEach((p, i) => byProgram.set(p.programHash, [...(byProgram.get(p.programHash) ?? []), i]));
    commits.push([requested(round, [...pairs], [...reused])]);
    commits.push(
      [...byProgram].map(([hash, at]) =>
        makeEvent(
          'ProgramExecuted',
          'run',
          compactResults(
            `${round}/p/reward`,
            hash,
            at,
            at.map((i) => results[i]!),
            'ran',
          ),
        ),
      ),
    );
  }
  return commits;
}

/** The same results as an older log wrote them: one ExecutionCompleted v1 per pair. */
function perPairLog(): NewEvent[][] {
  const commits: NewEvent[][] = [];
  for (const [round, pairs, results, reused] of [
    [1, reward1, results1, []],
    [2, reward2, results2, reused2],
  ] as const) {
    commits.push([requested(round, [...pairs], [...reused])]);
    commits.push(pairs.map((p, i) => makeEvent('ExecutionCompleted', 'run', { requestId: `${round}/p/reward`, ...p, ...results[i]! })));
  }
  return commits;
}

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'crucible-verdicts-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Rewrites the log's requests as an older crucible stored them: ExecutionRequested v1 (every
 * pair in full), rows without checksums. */
function storeRequestsAsV1(file: string): void {
  const db = new Database(file);
  const rows = db.prepare(`SELECT position, data FROM events WHERE type = 'ExecutionRequested'`).all() as { position: number; data: string | Buffer }[];
  for (const r of rows) {
    // Stored packed at the current version: read back as data first.
    const d = catalog.fromStored('ExecutionRequested', JSON.parse(dataText(r.data)), {}) as EventData<'ExecutionRequested'>;
    const { programs: _p, tests: _t, pairs: _pairs, reused: _reused, ...rest } = d;
    const v1 = { ...rest, pairs: requestPairs(d), reused: reusedPairs(d) };
    db.prepare('UPDATE events SET v = 1, sum = NULL, data = ? WHERE position = ?').run(JSON.stringify(v1), r.position);
  }
  db.close();
}

async function replay(name: string, commits: NewEvent[][], v1 = false) {
  const file = join(dir, `${name}.db`);
  const writer = await openSqliteLog(file);
  for (const [i, events] of commits.entries()) await writer.append('executor/0', events, { commitId: `${name}-${i}` });
  await writer.close();
  if (v1) storeRequestsAsV1(file);
  const log = await openSqliteLog(file, { create: false });
  const stored: EventEnvelope[] = [];
  for await (const e of log.read()) stored.push(e);
  const runner = await ProjectionRunner.replayInto(join(dir, `${name}-rm.db`), { log, projections: RUN_PROJECTIONS });
  await runner.close();
  await log.close();
  const db = new Database(join(dir, `${name}-rm.db`), { readonly: true });
  // Answer selection keeps one verdict letter per pair of a request, whichever shape recorded it.
  const letters = db.prepare('SELECT request_id, codes, extra FROM answer_selection_requests ORDER BY request_id').all();
  db.close();
  let state = emptyRecordedVerdicts();
  for (const e of stored) state = observeVerdicts(state, e, () => true);
  return { stored, letters, answers: ['1/p/reward', '2/p/reward'].map((id) => verdictsOf(state, id)) };
}

describe('compact execution records', () => {
  it('expandResults inverts compactResults', () => {
    const d = compactResults('1/p/reward', P0, [0, 2, 4], [results1[0]!, results1[2]!, results1[4]!], 'raised');
    expect(d.verdicts).toBe('AWS');
    expect(d.outputs).toEqual({ 0: H('f') });
    const back = expandResults(reward1, makeEvent('ProgramExecuted', 'run', d).data);
    expect(back).toEqual([0, 2, 4].map((i) => ({ requestId: '1/p/reward', ...reward1[i]!, ...results1[i]! })));
  });

  it('a compact log and an older per-pair log replay to the same verdicts and answer selection letters', async () => {
    const compact = await replay('compact', compactLog());
    const old = await replay('per-pair', perPairLog(), true);
    expect(compact.stored.filter((e) => e.type === 'ProgramExecuted')).toHaveLength(3);
    expect(old.stored.filter((e) => e.type === 'ExecutionCompleted')).toHaveLength(6);
    // The v1 requests were upcast on read to the current form.
    const requests = (events: EventEnvelope[]) => events.filter((e) => e.type === 'ExecutionRequested').map((e) => [e.v, e.data]);
    expect(requests(old.stored)).toEqual(requests(compact.stored));
    expect(compact.answers).toEqual(old.answers);
    expect(compact.letters).toEqual([
      { request_id: '1/p/reward', codes: 'ARWAS', extra: null },
      { request_id: '2/p/reward', codes: 'T', extra: null },
    ]);
    expect(old.letters).toEqual(compact.letters);
    // Round 2: its executed pair, then the reused ones answered from round 1 (not the sandbox error).
    expect(compact.answers[1]!.map((v) => [v.programId, v.testId, v.verdict, v.reused])).toEqual([
      ['2/p/s0', 'g/2', 'time_limit', false],
      ['2/p/s1', 'g/0', 'accepted', true],
      ['2/p/s0', 'g/1', 'accepted', true],
    ]);
    const flat = (events: EventEnvelope[]) =>
      allPairResults(events)
        .map(({ requestId, programId, testId, verdict, exceptionType, outputHash, cached }) => ({
          requestId,
          programId,
          testId,
          verdict,
          exceptionType,
          outputHash,
          cached,
        }))
        .sort((a, b) => `${a.requestId} ${a.programId} ${a.testId}`.localeCompare(`${b.requestId} ${b.programId} ${b.testId}`));
    // Log order differs (grouped by program), the results do not.
    expect(flat(compact.stored)).toEqual(flat(old.stored));
    expect(flat(compact.stored).map((r) => [r.requestId, r.programId, r.testId, r.verdict, r.cached])).toEqual([
      ['1/p/reward', '1/p/s0', 'g/0', 'accepted', false],
      ['1/p/reward', '1/p/s0', 'g/1', 'wrong_answer', false],
      ['1/p/reward', '1/p/s0', 'g/2', 'sandbox_error', false],
      ['1/p/reward', '1/p/s1', 'g/0', 'runtime_error', false],
      ['1/p/reward', '1/p/s1', 'g/1', 'accepted', true],
      ['2/p/reward', '2/p/s0', 'g/2', 'time_limit', false],
    ]);
  });

  it('refuses a compact record whose arrays disagree, naming the field', () => {
    const d: EventData<'ProgramExecuted'> = compactResults('q', P0, [0, 1], [results1[0]!, results1[1]!], 'ran');
    let err: unknown;
    try {
      makeEvent('ProgramExecuted', 'run', { ...d, timeMs: [1], cached: [5] });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(MalformedEventError);
    expect(String((err as Error).message)).toMatch(/timeMs.*1 entries for 2 pairs/);
    expect(String((err as Error).message)).toMatch(/result index 5/);
    expect(() => makeEvent('ProgramExecuted', 'run', { ...d, verdicts: 'AX' })).toThrow(/verdict letter/);
  });
});
