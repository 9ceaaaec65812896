/**
 * Recorded results by (program, test) pair, as the Judge's verdict index and the Executor's cache
 * keep them: the latest result of each pair and the load outcome of each program, within a scope
 * (the Judge's problem id; the Executor has one scope, ''). What was folded since the last saved
 * snapshot is held here; everything before it is read from the snapshot's side rows when asked
 * for (see SideRows), so memory holds one snapshot interval's work, not the run's.
 *
 * Rows are binary: a run writes one per result, so their bytes are most of `snapshots.db`. A
 * program's rows are keyed by its number, not its hash: the log position of the event that first
 * recorded a result or load outcome of it (in its scope) times 2^16, plus its place among the
 * programs that event touched. Numbers grow with the log, so a snapshot's new programs' rows go to
 * the end of the table's b-tree, a few pages written, instead of a page per row all over it (hash
 * keys made each save rewrite most of a large table's pages); and they are the same in every
 * process that folds the same log (the workers of a machine share one snapshot file).
 *   number key:  'i' | scope length (1 byte) | scope (UTF-8) | program hash (32) -> the number (8 bytes, big-endian)
 *   pair key:    'q' | number (8 bytes, big-endian) | test hash (32) -> verdict letter | flags | time |
 *                memory | output hash (32, if flagged) | exception type (UTF-8, the rest, if flagged)
 *   load key:    'm' | number (8 bytes, big-endian) -> one byte, the outcome's place in LOADS
 * Times and memory are varints when whole numbers (as the sandbox reports them), else 8-byte floats.
 */
import { VERDICT_CODES, verdictOfCode } from '../core/verdicts.js';
import type { ResultFigures } from '../events/program-executed.js';
import { mergeLoad, type ModuleLoad } from '../core/module-load.js';
import type { SideReader, SideRows } from './snapshots.js';

const NUMBER = 0x69; // 'i'
const LOAD = 0x6d; // 'm'
const PAIR = 0x71; // 'q'
const HASH_BYTES = 32;
const NUMBER_BYTES = 8;
const LOADS: readonly ModuleLoad[] = ['ran', 'raised', 'compile_error', 'unknown'];
/** Programs an event may touch first (a number's low 16 bits), and the positions a number holds. */
const PER_EVENT = 0x10000;
const MAX_POSITION = Math.floor(Number.MAX_SAFE_INTEGER / PER_EVENT);

const ISOLATED = 1;
const CACHED = 2;
const OUTPUT = 4;
const EXCEPTION = 8;
const TIME_FLOAT = 16;
const MEMORY_FLOAT = 32;

function hashBytes(hex: string, into: Buffer, at: number): void {
  // Hashes reach the indexes from validated events: 64 lowercase hex characters.
  if (into.write(hex, at, 'hex') !== HASH_BYTES || hex.length !== 2 * HASH_BYTES) throw new Error(`not a sha256 hash: ${JSON.stringify(hex.slice(0, 80))}`);
}

function writeNumber8(n: number, into: Buffer, at: number): void {
  into.writeUInt32BE(Math.floor(n / 0x1_0000_0000), at);
  into.writeUInt32BE(n % 0x1_0000_0000, at + 4);
}
const readNumber8 = (b: Buffer, at: number): number => b.readUInt32BE(at) * 0x1_0000_0000 + b.readUInt32BE(at + 4);

/** The key of a program's number: scope and program hash. */
function numberKey(scope: string, program: string): Buffer {
  const scopeBytes = Buffer.byteLength(scope);
  if (scopeBytes > 255) throw new Error(`scope of a side row longer than 255 bytes: ${JSON.stringify(scope.slice(0, 80))}`);
  const key = Buffer.allocUnsafe(2 + scopeBytes + HASH_BYTES);
  key[0] = NUMBER;
  key[1] = scopeBytes;
  key.write(scope, 2, 'utf8');
  hashBytes(program, key, 2 + scopeBytes);
  return key;
}

/** A pair's key (with a test hash) or a program's load key (without). */
function keyOf(program: number, test: string | null): Buffer {
  const key = Buffer.allocUnsafe(1 + NUMBER_BYTES + (test === null ? 0 : HASH_BYTES));
  key[0] = test === null ? LOAD : PAIR;
  writeNumber8(program, key, 1);
  if (test !== null) hashBytes(test, key, 1 + NUMBER_BYTES);
  return key;
}

const numberValue = (n: number): Buffer => {
  const b = Buffer.allocUnsafe(NUMBER_BYTES);
  writeNumber8(n, b, 0);
  return b;
};
const asBuffer = (b: Uint8Array): Buffer => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

const varintBytes = (n: number): number => {
  let len = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 0x80);
    len++;
  }
  return len;
};
const isVarint = (n: number): boolean => Number.isSafeInteger(n) && n >= 0;

function writeNumber(n: number, into: Buffer, at: number): number {
  if (!isVarint(n)) return into.writeDoubleLE(n, at);
  while (n >= 0x80) {
    into[at++] = (n % 0x80) | 0x80;
    n = Math.floor(n / 0x80);
  }
  into[at++] = n;
  return at;
}

function readNumber(b: Buffer, at: number, float: boolean): [number, number] {
  if (float) return [b.readDoubleLE(at), at + 8];
  let n = 0;
  let scale = 1;
  for (;;) {
    const byte = b[at++]!;
    n += (byte & 0x7f) * scale;
    if (byte < 0x80) return [n, at];
    scale *= 0x80;
  }
}

/** A result's figures as a pair row's value. */
export function encodeFigures(r: ResultFigures): Buffer {
  const exception = r.exceptionType === null ? null : Buffer.from(r.exceptionType, 'utf8');
  const size =
    2 +
    (isVarint(r.timeMs) ? varintBytes(r.timeMs) : 8) +
    (isVarint(r.memoryKb) ? varintBytes(r.memoryKb) : 8) +
    (r.outputHash === null ? 0 : HASH_BYTES) +
    (exception?.length ?? 0);
  const b = Buffer.allocUnsafe(size);
  b.write(VERDICT_CODES[r.verdict], 0, 'latin1');
  b[1] =
    (r.isolated ? ISOLATED : 0) |
    (r.cached ? CACHED : 0) |
    (r.outputHash === null ? 0 : OUTPUT) |
    (exception === null ? 0 : EXCEPTION) |
    (isVarint(r.timeMs) ? 0 : TIME_FLOAT) |
    (isVarint(r.memoryKb) ? 0 : MEMORY_FLOAT);
  let at = writeNumber(r.timeMs, b, 2);
  at = writeNumber(r.memoryKb, b, at);
  if (r.outputHash !== null) {
    hashBytes(r.outputHash, b, at);
    at += HASH_BYTES;
  }
  if (exception !== null) exception.copy(b, at);
  return b;
}

/** A pair row's value as the figures it was written from. */
export function decodeFigures(value: Uint8Array): ResultFigures {
  const b = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  const flags = b[1]!;
  const [timeMs, afterTime] = readNumber(b, 2, (flags & TIME_FLOAT) !== 0);
  const [memoryKb, afterMemory] = readNumber(b, afterTime, (flags & MEMORY_FLOAT) !== 0);
  let at = afterMemory;
  let outputHash: string | null = null;
  if (flags & OUTPUT) {
    outputHash = b.toString('hex', at, at + HASH_BYTES);
    at += HASH_BYTES;
  }
  return {
    verdict: verdictOfCode(String.fromCharCode(b[0]!)),
    timeMs,
    memoryKb,
    outputHash,
    exceptionType: flags & EXCEPTION ? b.toString('utf8', at) : null,
    isolated: (flags & ISOLATED) !== 0,
    cached: (flags & CACHED) !== 0,
  };
}

const loadValue = (load: ModuleLoad) => Buffer.of(LOADS.indexOf(load));
const loadOf = (value: Uint8Array): ModuleLoad => LOADS[value[0]!]!;

type Nested<T> = Map<string, Map<string, T>>;
function nestedGet<T>(map: Nested<T>, a: string, b: string): T | undefined {
  return map.get(a)?.get(b);
}
function nestedSet<T>(map: Nested<T>, a: string, b: string, value: T): void {
  const inner = map.get(a);
  if (inner) inner.set(b, value);
  else map.set(a, new Map([[b, value]]));
}

/**
 * The latest recorded result of each pair and the load outcome of each program of an actor's
 * index, held in memory as folded (`V`, read as figures by `figuresOf` only when asked for or
 * saved) until a snapshot saves them as side rows, then read from those rows. Results and load
 * outcomes are recorded with the log position of the event they come from (a program's number).
 */
export class PairRows<V> {
  /** Scope -> program hash -> test hash -> value, folded since the last save (since the start,
   * without one). Nested, not keyed by the parts joined: a joined key is a new string to hash per
   * result, the hashes of the event's own strings are computed once. */
  readonly #folded = new Map<string, Nested<V>>();
  /** Scope -> program hash -> load outcome, changed since the last save. */
  readonly #loads: Nested<ModuleLoad> = new Map();
  /** Per program asked about or saved since the last save: its number in the side rows, or null
   * when none of its rows is saved. Most programs asked about are a fresh sample's: this answers
   * their pairs without a read each. Dropped at every save that keeps a table. */
  readonly #numbers: Nested<number | null> = new Map();
  /** Per program touched since the last save: the number of the first event that touched it, its
   * number if it has none saved (then that event is the first ever to touch it). */
  readonly #firstTouch: Nested<number> = new Map();
  /** The event being folded (its position; none yet: -1, so a first position of 0 is checked too)
   * and the programs it touched, in order (a few). */
  #event = -1;
  readonly #eventTouched: string[] = [];
  /** The last program touched, to skip the bookkeeping for the rest of its event's results. */
  #lastTouch: [position: number, scope: string, program: string] = [-1, '', ''];
  /** Numbers of programs saved for the first time by the coming save, whose rows it writes. */
  #numbered: [scope: string, program: string, number: number][] = [];
  /** The saved rows of the pairs of the latest `prefetch` (null: none saved), by scope, program
   * and test: one batch, replaced by the next. */
  #fetched = new Map<string, Nested<Uint8Array | null>>();
  /** The side rows of the latest snapshot (null: folded from the start, none saved yet). */
  #side: SideReader | null;
  /** No snapshot saved or restored yet: the next one replaces the actor's side rows. */
  #replace: boolean;
  /** After a save that kept no table (see sideSaved): what was folded since, in fold order; the
   * maps above then keep everything. Null otherwise: the maps hold exactly what is unsaved. */
  #unsaved: [scope: string, program: string, test: string, value: V][] | null = null;
  #unsavedLoads: [scope: string, program: string][] | null = null;
  readonly #figuresOf: (value: V, test: string) => ResultFigures;

  constructor(side: SideReader | null, figuresOf: (value: V, test: string) => ResultFigures) {
    this.#side = side;
    this.#replace = side === null;
    this.#figuresOf = figuresOf;
  }

  /** Notes that the event at `position` touches the program (see the numbers, above). */
  #touch(position: number, scope: string, program: string): void {
    const last = this.#lastTouch;
    if (position === last[0] && program === last[2] && scope === last[1]) return;
    if (position !== this.#event) {
      if (!Number.isSafeInteger(position) || position < 1 || position > MAX_POSITION)
        throw new Error(`log position ${position} cannot number a program's side rows (1 to ${MAX_POSITION})`);
      this.#event = position;
      this.#eventTouched.length = 0;
    }
    this.#lastTouch = [position, scope, program];
    const named = `${scope}\u0000${program}`;
    let place = this.#eventTouched.indexOf(named);
    if (place < 0) {
      place = this.#eventTouched.push(named) - 1;
      if (place >= PER_EVENT) throw new Error(`an event at position ${position} touches more than ${PER_EVENT} programs: their side rows cannot be numbered`);
    }
    if (nestedGet(this.#firstTouch, scope, program) === undefined) nestedSet(this.#firstTouch, scope, program, position * PER_EVENT + place);
  }

  /** Records the latest result of a pair (a later one replaces it), from the event at `position`. */
  record(position: number, scope: string, program: string, test: string, value: V): void {
    this.#touch(position, scope, program);
    let programs = this.#folded.get(scope);
    if (!programs) this.#folded.set(scope, (programs = new Map()));
    let tests = programs.get(program);
    if (!tests) programs.set(program, (tests = new Map()));
    tests.set(test, value);
    this.#unsaved?.push([scope, program, test, value]);
  }

  /** Merges a newly reported load outcome into the program's (see mergeLoad). */
  recordLoad(position: number, scope: string, program: string, next: ModuleLoad): void {
    this.#touch(position, scope, program);
    const known = this.load(scope, program);
    const merged = mergeLoad(known, next);
    if (merged === known) return;
    nestedSet(this.#loads, scope, program, merged);
    this.#unsavedLoads?.push([scope, program]);
  }

  /** The latest result recorded of a pair: folded here (newer), else the saved row. */
  get(scope: string, program: string, test: string): ResultFigures | undefined {
    const v = this.#folded.get(scope)?.get(program)?.get(test);
    if (v !== undefined) return this.#figuresOf(v, test);
    const row = this.#savedRow(scope, program, test);
    return row === undefined ? undefined : decodeFigures(row);
  }

  has(scope: string, program: string, test: string): boolean {
    if (this.#folded.get(scope)?.get(program)?.has(test)) return true;
    return this.#savedRow(scope, program, test) !== undefined;
  }

  load(scope: string, program: string): ModuleLoad | undefined {
    const folded = nestedGet(this.#loads, scope, program);
    if (folded !== undefined || this.#side === null) return folded;
    const number = this.#numberOf(scope, program);
    const row = number === null ? undefined : this.#side.get(keyOf(number, null));
    return row === undefined ? undefined : loadOf(row);
  }

  /** The program's number in the side rows (null: none of its rows is saved), looked up once per save. */
  #numberOf(scope: string, program: string): number | null {
    let number = nestedGet(this.#numbers, scope, program);
    if (number === undefined) {
      const row = this.#side?.get(numberKey(scope, program));
      number = row === undefined ? null : readNumber8(asBuffer(row), 0);
      nestedSet(this.#numbers, scope, program, number);
    }
    return number;
  }

  #savedRow(scope: string, program: string, test: string): Uint8Array | undefined {
    if (this.#side === null) return undefined;
    const number = this.#numberOf(scope, program);
    if (number === null) return undefined;
    const fetched = this.#fetched.get(scope)?.get(program)?.get(test);
    if (fetched !== undefined) return fetched ?? undefined;
    return this.#side.get(keyOf(number, test));
  }

  /** Reads the saved rows of the pairs about to be asked about in one batch (a plan's or a
   * request's: hundreds of pairs of programs with history, such as the reference and the
   * known-incorrect programs on newly sampled tests), instead of a point read each. Answers are
   * the same with or without it. */
  prefetch(scope: string, pairs: readonly { programHash: string; testHash: string }[]): void {
    this.#fetched = new Map();
    const side = this.#side;
    if (side === null) return;
    const asked: [program: string, test: string][] = [];
    const keys: Buffer[] = [];
    const folded = this.#folded.get(scope);
    for (const { programHash: program, testHash: test } of pairs) {
      if (folded?.get(program)?.has(test)) continue;
      const number = this.#numberOf(scope, program);
      if (number === null) continue;
      asked.push([program, test]);
      keys.push(keyOf(number, test));
    }
    if (keys.length === 0) return;
    const values = side.getMany(keys);
    const byProgram: Nested<Uint8Array | null> = new Map();
    asked.forEach(([program, test], i) => nestedSet(byProgram, program, test, values[i] ?? null));
    this.#fetched.set(scope, byProgram);
  }

  /** The program's number, from the saved rows or, saved for the first time now, from the event
   * that first touched it (its number row is then written by this save). */
  #numberFor(scope: string, program: string): number {
    const saved = this.#numberOf(scope, program);
    if (saved !== null) return saved;
    const number = nestedGet(this.#firstTouch, scope, program);
    if (number === undefined) throw new Error(`program ${program.slice(0, 12)} in scope ${JSON.stringify(scope)} has rows but no event touched it`);
    nestedSet(this.#numbers, scope, program, number);
    this.#numbered.push([scope, program, number]);
    return number;
  }

  /** The results and load outcomes changed since the last saved snapshot, as side rows: a row per
   * pair (a later result of a pair replaces its row), all of them before the first save; and the
   * numbers of programs saved for the first time. Pairs in key order (after a save that kept no
   * table, in fold order): the table appends the rows of new programs. */
  sideRows(): SideRows {
    const rows: [Uint8Array, Uint8Array][] = [];
    const pair = (number: number, test: string, v: V) => rows.push([keyOf(number, test), encodeFigures(this.#figuresOf(v, test))]);
    const load = (scope: string, program: string) =>
      rows.push([keyOf(this.#numberFor(scope, program), null), loadValue(nestedGet(this.#loads, scope, program)!)]);
    if (this.#unsaved !== null) {
      // In fold order: a pair recorded twice since the save ends with its later result.
      for (const [scope, program, test, v] of this.#unsaved) pair(this.#numberFor(scope, program), test, v);
      for (const [scope, program] of this.#unsavedLoads!) load(scope, program);
    } else {
      const programs: [number, Map<string, V>][] = [];
      for (const [scope, byProgram] of this.#folded) for (const [program, tests] of byProgram) programs.push([this.#numberFor(scope, program), tests]);
      programs.sort((a, b) => a[0] - b[0]);
      // Tests by hash too: a program with history (a problem's reference, run on every new test)
      // gets rows all over its part of the table, each of its pages then written once.
      for (const [number, tests] of programs) for (const test of tests.size > 1 ? [...tests.keys()].sort() : tests.keys()) pair(number, test, tests.get(test)!);
      for (const [scope, byProgram] of this.#loads) for (const program of byProgram.keys()) load(scope, program);
    }
    // Numbers given by an earlier call not followed by a save are written again: the same rows.
    for (const [scope, program, number] of this.#numbered) rows.push([numberKey(scope, program), numberValue(number)]);
    return { replace: this.#replace, rows };
  }

  /** Once saved, the results and load outcomes are read from `saved` when asked for, and dropped
   * here, so memory holds what was folded since the last snapshot. Without `saved` (a caller
   * keeping no table) they stay, and only what is folded from now on is unsaved. */
  sideSaved(saved?: SideReader): void {
    this.#replace = false;
    this.#numbered = [];
    this.#firstTouch.clear();
    if (saved === undefined) {
      this.#unsaved = [];
      this.#unsavedLoads = [];
      return;
    }
    this.#unsaved = null;
    this.#unsavedLoads = null;
    this.#side = saved;
    this.#numbers.clear();
    this.#fetched = new Map();
    this.#folded.clear();
    this.#loads.clear();
  }

  /** Results and load outcomes held in memory, and programs touched or looked up: what was folded
   * or asked about since the last save, not the run. */
  get heldEntries(): number {
    let n = 0;
    for (const programs of this.#folded.values()) for (const tests of programs.values()) n += tests.size;
    for (const map of [this.#loads, this.#numbers, this.#firstTouch]) for (const programs of map.values()) n += programs.size;
    return n;
  }

  /** Every recorded result and load outcome, saved or folded, in key order, as text:
   * `p<scope>\0<program>\0<test>` with the figures as JSON, `l<scope>\0<program>` with the load
   * outcome (tests compare indexes whole with it; programs' numbers are not part of it). */
  recorded(): [string, string][] {
    const rows = new Map<string, string>();
    const pairText = (scope: string, program: string, test: string, figures: ResultFigures) =>
      rows.set(`p${scope}\u0000${program}\u0000${test}`, JSON.stringify(figures));
    const loadText = (scope: string, program: string, load: ModuleLoad) => rows.set(`l${scope}\u0000${program}`, load);
    // Key order puts the numbers ('i') before the loads ('m') and pairs ('q') that name them.
    const programs = new Map<number, [scope: string, program: string]>();
    for (const [key, value] of this.#side?.all() ?? []) {
      const b = asBuffer(key);
      if (b[0] === NUMBER) {
        const at = 2 + b[1]!;
        programs.set(readNumber8(asBuffer(value), 0), [b.toString('utf8', 2, at), b.toString('hex', at, at + HASH_BYTES)]);
        continue;
      }
      const named = programs.get(readNumber8(b, 1));
      if (named === undefined) throw new Error(`side row ${b.toString('hex').slice(0, 80)} names program number ${readNumber8(b, 1)}, which has no number row`);
      if (b[0] === LOAD) loadText(named[0], named[1], loadOf(value));
      else pairText(named[0], named[1], b.toString('hex', 1 + NUMBER_BYTES, 1 + NUMBER_BYTES + HASH_BYTES), decodeFigures(value));
    }
    // As a save writes them: the figures a row keeps, nothing else of a folded value.
    for (const [scope, byProgram] of this.#folded)
      for (const [program, tests] of byProgram)
        for (const [test, v] of tests) pairText(scope, program, test, decodeFigures(encodeFigures(this.#figuresOf(v, test))));
    for (const [scope, byProgram] of this.#loads) for (const program of byProgram.keys()) loadText(scope, program, nestedGet(this.#loads, scope, program)!);
    return [...rows].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  }
}
