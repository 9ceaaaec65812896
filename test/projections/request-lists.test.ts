/** A request's lists, packed by packRequest, read back by requestListsOf as the event named them. */
import { describe, expect, it } from 'vitest';
import { EXECUTION_REQUESTS, packRequest, requestListsOf, REQUEST_TESTS, RequestListsError } from '../../src/projections/request-lists.js';
import type { ReadView, Row, RowWrite } from '../../src/projections/readmodel.js';
import type { EventData } from '../../src/events/catalog.js';

const hash = (c: string) => c.repeat(64);

/** Rows by table and key, as the runner's view shows the writes of earlier events. */
class Rows implements ReadView {
  readonly rows = new Map<string, Row>();
  static key = (table: string, key: Row) => `${table} ${table === REQUEST_TESTS ? String(key.test_ids) : String(key.request_id)}`;
  get(table: string, key: Row) {
    return this.rows.get(Rows.key(table, key));
  }
  apply(writes: RowWrite[]) {
    for (const w of writes) {
      if (w.op !== 'put') throw new Error(`unexpected ${w.op}`);
      this.rows.set(Rows.key(w.table, w.row), w.row);
    }
  }
}

const request = {
  round: 1,
  problemId: 'p',
  requestId: 'r',
  purpose: 'reward',
  programs: [
    { programId: 'a"quoted\\one', programHash: hash('a') },
    { programId: 'é\u2028\n', programHash: hash('b') },
  ],
  tests: [
    { testId: 't/0', testHash: hash('c') },
    { testId: '\u0001', testHash: hash('d') },
    { testId: 't/2', testHash: `${hash('e').slice(0, 62)}0f` },
  ],
  pairs: [0, 0, 1, 2, 1, 1],
  reused: [0, 1],
} as EventData<'ExecutionRequested'>;

describe('request lists', () => {
  it('read back as the event named them: ids that need escaping, hashes, pairs, reused pairs', () => {
    const rows = new Rows();
    rows.apply(packRequest(request, rows));
    const b = requestListsOf(rows, 'r')!;
    expect(b.programIds).toEqual(request.programs.map((p) => p.programId));
    expect([0, 1].map((i) => b.programHash(i))).toEqual(request.programs.map((p) => p.programHash));
    expect(b.testIds).toEqual(request.tests.map((t) => t.testId));
    expect([0, 1, 2].map((i) => b.testHash(i))).toEqual(request.tests.map((t) => t.testHash));
    expect(b.testHash(3)).toBeUndefined();
    expect(b.pairCount).toBe(3);
    expect([...b.pairs]).toEqual(request.pairs);
    expect([...b.reused]).toEqual([0, 1]);
    expect(requestListsOf(rows, 'other')).toBeUndefined();
  });

  it('keeps reused pairs of collected requests only', () => {
    const rows = new Rows();
    rows.apply(packRequest({ ...request, purpose: 'kill' }, rows));
    expect([...requestListsOf(rows, 'r')!.reused]).toEqual([]);
  });

  it('stores test ids once for the requests that name them, other ids beside them', () => {
    const rows = new Rows();
    rows.apply(packRequest(request, rows));
    // Other hashes under the same ids (a reward request beside its oracle request): one ids row.
    const tests = request.tests.map((t, i) => ({ ...t, testHash: hash(String(i)) }));
    const second = packRequest({ ...request, requestId: 'r2', purpose: 'heldout', tests }, rows);
    expect(second.map((w) => w.table)).toEqual([EXECUTION_REQUESTS]);
    rows.apply(second);
    const third = packRequest({ ...request, requestId: 'r3', tests: request.tests.slice(1), pairs: [0, 0] }, rows);
    expect(third.map((w) => w.table)).toEqual([REQUEST_TESTS, EXECUTION_REQUESTS]);
    rows.apply(third);
    expect(requestListsOf(rows, 'r2')!.testIds).toEqual(['t/0', '\u0001', 't/2']);
    expect(requestListsOf(rows, 'r2')!.testHash(2)).toBe(hash('2'));
    expect(requestListsOf(rows, 'r')!.testHash(2)).toBe(request.tests[2]!.testHash);
    expect(requestListsOf(rows, 'r3')!.testIds).toEqual(['\u0001', 't/2']);
    expect(requestListsOf(rows, 'r3')!.testHash(1)).toBe(request.tests[2]!.testHash);
    // The same data, the same rows.
    expect(packRequest(request, new Rows())).toEqual(packRequest(request, new Rows()));
  });

  it('refuses a request whose test ids are missing, naming both', () => {
    const rows = new Rows();
    rows.apply(packRequest(request, rows).filter((w) => w.table === EXECUTION_REQUESTS));
    expect(() => requestListsOf(rows, 'r')).toThrow(RequestListsError);
    expect(() => requestListsOf(rows, 'r')).toThrow(/request r names test ids [0-9a-f]{32}, which are not in request_test_ids/);
  });
});
