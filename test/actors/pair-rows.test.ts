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
import type { ResultFigures } from '../../src/projections/recorded-verdicts.js';

const h = (n: number) => n.toString(16).padStart(64, '0');
const figures = (verdict: ResultFigures['verdict'], timeMs: number, more: Partial<ResultFigures> = {}): ResultFigures => ({ verdict, timeMs, memoryKb: 10, outputHash: null, exceptionType: null, isolated: true, cached: false, ...more });
const ref = (actor: string, position: number) => ({ actor, position: position as never, hash: 'a'.repeat(64), version: 'v' });

let root: string;
beforeAll(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-pair-rows-'));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

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
    rows.record('x', h(1), h(10), figures('accepted', 1));
    rows.record('x', h(1), h(11), figures('wrong_answer', 2));
    rows.record('y', h(1), h(10), figures('runtime_error', 3, { exceptionType: 'KeyError' }));
    rows.recordLoad('x', h(1), 'ran');
    save(table, 'judge', rows, 1);
    expect(rows.heldEntries).toBe(0);
    // Replaced twice in the next interval: the last one is the row.
    rows.record('x', h(1), h(10), figures('time_limit', 4));
    rows.record('x', h(1), h(10), figures('memory_limit', 5, { outputHash: h(9) }));
    rows.recordLoad('x', h(1), 'raised');
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
    restored.recordLoad('x', h(1), 'ran');
    expect(restored.load('x', h(1))).toBe('raised');
    expect(restored.sideRows().rows).toEqual([]);
    expect(restored.recorded()).toEqual(rows.recorded());
  } finally {
    table.close();
  }
});

it('a program with no rows is looked up once per snapshot interval, however many of its pairs are asked about', () => {
  const table = new SqliteSnapshotTable(path.join(root, 'probe.db'), 'run');
  try {
    const reads: string[] = [];
    // The table's own reader, counting what it is asked by kind of row ('i' a program's number, 'q' a pair).
    const counted = (side: SideReader): SideReader => ({
      get: (key) => (reads.push(String.fromCharCode(key[0]!)), side.get(key)),
      all: () => side.all(),
    });
    const rows = new PairRows<ResultFigures>(null, (r) => r);
    rows.record('', h(1), h(10), figures('accepted', 1));
    table.save([{ ref: ref('executor', 1), body: Buffer.from('{}'), side: rows.sideRows() }]);
    rows.sideSaved(counted(table.side('executor')));
    // A fresh program: one lookup of its number answers all of its pairs, no pair read.
    for (let t = 0; t < 50; t++) expect(rows.get('', h(2), h(100 + t))).toBeUndefined();
    expect(reads).toEqual(['i']);
    // A program with rows: its number once, then a read per pair asked about.
    expect(rows.get('', h(1), h(10))).toMatchObject({ verdict: 'accepted' });
    expect(rows.has('', h(1), h(11))).toBe(false);
    expect(reads).toEqual(['i', 'i', 'q', 'q']);
    expect(rows.heldEntries).toBe(2);
    // Its results recorded since, then saved: the next interval looks it up again (the rows changed).
    rows.record('', h(2), h(100), figures('wrong_answer', 2));
    table.save([{ ref: ref('executor', 2), body: Buffer.from('{}'), side: rows.sideRows() }]);
    rows.sideSaved(counted(table.side('executor')));
    expect(rows.heldEntries).toBe(0);
    reads.length = 0;
    expect(rows.get('', h(2), h(100))).toMatchObject({ verdict: 'wrong_answer' });
    expect(rows.get('', h(2), h(101))).toBeUndefined();
    expect(reads).toEqual(['i', 'q', 'q']);
  } finally {
    table.close();
  }
});

it("a save's results of programs saved for the first time sort after every row saved before: the table appends them", () => {
  const table = new SqliteSnapshotTable(path.join(root, 'append.db'), 'run');
  try {
    const rows = new PairRows<ResultFigures>(null, (r) => r);
    const keysOf = (side: { rows: readonly (readonly [Uint8Array, Uint8Array])[] }) => side.rows.map(([k]) => Buffer.from(k)).filter((k) => k[0] === 0x71);
    let before: Buffer[] = [];
    for (let save = 0; save < 4; save++) {
      // Hashes in no order, as sampled programs' are; one program of the first save comes back
      // in every later one (a problem's reference, run on each new test).
      rows.record('s', h(0), h(5000 + save), figures('wrong_answer', 1));
      for (let p = 0; p < 8; p++) for (let t = 0; t < 8; t++) rows.record('s', h(1 + ((p * 7919 + save * 104_729) % 999_983)), h(1000 + save * 64 + p * 8 + t), figures('accepted', t));
      const side = rows.sideRows();
      const keys = keysOf(side);
      const fresh = keys.filter((k) => k.readUInt32BE(1) !== 0);
      expect(fresh.length).toBe(64);
      for (const k of fresh) for (const b of before) expect(Buffer.compare(k, b)).toBe(1);
      before = keys;
      table.save([{ ref: ref('judge', save + 1), body: Buffer.from('{}'), side }]);
      rows.sideSaved(table.side('judge'));
    }
    // Read back by hash after a restore: the numbers are found again, and new ones continue after them.
    const restored = new PairRows<ResultFigures>(table.side('judge'), (r) => r);
    expect(restored.get('s', h(0), h(5003))).toMatchObject({ verdict: 'wrong_answer' });
    expect(restored.get('s', h(1 + ((3 * 7919 + 2 * 104_729) % 999_983)), h(1000 + 2 * 64 + 3 * 8 + 5))).toMatchObject({ timeMs: 5 });
    restored.record('s', h(424_242), h(1), figures('accepted', 1));
    const next = keysOf(restored.sideRows());
    expect(next.length).toBe(1);
    expect(next[0]!.readUInt32BE(1)).toBe(1 + 8 * 4);
  } finally {
    table.close();
  }
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
      judged.record(problem, program, test, r);
      executed.record('', program, test, r);
    }
    table.save([
      { ref: ref('judge', 1), body: Buffer.from('{}'), side: judged.sideRows() },
      { ref: ref('executor', 1), body: Buffer.from('{}'), side: executed.sideRows() },
    ]);
  } finally {
    table.close();
  }
  const db = new Database(file, { readonly: true });
  const { rows, payload, bytes } = db.prepare("SELECT (SELECT count(*) FROM side_rows) AS rows, SUM(payload) AS payload, SUM(pgsize) AS bytes FROM dbstat WHERE name = 'side_rows'").get() as { rows: number; payload: number; bytes: number };
  db.close();
  // The largest pair row of the format: key 'q' + the program's number (4 bytes) + the test hash
  // (32); value verdict, flags, time (3-byte varint or 8-byte float), memory (3-byte varint),
  // output hash 32; checksum 4 bytes; actor id 1 byte; record header 6 bytes; plus its program's
  // number row ('i' + length + scope + hash 32 -> a varint), 64 programs here. (Keys holding
  // the scope and both hashes took 120 bytes a row; text keys and JSON values with the run id and
  // actor name about 270.)
  const largest = 1 + 4 + 32 + (2 + 8 + 3 + 32) + 4 + 1 + 6;
  expect(largest).toBe(93);
  // A number row per program in each actor, and each actor's next number.
  const numberRows = 64 * 2 + 2;
  expect(rows).toBe(2 * n + numberRows);
  expect(payload / (rows - numberRows)).toBeLessThanOrEqual(largest + (numberRows * (2 + problem.length + 32 + 2 + 11)) / (2 * n));
  // Pages: cells (a 2-byte pointer, a payload length) at least half full, interior pages a few percent.
  expect(bytes / rows).toBeLessThanOrEqual(2.2 * (largest + 4));
});
