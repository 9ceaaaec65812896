/** A request's lists, packed by packRequest, read back by requestListsOf as the event named them. */
import { describe, expect, it } from 'vitest';
import { packRequest, REQUEST_LISTS, requestListsOf, RequestListsError, TEST_HASHES, TEST_IDS } from '../../src/projections/request-lists.js';
import type { ReadView, Row, RowWrite } from '../../src/projections/readmodel.js';
import type { EventData } from '../../src/events/catalog.js';

const hash = (c: string) => c.repeat(64);
const putRow = (w: RowWrite) => (w as Extract<RowWrite, { op: 'put' }>).row;

/** Rows by table and key, as the runner's view shows the writes of earlier events. */
class Rows implements ReadView {
  readonly rows = new Map<string, Row>();
  static key = (table: string, key: Row) => `${table} ${table === REQUEST_LISTS ? String(key.request_id) : String(key.key)}`;
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

  it('stores pairs as runs of one program on consecutive tests, in any order', () => {
    const rows = new Rows();
    const tests = Array.from({ length: 300 }, (_, i) => ({ testId: `t/${i}`, testHash: hash(String(i % 10)) }));
    // Two programs on every test: two runs of 12 bytes, not 600 pairs of 8.
    const every = [0, 1].flatMap((p) => tests.flatMap((_, t) => [p, t]));
    const writes = packRequest({ ...request, tests, pairs: every, reused: [] }, rows);
    rows.apply(writes);
    expect((putRow(writes.find((w) => w.table === REQUEST_LISTS)!).pairs as Buffer).length).toBe(24);
    expect([...requestListsOf(rows, 'r')!.pairs]).toEqual(every);
    // Pairs out of order, repeated, and a run broken by another program: read back as given.
    const scattered = [1, 5, 1, 6, 0, 7, 1, 7, 1, 7, 0, 0, 1, 299, 0, 298, 0, 299];
    rows.apply(packRequest({ ...request, requestId: 's', tests, pairs: scattered, reused: [1, 2, 1, 3, 0, 2] }, rows));
    expect([...requestListsOf(rows, 's')!.pairs]).toEqual(scattered);
    expect([...requestListsOf(rows, 's')!.reused]).toEqual([1, 2, 1, 3, 0, 2]);
  });

  it('stores test ids once for the requests that name them, other ids beside them', () => {
    const rows = new Rows();
    rows.apply(packRequest(request, rows));
    // Other hashes under the same ids (a reward request beside its oracle request): one ids row.
    const tests = request.tests.map((t, i) => ({ ...t, testHash: hash(String(i)) }));
    const second = packRequest({ ...request, requestId: 'r2', purpose: 'heldout', tests }, rows);
    expect(second.map((w) => w.table)).toEqual([TEST_HASHES, REQUEST_LISTS]);
    rows.apply(second);
    const third = packRequest({ ...request, requestId: 'r3', tests: request.tests.slice(1), pairs: [0, 0] }, rows);
    expect(third.map((w) => w.table)).toEqual([TEST_IDS, TEST_HASHES, REQUEST_LISTS]);
    rows.apply(third);
    // The same ids and hashes (a kill request beside its oracle request): no test list written again.
    const fourth = packRequest({ ...request, requestId: 'r4', purpose: 'kill' }, rows);
    expect(fourth.map((w) => w.table)).toEqual([REQUEST_LISTS]);
    rows.apply(fourth);
    expect(requestListsOf(rows, 'r4')!.testHash(2)).toBe(request.tests[2]!.testHash);
    expect(requestListsOf(rows, 'r2')!.testIds).toEqual(['t/0', '\u0001', 't/2']);
    expect(requestListsOf(rows, 'r2')!.testHash(2)).toBe(hash('2'));
    expect(requestListsOf(rows, 'r')!.testHash(2)).toBe(request.tests[2]!.testHash);
    expect(requestListsOf(rows, 'r3')!.testIds).toEqual(['\u0001', 't/2']);
    expect(requestListsOf(rows, 'r3')!.testHash(1)).toBe(request.tests[2]!.testHash);
    // The same data, the same rows.
    expect(packRequest(request, new Rows())).toEqual(packRequest(request, new Rows()));
  });

  it('stores test ids packed: ids that count up as runs, read back as named, marker-like ids included', () => {
    const rows = new Rows();
    // A Code-A1 request's tests: 2 suites of 4 test sets of 8 cases, ids counting up within each set.
    const tests = Array.from({ length: 64 }, (_, i) => ({ testId: `1/p0003/s${i >> 5}/t${(i >> 3) & 3}/${i & 7}`, testHash: hash(String(i % 10)) }));
    const writes = packRequest({ ...request, tests, pairs: [0, 0], reused: [] }, rows);
    rows.apply(writes);
    const stored = putRow(writes.find((w) => w.table === TEST_IDS)!).ids as string;
    expect(stored.length * 4).toBeLessThan(JSON.stringify(tests.map((t) => t.testId)).length);
    expect(requestListsOf(rows, 'r')!.testIds).toEqual(tests.map((t) => t.testId));
    // Ids that are not counted, and ids spelled like the packed form's markers, come back as given.
    const odd = ['~s', '{"~s":[]}', '~o', 'x/1', 'x/1', '', '\u0000'].map((testId, i) => ({ testId, testHash: hash(String(i)) }));
    rows.apply(packRequest({ ...request, requestId: 'odd', tests: odd, pairs: [0, 6], reused: [] }, rows));
    expect(requestListsOf(rows, 'odd')!.testIds).toEqual(odd.map((t) => t.testId));
  });

  it('refuses a stored test id list that is not a list of strings', () => {
    const rows = new Rows();
    const writes = packRequest(request, rows);
    rows.apply(writes.map((w) => (w.table === TEST_IDS ? ({ ...w, row: { ...putRow(w), ids: '{"~k":1,"~n":3}' } } as RowWrite) : w)));
    expect(() => requestListsOf(rows, 'r')).toThrow(/request r: its test ids are not a list of strings/);
  });

  it('refuses a request whose test lists are missing or whose pairs are cut, naming what', () => {
    const rows = new Rows();
    const writes = packRequest(request, rows);
    rows.apply(writes.filter((w) => w.table === REQUEST_LISTS));
    expect(() => requestListsOf(rows, 'r')).toThrow(RequestListsError);
    expect(() => requestListsOf(rows, 'r')).toThrow(/request r names test ids [0-9a-f]{32}, which are not in answer_selection_test_ids/);
    rows.apply(writes.filter((w) => w.table === TEST_IDS));
    expect(() => requestListsOf(rows, 'r')).toThrow(/request r names test hashes [0-9a-f]{32}, which are not in answer_selection_test_hashes/);
    rows.apply(writes.filter((w) => w.table === TEST_HASHES));
    const lists = putRow(writes.find((w) => w.table === REQUEST_LISTS)!);
    rows.apply([{ ...writes.at(-1)!, row: { ...lists, pairs: (lists.pairs as Buffer).subarray(0, 20) } } as RowWrite]);
    expect(() => requestListsOf(rows, 'r')).toThrow(/request r: its pairs take 20 bytes, not a whole number of runs/);
  });
});
