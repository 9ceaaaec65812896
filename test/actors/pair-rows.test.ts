/** Recorded results by pair (the mechanism the Judge's index and the Executor's cache share): what
 * a pair answers across saves and restores, how often the side rows are probed, and the bytes a
 * side row takes in the snapshot file. */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PairRows, decodeFigures, encodeFigures } from '../../src/actors/pair-rows.js';
import { SqliteSnapshotTable, type SideReader } from '../../src/actors/snapshots.js';
import type { ResultFigures } from '../../src/events/program-executed.js';

const h = (n: number) => n.toString(16).padStart(64, '0');
const figures = (verdict: ResultFigures['verdict'], timeMs: number, more: Partial<ResultFigures> = {}): ResultFigures => ({
  verdict,
  timeMs,
  memoryKb: 10,
  outputHash: null,
  exceptionType: null,
  isolated: true,
  cached: false,
  ...more,
});
const ref = (actor: string, position: number) => ({ actor, position: position as never, hash: 'a'.repeat(64), version: 'v' });

let root: string;
beforeAll(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-pair-rows-'));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** What a counting reader was asked: point reads of results and load outcomes, batches and the
 * keys in them, lookups of a program's number ('i' rows). */
const noneAsked = () => ({ gets: 0, batches: 0, batched: 0, probes: 0 });

/** The table's own reader, counting what it is asked into `asked`. */
function counting(side: SideReader, asked: ReturnType<typeof noneAsked>): SideReader {
  return {
    get: (key) => (key[0] === 0x69 ? asked.probes++ : asked.gets++, side.get(key)),
    getMany: (keys) => (asked.batches++, (asked.batched += keys.length), side.getMany(keys)),
    all: () => side.all(),
  };
}

/** Saves the rows' unsaved part as a snapshot of `actor` would, then reads them from the table. */
function save(table: SqliteSnapshotTable, actor: string, rows: PairRows<ResultFigures>, position: number): void {
  table.save([{ ref: ref(actor, position), body: Buffer.from('{}'), side: rows.sideRows() }]);
  rows.sideSaved(table.side(actor));
}

it('a result encodes and decodes to the same figures, whole numbers or not, with or without output and exception', () => {
  const cases: ResultFigures[] = [
    figures('accepted', 0, { memoryKb: 0 }),
    figures('wrong_answer', 12.345, { memoryKb: 2 ** 40 + 3, outputHash: h(77), isolated: false, cached: true }),
    figures('runtime_error', 2 ** 53 - 1, { exceptionType: 'ZeroDivisionError' }),
    figures('runtime_error', 127, { memoryKb: 128, exceptionType: '' }),
    figures('time_limit', 1e-9, { memoryKb: 0.5, exceptionType: 'Ünïcode', outputHash: h(1) }),
  ];
  for (const c of cases) expect(decodeFigures(encodeFigures(c))).toEqual(c);
  // A hash that is not 64 hex characters has no 32-byte form: refused, never stored cut short.
  expect(() => encodeFigures(figures('accepted', 1, { outputHash: 'abc' }))).toThrow(/not a sha256/);
});

it('a pair saved, then replaced by a later result, answers the later one, before and after a restore', () => {
  const table = new SqliteSnapshotTable(path.join(root, 'replace.db'), 'run');
  try {
    const rows = new PairRows<ResultFigures>(null, (r) => r);
    rows.record(1, 'x', h(1), h(10), figures('accepted', 1));
    rows.record(1, 'x', h(1), h(11), figures('wrong_answer', 2));
    rows.record(2, 'y', h(1), h(10), figures('runtime_error', 3, { exceptionType: 'KeyError' }));
    rows.recordLoad(2, 'x', h(1), 'ran');
    save(table, 'judge', rows, 1);
    expect(rows.heldEntries).toBe(0);
    // Replaced twice in the next interval: the last one is the row.
    rows.record(3, 'x', h(1), h(10), figures('time_limit', 4));
    rows.record(4, 'x', h(1), h(10), figures('memory_limit', 5, { outputHash: h(9) }));
    rows.recordLoad(4, 'x', h(1), 'raised');
    expect(rows.get('x', h(1), h(10))).toMatchObject({ verdict: 'memory_limit', timeMs: 5 });
    save(table, 'judge', rows, 2);
    const restored = new PairRows<ResultFigures>(table.side('judge'), (r) => r);
    for (const r of [rows, restored]) {
      expect(r.get('x', h(1), h(10))).toEqual(figures('memory_limit', 5, { outputHash: h(9) }));
      expect(r.get('x', h(1), h(11))).toEqual(figures('wrong_answer', 2));
      // Scopes are apart: the same pair in another problem keeps its own result.
      expect(r.get('y', h(1), h(10))).toEqual(figures('runtime_error', 3, { exceptionType: 'KeyError' }));
      expect(r.has('y', h(1), h(11))).toBe(false);
      expect(r.load('x', h(1))).toBe('raised');
      expect(r.load('y', h(1))).toBeUndefined();
    }
    // Load outcomes only get worse by rank (see mergeLoad), saved or not.
    restored.recordLoad(5, 'x', h(1), 'ran');
    expect(restored.load('x', h(1))).toBe('raised');
    expect(restored.sideRows().rows).toEqual([]);
    expect(restored.recorded()).toEqual(rows.recorded());
  } finally {
    table.close();
  }
});

it('a program with no rows is probed once per snapshot interval, however many of its pairs are asked about', () => {
  const table = new SqliteSnapshotTable(path.join(root, 'probe.db'), 'run');
  try {
    const asked = noneAsked();
    const counted = (side: SideReader) => counting(side, asked);
    // Lookups of a program's number, and rows read (one by one or in a batch).
    const seen = () => [asked.probes, asked.gets + asked.batched];
    const rows = new PairRows<ResultFigures>(null, (r) => r);
    rows.record(1, '', h(1), h(10), figures('accepted', 1));
    table.save([{ ref: ref('executor', 1), body: Buffer.from('{}'), side: rows.sideRows() }]);
    rows.sideSaved(counted(table.side('executor')));
    // A fresh program: one lookup (it has no number) answers all of its pairs, no point read.
    for (let t = 0; t < 50; t++) expect(rows.get('', h(2), h(100 + t))).toBeUndefined();
    expect(seen()).toEqual([1, 0]);
    // A program with rows: its number once, then a point read per pair asked about.
    expect(rows.get('', h(1), h(10))).toMatchObject({ verdict: 'accepted' });
    expect(rows.has('', h(1), h(11))).toBe(false);
    expect(seen()).toEqual([2, 2]);
    expect(rows.heldEntries).toBe(2);
    // Its results recorded since, then saved: the next interval looks it up again (the rows changed).
    rows.record(2, '', h(2), h(100), figures('wrong_answer', 2));
    table.save([{ ref: ref('executor', 2), body: Buffer.from('{}'), side: rows.sideRows() }]);
    rows.sideSaved(counted(table.side('executor')));
    expect(rows.heldEntries).toBe(0);
    expect(rows.get('', h(2), h(100))).toMatchObject({ verdict: 'wrong_answer' });
    expect(rows.get('', h(2), h(101))).toBeUndefined();
    expect(asked.probes).toBe(3);
  } finally {
    table.close();
  }
});

it('the pairs of a plan, prefetched, are read in one batch and answer as point reads do', () => {
  const table = new SqliteSnapshotTable(path.join(root, 'prefetch.db'), 'run');
  try {
    const asked = noneAsked();
    const counted = (side: SideReader) => counting(side, asked);
    // A reference (h(1)) and a known-incorrect program (h(2)) with history, a fresh program (h(3)).
    const rows = new PairRows<ResultFigures>(null, (r) => r);
    for (let t = 0; t < 100; t++) rows.record(1, 'problem', h(1), h(t), figures('accepted', t));
    rows.record(2, 'problem', h(2), h(5), figures('wrong_answer', 5));
    save(table, 'judge', rows, 1);
    rows.sideSaved(counted(table.side('judge')));
    // Folded since the save: answered from memory, not asked of the rows.
    rows.record(3, 'problem', h(2), h(6), figures('runtime_error', 6, { exceptionType: 'KeyError' }));
    const plan = [1, 2, 3].flatMap((p) => Array.from({ length: 200 }, (_, t) => ({ programHash: h(p), testHash: h(t) })));
    const answers = (r: PairRows<ResultFigures>) =>
      plan.map((p) => [r.has('problem', p.programHash, p.testHash), r.get('problem', p.programHash, p.testHash) ?? null]);
    rows.prefetch('problem', plan);
    expect(asked.batches).toBe(1);
    const batched = answers(rows);
    // Every answer from the batch or memory: no point read.
    expect(asked.gets).toBe(0);
    const pointRead = new PairRows<ResultFigures>(table.side('judge'), (r) => r);
    pointRead.record(3, 'problem', h(2), h(6), figures('runtime_error', 6, { exceptionType: 'KeyError' }));
    expect(batched).toEqual(answers(pointRead));
    expect(batched.filter(([has]) => has)).toHaveLength(102);
    // The next prefetch replaces the batch: pairs outside it are read one by one again.
    rows.prefetch('problem', [{ programHash: h(1), testHash: h(0) }]);
    expect(rows.get('problem', h(1), h(1))).toMatchObject({ timeMs: 1 });
    expect(asked.gets).toBe(1);
    // A save drops the batch: a pair saved since answers from the new rows.
    rows.prefetch('problem', [{ programHash: h(2), testHash: h(7) }]);
    rows.record(4, 'problem', h(2), h(7), figures('accepted', 7));
    save(table, 'judge', rows, 2);
    expect(rows.get('problem', h(2), h(7))).toMatchObject({ verdict: 'accepted', timeMs: 7 });
  } finally {
    table.close();
  }
});

it("a save's results of programs saved for the first time sort after every row saved before: the table appends them", () => {
  const table = new SqliteSnapshotTable(path.join(root, 'append.db'), 'run');
  try {
    const rows = new PairRows<ResultFigures>(null, (r) => r);
    const pairKeys = (side: { rows: readonly (readonly [Uint8Array, Uint8Array])[] }) => side.rows.map(([k]) => Buffer.from(k)).filter((k) => k[0] === 0x71);
    const number = (k: Buffer) => k.readUInt32BE(1) * 2 ** 32 + k.readUInt32BE(5);
    let before: Buffer[] = [];
    let position = 0;
    // Test hashes in no order too.
    const testOf = (save: number, p: number, t: number) => h(1000 + (((save * 64 + p * 8 + t) * 7919) % 99_991));
    for (let save = 0; save < 4; save++) {
      // A problem's reference (h(0)), first recorded at position 1, run on each save's new test;
      // eight programs sampled per save, hashes in no order.
      rows.record(++position, 's', h(0), h(5000 + save), figures('wrong_answer', 1));
      for (let p = 0; p < 8; p++) {
        position++;
        for (let t = 0; t < 8; t++) rows.record(position, 's', h(1 + ((p * 7919 + save * 104_729) % 999_983)), testOf(save, p, t), figures('accepted', t));
      }
      const side = rows.sideRows();
      const keys = pairKeys(side);
      // In key order as given: the table inserts them one after another.
      expect(keys).toEqual([...keys].sort(Buffer.compare));
      const fresh = keys.filter((k) => number(k) !== 1 * 2 ** 16);
      expect(fresh).toHaveLength(64);
      for (const k of fresh) for (const b of before) expect(Buffer.compare(k, b)).toBe(1);
      before = keys;
      table.save([{ ref: ref('judge', position), body: Buffer.from('{}'), side }]);
      rows.sideSaved(table.side('judge'));
    }
    // Read back by hash after a restore: a program keeps its number, a new one is numbered by its event.
    const restored = new PairRows<ResultFigures>(table.side('judge'), (r) => r);
    expect(restored.get('s', h(0), h(5003))).toMatchObject({ verdict: 'wrong_answer' });
    expect(restored.get('s', h(1 + ((3 * 7919 + 2 * 104_729) % 999_983)), testOf(2, 3, 5))).toMatchObject({ timeMs: 5 });
    restored.record(100, 's', h(0), h(1), figures('accepted', 1));
    restored.record(101, 's', h(424_242), h(1), figures('accepted', 1));
    expect(pairKeys(restored.sideRows()).map(number)).toEqual([1 * 2 ** 16, 101 * 2 ** 16]);
  } finally {
    table.close();
  }
});

it('the same events give the same rows whatever the snapshot points: processes sharing a snapshot file agree on every key', () => {
  // Events in log order: each touches one or two (scope, program)s, programs come back in later
  // events, hashes in no order.
  const events = Array.from({ length: 60 }, (_, i) => {
    const position = 3 * i + 1;
    const touched = [{ scope: `problem-${i % 3}`, program: h(1 + ((i * 7919) % 31)) }];
    if (i % 4 === 0) touched.push({ scope: 'problem-9', program: h(1 + ((i * 104_729) % 37)) });
    return { position, touched };
  });
  const rowsOf = (every: number) => {
    const table = new SqliteSnapshotTable(path.join(root, `agree-${every}.db`), 'run');
    try {
      const rows = new PairRows<ResultFigures>(null, (r) => r);
      events.forEach(({ position, touched }, i) => {
        for (const { scope, program } of touched) {
          rows.recordLoad(position, scope, program, i % 5 === 0 ? 'raised' : 'ran');
          for (let t = 0; t < 3; t++) rows.record(position, scope, program, h(10_000 + ((i * 3 + t) % 50)), figures('accepted', i));
        }
        if ((i + 1) % every === 0 || i === events.length - 1) save(table, 'executor', rows, position);
      });
      return [...table.side('executor').all()].map(([k, v]) => `${Buffer.from(k).toString('hex')}=${Buffer.from(v).toString('hex')}`);
    } finally {
      table.close();
    }
  };
  const once = rowsOf(60);
  expect(once.length).toBeGreaterThan(100);
  for (const every of [1, 7, 13]) expect(rowsOf(every)).toEqual(once);
});

it('a side row takes fewer bytes than the format bounds: binary keys, no run id or actor name per row', () => {
  const file = path.join(root, 'bytes.db');
  const table = new SqliteSnapshotTable(file, 'bench-scale-s1-0123abcd');
  const problem = 'problem-0001';
  const n = 4000;
  try {
    const judged = new PairRows<ResultFigures>(null, (r) => r);
    const executed = new PairRows<ResultFigures>(null, (r) => r);
    for (let i = 0; i < n; i++) {
      // As a sandbox reports them: times in whole ms or with decimals, memory in kB, an output blob.
      const r = figures(i % 3 === 0 ? 'wrong_answer' : 'accepted', i % 2 === 0 ? 1000 + i : 3.25, { memoryKb: 20_000 + i, outputHash: h(7 * i + 1) });
      const program = h(1_000_000 + (i % 64) * 7919);
      const test = h(2_000_000 + i * 104_729);
      judged.record(1 + (i % 64), problem, program, test, r);
      executed.record(1 + (i % 64), '', program, test, r);
    }
    table.save([
      { ref: ref('judge', 1), body: Buffer.from('{}'), side: judged.sideRows() },
      { ref: ref('executor', 1), body: Buffer.from('{}'), side: executed.sideRows() },
    ]);
  } finally {
    table.close();
  }
  const db = new Database(file, { readonly: true });
  const { rows, payload, bytes } = db
    .prepare("SELECT (SELECT count(*) FROM side_rows) AS rows, SUM(payload) AS payload, SUM(pgsize) AS bytes FROM dbstat WHERE name = 'side_rows'")
    .get() as { rows: number; payload: number; bytes: number };
  db.close();
  // The largest row of the format: key 'p' + length + scope + 2 x 32; value verdict, flags, time
  // (3-byte varint or 8-byte float), memory (3-byte varint), output hash 32; checksum 4 bytes;
  // actor id 1 byte; record header 7 bytes. (Text keys and JSON values with the run id and actor
  // name took about 270 bytes of payload a row.)
  const largest = 1 + 8 + 32 + (2 + 8 + 3 + 32) + 4 + 1 + 7;
  expect(largest).toBe(98);
  // A number row per program in each actor ('i' + length + scope + hash 32 -> 8 bytes).
  const numberRows = 64 * 2;
  const numberRow = 2 + problem.length + 32 + 8 + 4 + 1 + 7;
  expect(rows).toBe(2 * n + numberRows);
  expect(payload).toBeLessThanOrEqual(2 * n * largest + numberRows * numberRow);
  // Pages: cells (a 2-byte pointer, a payload length) at least half full, interior pages a few percent.
  expect(bytes / rows).toBeLessThanOrEqual(2.2 * (largest + 4));
});

it('a result from a position that cannot number a program is refused with the position named, and nothing is recorded', () => {
  const rows = new PairRows<ResultFigures>(null, (r) => r);
  for (const position of [0, -3, 1.5, 2 ** 40]) {
    expect(() => rows.record(position, 's', h(1), h(2), figures('accepted', 1))).toThrow(
      new RegExp(`log position ${String(position).replace('.', '\\.')} cannot number`),
    );
    expect(() => rows.recordLoad(position, 's', h(1), 'ran')).toThrow(/cannot number/);
  }
  expect(rows.heldEntries).toBe(0);
  expect(rows.sideRows().rows).toEqual([]);
});
