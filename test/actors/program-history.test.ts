/** Where programs' recorded results are in the log (the index the Judge and the Executor share):
 * its rows, what they answer across saves and restores, the bytes they take, and the results read
 * back from a log, with a clear error where the index and the log disagree. */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  HistoryReadError,
  ProgramHistory,
  decodeEntry,
  encodeEntry,
  entriesOfRows,
  fingerprintOf,
  PART_BYTES,
  readResults,
  resultsOf,
  type ProgramEntry,
} from '../../src/actors/program-history.js';
import { SqliteSnapshotTable, type SideReader } from '../../src/actors/snapshots.js';
import { requestBody } from '../../src/events/catalog.js';
import { compactResults } from '../../src/events/program-executed.js';
import { figures, foldingLog, h } from '../support/folding-log.js';

const ref = (actor: string, position: number) => ({ actor, position: position as never, hash: 'a'.repeat(64), version: 'v' });

let root: string;
beforeAll(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-program-history-'));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

function save(table: SqliteSnapshotTable, actor: string, history: ProgramHistory, position: number, reader?: (side: SideReader) => SideReader): void {
  table.save([{ ref: ref(actor, position), body: Buffer.from('{}'), side: history.sideRows() }]);
  const side = table.side(actor);
  history.sideSaved(reader ? reader(side) : side);
}

it('an entry encodes and decodes to the same load, positions and tests, SQLite-sized or JetStream-sized, with or without a request', () => {
  const tests = (...pairs: [number, number][]) => new Map(pairs);
  const cases: ProgramEntry[] = [
    { load: undefined, events: [], tests: tests() },
    { load: 'ran', events: [1, 0], tests: tests([fingerprintOf(h(7)), 0]) },
    { load: 'compile_error', events: [5, 2, 6, 2, 900, 899, 901, 0], tests: tests([0, 3], [2 ** 48 - 1, 1], [123_456_789, 2]) },
    // JetStream numbers events commit x 2^16 + index: large positions, large steps.
    { load: 'raised', events: [7 * 65_536 + 3, 7 * 65_536, 2 ** 30 * 65_536 + 1, 2 ** 30 * 65_536], tests: tests([fingerprintOf('f'.repeat(64)), 1]) },
    { load: 'unknown', events: [Number.MAX_SAFE_INTEGER, 1], tests: tests() },
  ];
  const roundTrip = (e: ProgramEntry) => {
    const { head, parts } = encodeEntry(e);
    return decodeEntry(head, parts);
  };
  for (const c of cases) expect(roundTrip(c)).toEqual(c);
  // The same tests in another order: the same bytes.
  const reordered = { ...cases[2]!, tests: new Map([...cases[2]!.tests].reverse()) };
  expect(encodeEntry(reordered)).toEqual(encodeEntry(cases[2]!));
  // The load, the count of sealed parts, where the open part goes on from (events before it, the
  // last one's position: 0 and 0 here), per event a record's header and two varints (one byte
  // each while the steps are small), 6 bytes a test.
  expect(encodeEntry({ load: 'ran', events: [100, 99, 101, 99], tests: tests([1, 0], [2, 1]) }).head).toHaveLength(1 + 1 + 2 + 2 * 3 + 2 * 6);
  expect(fingerprintOf('f'.repeat(52) + '0123456789ab')).toBe(0x0123456789ab);
  expect(() => decodeEntry(Buffer.of(9))).toThrow(/load code 9/);
  expect(() => decodeEntry(Buffer.of())).toThrow(/load code/);
  expect(() => decodeEntry(Buffer.of(0))).toThrow(/ends inside a number/);
  expect(() => decodeEntry(Buffer.of(0, 0, 0, 0, 3, 0x85))).toThrow(/ends inside a number/);
  expect(() => decodeEntry(Buffer.of(0, 0, 0, 0, 3, 5, 0, 1, 2))).toThrow(/inside a test's fingerprint/);
  expect(() => decodeEntry(Buffer.of(0, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6))).toThrow(/goes on with an event before it names one/);
  expect(() => decodeEntry(Buffer.of(0, 2, 0, 0), [Buffer.of(1, 5, 0)])).toThrow(/names 2 sealed parts, 1 given/);
  // A head whose open part goes on from somewhere its sealed parts do not end.
  const { head, parts } = encodeEntry({ load: 'ran', events: Array.from({ length: 300 }, (_, i) => [10 + 2 * i, 9 + 2 * i]).flat(), tests: tests() });
  expect(parts.length).toBeGreaterThan(0);
  const moved = Buffer.from(head);
  // The events before the open part (a varint after the load and the count of parts), one more.
  moved[2] = (moved[2]! & 0x80) | ((moved[2]! + 1) & 0x7f);
  expect(() => decodeEntry(moved, parts)).toThrow(/goes on from event \d+ at position \d+, where its sealed parts end at event/);
});

it("a program run on thousands of tests keeps rows under SQLite's in-page limit, and a save writes only its head and the parts sealed since", () => {
  const table = new SqliteSnapshotTable(path.join(root, 'parts.db'), 'run');
  try {
    const scope = 'p'.repeat(255);
    const history = new ProgramHistory(null);
    const written: number[] = [];
    let position = 1;
    let test = 0;
    for (let round = 0; round < 12; round++) {
      // The reference of a problem: run on every new suite, 8 requests of 64 tests a round.
      for (let r = 0; r < 8; r++) {
        position += 3;
        history.record(
          scope,
          h(1),
          position,
          position - 2,
          Array.from({ length: 64 }, () => h(10_000 + test++)),
        );
      }
      const rows = history.sideRows().rows;
      written.push(rows.reduce((n, [, v]) => n + v.length, 0));
      for (const [key, value] of rows) expect(key.length + value.length).toBeLessThan(1_000 - 20);
      save(table, 'judge', history, position);
    }
    // 512 tests a round, 6 bytes each: a save writes about a round's records, not the history.
    for (const bytes of written.slice(1)) expect(bytes).toBeLessThan(512 * 6 + 8 * 8 + 2 * PART_BYTES);
    const restored = new ProgramHistory(table.side('judge'));
    const entry = restored.entry(scope, h(1))!;
    expect(entry.events).toHaveLength(2 * 96);
    expect(entry.tests.size).toBe(12 * 512);
    expect(entry.tests.get(fingerprintOf(h(10_000 + 5_000)))).toBe(Math.floor(5_000 / 64));
    expect(restored.recorded()).toEqual(history.recorded());
    // Every part is there, in order, and one that is missing is named.
    const rows = [...table.side('judge').all()];
    expect(rows.length).toBeGreaterThan((12 * 512 * 6) / PART_BYTES);
    expect(entriesOfRows(rows).map((e) => e.entry)).toEqual([entry]);
    const db = new Database(path.join(root, 'parts.db'));
    // rows[0] is the scope's directory, then the program's parts in order, then its head.
    // The program's number is the position of its first event (4); its head is keyed as part 2^32 - 1.
    expect(Buffer.from(rows.at(-1)![0]).toString('hex')).toBe(`70${'000000000004'}ffffffff`);
    db.prepare('DELETE FROM side_rows WHERE key = ?').run(rows[3]![0]);
    db.close();
    expect(() => new ProgramHistory(table.side('judge')).entry(scope, h(1))).toThrow(/names \d+ parts, and part 2 is missing/);
  } finally {
    table.close();
  }
});

it('an entry saved, then changed, answers the same before and after a restore; load outcomes only get worse', () => {
  const table = new SqliteSnapshotTable(path.join(root, 'restore.db'), 'run');
  try {
    const history = new ProgramHistory(null);
    history.record('x', h(1), 10, 9, [h(100), h(101)]);
    history.recordLoad('x', h(1), 10, 'ran');
    history.record('y', h(1), 11, 0, [h(100)]);
    save(table, 'judge', history, 11);
    expect(history.heldEntries).toBe(0);
    // A later result of test 100: the test now points at the later event.
    history.record('x', h(1), 20, 18, [h(100), h(102)]);
    history.recordLoad('x', h(1), 20, 'raised');
    // The same event folded again (a retry of a fold) adds nothing.
    history.record('x', h(1), 20, 18, [h(103)]);
    save(table, 'judge', history, 20);
    const restored = new ProgramHistory(table.side('judge'));
    const f = (n: number) => fingerprintOf(h(n));
    for (const r of [history, restored]) {
      expect(r.entry('x', h(1))).toEqual({
        load: 'raised',
        events: [10, 9, 20, 18],
        tests: new Map([
          [f(100), 1],
          [f(101), 0],
          [f(102), 1],
        ]),
      });
      // Scopes are apart: the same program in another problem keeps its own entry.
      expect(r.entry('y', h(1))).toEqual({ load: undefined, events: [11, 0], tests: new Map([[f(100), 0]]) });
      expect(r.entry('x', h(2))).toBeUndefined();
      expect(r.load('y', h(1))).toBeUndefined();
    }
    restored.recordLoad('x', h(1), 30, 'ran');
    expect(restored.load('x', h(1))).toBe('raised');
    expect(restored.sideRows().rows).toEqual([]);
    expect(restored.recorded()).toEqual(history.recorded());
    expect(history.recorded().map(([k]) => k[0])).toEqual(['h', 'h']);
  } finally {
    table.close();
  }
});

it('a program without an entry is looked up once per snapshot interval, however often it is asked about', () => {
  const table = new SqliteSnapshotTable(path.join(root, 'lookups.db'), 'run');
  try {
    let gets = 0;
    const counting = (side: SideReader): SideReader => ({ ...side, get: (key) => (gets++, side.get(key)) });
    const history = new ProgramHistory(null);
    history.record('', h(1), 3, 2, [h(5)]);
    save(table, 'executor', history, 3, counting);
    for (let i = 0; i < 50; i++) expect(history.entry('', h(2))).toBeUndefined();
    for (let i = 0; i < 50; i++) expect(history.entry('', h(1))).toEqual({ load: undefined, events: [3, 2], tests: new Map([[fingerprintOf(h(5)), 0]]) });
    expect(gets).toBe(2);
    expect(history.heldEntries).toBe(2);
    save(table, 'executor', history, 4, counting);
    expect(history.heldEntries).toBe(0);
    history.entry('', h(2));
    expect(gets).toBe(3);
  } finally {
    table.close();
  }
});

it('the same events give the same rows whatever the snapshot points: processes sharing a snapshot file agree on every row', () => {
  const events = Array.from({ length: 240 }, (_, i) => {
    const position = 3 * i + 2;
    // One event records one program: the second is another event's. A scope of more than 53
    // programs seals a part of its directory.
    const touched = [{ scope: `problem-${i % 3}`, program: h(1 + ((i * 7919) % 97)), position }];
    if (i % 4 === 0) touched.push({ scope: 'problem-9', program: h(1 + ((i * 104_729) % 37)), position: position + 1 });
    return { position: position + 1, touched };
  });
  const rowsOf = (every: number) => {
    const table = new SqliteSnapshotTable(path.join(root, `agree-${every}.db`), 'run');
    try {
      const history = new ProgramHistory(null);
      events.forEach(({ position, touched }, i) => {
        for (const { scope, program, position } of touched) {
          history.recordLoad(scope, program, position, i % 5 === 0 ? 'raised' : 'ran');
          history.record(scope, program, position, i % 2 === 0 ? position - 1 : 0, [h(10_000 + ((i * 3) % 50)), h(10_000 + ((i * 3 + 1) % 50))]);
        }
        if ((i + 1) % every === 0 || i === events.length - 1) save(table, 'executor', history, position);
      });
      return [...table.side('executor').all()].map(([k, v]) => `${Buffer.from(k).toString('hex')}=${Buffer.from(v).toString('hex')}`);
    } finally {
      table.close();
    }
  };
  const once = rowsOf(240);
  expect(once.length).toBeGreaterThan(200);
  // A directory's sealed part: its key is the directory's with a part number.
  expect(once.some((row) => row.startsWith(`64${Buffer.from('\x09problem-0').toString('hex')}00000000=`))).toBe(true);
  for (const every of [1, 7, 13, 60]) expect(rowsOf(every)).toEqual(once);
});

it('the side rows take about 7 bytes per result: a fingerprint and an event number, not the result', () => {
  const file = path.join(root, 'bytes.db');
  const table = new SqliteSnapshotTable(file, 'bench-scale-s1-0123abcd');
  const problem = 'problem-0001';
  const programs = 64;
  const eventsEach = 10;
  const resultsEach = 64;
  try {
    const history = new ProgramHistory(null);
    let position = 0;
    for (let e = 0; e < eventsEach; e++) {
      const request = ++position;
      for (let p = 0; p < programs; p++) {
        const at = ++position;
        history.recordLoad(problem, h(1_000_000 + p * 7919), at, 'ran');
        history.record(
          problem,
          h(1_000_000 + p * 7919),
          at,
          request,
          Array.from({ length: resultsEach }, (_, t) => h(2_000_000 + (e * resultsEach + t) * 104_729)),
        );
      }
    }
    table.save([{ ref: ref('judge', position), body: Buffer.from('{}'), side: history.sideRows() }]);
  } finally {
    table.close();
  }
  const db = new Database(file, { readonly: true });
  const { rows, bytes } = db.prepare("SELECT (SELECT count(*) FROM side_rows) AS rows, SUM(pgsize) AS bytes FROM dbstat WHERE name = 'side_rows'").get() as {
    rows: number;
    bytes: number;
  };
  db.close();
  // A head and the parts its 10 x 64 fingerprints of 6 bytes fill; and the problem's directory,
  // 12 bytes a program (a sealed part of 53 and a head).
  expect(rows).toBe(programs * (1 + Math.floor((eventsEach * (resultsEach * 6 + 4)) / PART_BYTES)) + 2);
  // Per result recorded: about 7 bytes, against about 150 for a row per result.
  expect(bytes / (programs * eventsEach * resultsEach)).toBeLessThan(10);
});

it('reads results back from the log: the latest of each test, no sandbox errors, older per-pair events too', async () => {
  const { event, read } = foldingLog();
  const program = h(1);
  const pairs = [0, 1, 2].map((t) => ({ programId: 'p', programHash: program, testId: `t${t}`, testHash: h(100 + t) }));
  const r1 = await event('ExecutionRequested', { round: 1, problemId: 'x', requestId: '1/x/reward', purpose: 'reward', ...requestBody(pairs) });
  const e1 = await event(
    'ProgramExecuted',
    compactResults('1/x/reward', program, [0, 1, 2], [figures('accepted', 1), figures('sandbox_error', 2), figures('wrong_answer', 3)], 'ran'),
  );
  const r2 = await event('ExecutionRequested', { round: 2, problemId: 'x', requestId: '2/x/reward', purpose: 'reward', ...requestBody([pairs[2]!]) });
  const e2 = await event('ProgramExecuted', compactResults('2/x/reward', program, [0], [figures('time_limit', 9)], 'ran'));
  // A log written before results were compact: one ExecutionCompleted per pair, naming its test.
  const e3 = await event('ExecutionCompleted', {
    requestId: '3/x/reward',
    programId: 'p',
    programHash: program,
    testId: 't9',
    testHash: h(109),
    ...figures('runtime_error', 4),
  });
  const history = new ProgramHistory(null);
  history.record('', program, e1.position, r1.position, [h(100), h(102)]);
  history.record('', program, e2.position, r2.position, [h(102)]);
  history.record('', program, e3.position, 0, [h(109)]);
  const asked = [100, 101, 102, 109, 110].map((t) => ({ programHash: program, testHash: h(t) }));
  const results = (await resultsOf(history, '', asked, read)).byProgram.get(program)!;
  expect([...results.keys()].sort()).toEqual([h(100), h(102), h(109)]);
  expect(results.get(h(100))).toEqual(figures('accepted', 1));
  expect(results.get(h(102))).toEqual(figures('time_limit', 9));
  expect(results.get(h(109))).toEqual(figures('runtime_error', 4));
  // A test sharing a recorded test's fingerprint is not taken for it: its result is not recorded.
  const twin = 'f'.repeat(52) + h(100).slice(-12);
  expect((await resultsOf(history, '', [{ programHash: program, testHash: twin }], read)).has(program, twin)).toBe(false);

  // Where the index and the log disagree, the read says where, and what to do.
  const wrong = async (position: number, request: number, programHash = program) =>
    readResults([{ program: programHash, test: h(102), position, request }], read);
  await expect(wrong(e2.position + 1000, r2.position)).rejects.toThrow(HistoryReadError);
  await expect(wrong(e2.position + 1000, r2.position)).rejects.toThrow(/no event at position \d+.*delete the run's snapshot file/);
  await expect(wrong(e2.position, r1.position)).rejects.toThrow(/is not the request 2\/x\/reward/);
  await expect(wrong(r1.position, 0)).rejects.toThrow(/is a ExecutionRequested, not the results/);
  await expect(wrong(e2.position, r2.position, h(2))).rejects.toThrow(new RegExp(`holds results of program ${h(1)}, not of ${h(2)}`));
});

it('rows written together sit together: the rows of programs a later interval first recorded are keyed after every earlier row', () => {
  const table = new SqliteSnapshotTable(path.join(root, 'together.db'), 'run');
  try {
    const history = new ProgramHistory(null);
    let position = 0;
    const interval = (programs: number[], scopes: number) => {
      for (const p of programs) {
        position += 2;
        history.record(`problem-${p % scopes}`, h(7_000_000 + p * 104_729), position, position - 1, [h(1_000 + position)]);
      }
      const rows = history.sideRows().rows.map(([k]) => Buffer.from(k).toString('hex'));
      save(table, 'judge', history, position);
      return rows;
    };
    const first = interval(
      Array.from({ length: 40 }, (_, p) => p),
      8,
    );
    const savedKeys = [...table.side('judge').all()].map(([k]) => Buffer.from(k).toString('hex'));
    // The next interval: 40 new programs and 2 old ones run again.
    const second = interval([...Array.from({ length: 40 }, (_, p) => 100 + p), 3, 17], 8);
    const isProgram = (key: string) => key.startsWith('70');
    const newKeys = second.filter((k) => !savedKeys.includes(k));
    expect(newKeys).toHaveLength(40);
    const lastSaved = savedKeys.filter(isProgram).sort().at(-1)!;
    for (const key of newKeys) expect(isProgram(key) && key > lastSaved).toBe(true);
    // What else the second save rewrote: the old programs' heads and the 8 problems' directories.
    expect(second.filter((k) => savedKeys.includes(k))).toHaveLength(2 + 8);
    expect(first.filter(isProgram)).toHaveLength(40);
    const restored = new ProgramHistory(table.side('judge'));
    expect(restored.recorded()).toEqual(history.recorded());
    expect(restored.entry('problem-3', h(7_000_000 + 3 * 104_729))?.events).toHaveLength(4);
  } finally {
    table.close();
  }
});

it('programs of one problem sharing a fingerprint are told apart by their whole hash; a damaged directory row is refused, naming its scope', () => {
  const table = new SqliteSnapshotTable(path.join(root, 'twins.db'), 'run');
  try {
    // Two hashes with the same last 48 bits.
    const a = `${'a'.repeat(52)}${'0'.repeat(12)}`;
    const b = `${'b'.repeat(52)}${'0'.repeat(12)}`;
    const history = new ProgramHistory(null);
    history.record('x', a, 10, 9, [h(1)]);
    save(table, 'judge', history, 10);
    expect(history.entry('x', b)).toBeUndefined();
    history.record('x', b, 12, 11, [h(2)]);
    save(table, 'judge', history, 12);
    const restored = new ProgramHistory(table.side('judge'));
    expect(restored.entry('x', a)).toEqual({ load: undefined, events: [10, 9], tests: new Map([[fingerprintOf(h(1)), 0]]) });
    expect(restored.entry('x', b)).toEqual({ load: undefined, events: [12, 11], tests: new Map([[fingerprintOf(h(2)), 0]]) });
    // One event records one program: a second program numbered by the same event is refused.
    history.record('y', h(3), 20, 19, [h(2)]);
    expect(() => history.record('z', h(4), 20, 19, [h(2)])).toThrow(/position 20 cannot number it/);
    const db = new Database(path.join(root, 'twins.db'));
    db.prepare("UPDATE side_rows SET value = x'000102', sum = 0 WHERE key = x'640178'").run();
    db.close();
    // The checksum no longer matches: refused before it is decoded.
    expect(() => new ProgramHistory(table.side('judge')).entry('x', a)).toThrow(/is corrupt/);
    expect(() => entriesOfRows([[Buffer.from('640178', 'hex'), Buffer.of(0, 1, 2)]])).toThrow(
      /directory of scope "x" holds 2 bytes of records, not whole records of 12/,
    );
  } finally {
    table.close();
  }
});

it('appending to a program with a long history reads none of its parts, and a lookup keeps only the tests it asks about', () => {
  const table = new SqliteSnapshotTable(path.join(root, 'append.db'), 'run');
  try {
    const history = new ProgramHistory(null);
    let position = 1;
    let test = 0;
    // A request of the reference on 64 new tests.
    const request = () => {
      position += 3;
      history.record(
        'x',
        h(1),
        position,
        position - 2,
        Array.from({ length: 64 }, () => h(20_000 + test++)),
      );
    };
    for (let r = 0; r < 40; r++) request();
    let partsRead = 0;
    const counting = (side: SideReader): SideReader => ({ ...side, getMany: (keys) => ((partsRead += keys.length), side.getMany(keys)) });
    save(table, 'judge', history, position, counting);
    // A round of the reference on new tests, folded: its head is read, none of its 25 parts.
    for (let r = 0; r < 8; r++) request();
    expect(history.load('x', h(1))).toBeUndefined();
    expect(partsRead).toBe(0);
    // A lookup reads them, and keeps only the asked tests' places.
    const asked = new Set([fingerprintOf(h(20_000 + 5)), fingerprintOf(h(20_000 + 48 * 64 - 1)), fingerprintOf(h(1))]);
    const entry = history.entryOf('x', h(1), asked)!;
    expect(partsRead).toBeGreaterThan(20);
    expect([...entry.tests]).toEqual([
      [fingerprintOf(h(20_000 + 5)), 0],
      [fingerprintOf(h(20_000 + 48 * 64 - 1)), 47],
    ]);
    expect(entry.events).toHaveLength(2 * 48);
    save(table, 'judge', history, position);
    expect(new ProgramHistory(table.side('judge')).entry('x', h(1))).toEqual(history.entry('x', h(1)));
  } finally {
    table.close();
  }
});
