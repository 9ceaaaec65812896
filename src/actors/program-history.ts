/**
 * Where each program's recorded results are in the log, as the Judge's verdict index and the
 * Executor's cache keep them: per scope (the Judge's problem id; the Executor has one scope, '')
 * and program, the program's load outcome, the positions of the events that recorded its results
 * (each with the position of its request, whose tests name the results), and per test it has a
 * result on, the last 48 bits of the test's hash and which of those events holds its latest
 * result. Whether a pair is recorded is answered from the index; its result is read from the log
 * at that event (`resultsOf`), so a plan reads only the events of the pairs it reuses: the log is
 * the memory, and beside it an index of about 8 bytes per result, not a second copy of each.
 *
 * Entries changed or read since the last saved snapshot are held here; the others are read from
 * the snapshot's side rows when asked for (see SideRows), so memory holds one snapshot
 * interval's programs, not the run's.
 *   key:   'h' | scope length (1 byte) | scope (UTF-8) | program hash (32 bytes)
 *   value: the load outcome (1 byte: its place in LOADS, 255: none recorded) | the number of
 *          recording events (varint) | per event, two varints: its position less the one
 *          before's (the first: its position), and its position less its request's (0: an older
 *          per-pair event that names its test) | per test, in fingerprint order: the fingerprint
 *          (6 bytes, big-endian) and the event's place in the list (varint)
 */
import { mergeLoad, type ModuleLoad } from '../core/module-load.js';
import { VERDICT_CODES } from '../core/verdicts.js';
import type { EventData } from '../events/catalog.js';
import type { EventEnvelope } from '../events/envelope.js';
import { asPosition, type Position } from '../events/log.js';
import { resultAt, type PairResult, type ResultFigures } from '../events/program-executed.js';
import type { ReadAt } from '../events/read-at.js';
import type { SideReader, SideRows } from './snapshots.js';

const HISTORY = 0x68; // 'h'
const HASH_BYTES = 32;
const LOADS: readonly ModuleLoad[] = ['ran', 'raised', 'compile_error', 'unknown'];
const NO_LOAD = 255;
const SANDBOX_ERROR = VERDICT_CODES.sandbox_error;

/** What the index knows of a program in a scope. `events` is flat: [position, request position
 * (0: none), ...], in log order; `tests`: test fingerprint -> the place in `events` (the
 * event's index, not the flat one) of the event holding the test's latest result. */
export interface ProgramEntry {
  load: ModuleLoad | undefined;
  events: number[];
  tests: Map<number, number>;
}

const FINGERPRINT_BYTES = 6;
/** A test's fingerprint: the last 48 bits of its hash, a safe integer. A result read by it is
 * checked against the whole hash (two tests of one program sharing a fingerprint: the older one
 * is then not reused, only run again). */
export const fingerprintOf = (testHash: string): number => parseInt(testHash.slice(-2 * FINGERPRINT_BYTES), 16);

function keyOf(scope: string, program: string): Buffer {
  const scopeBytes = Buffer.byteLength(scope);
  if (scopeBytes > 255) throw new Error(`scope of a program's history longer than 255 bytes: ${JSON.stringify(scope.slice(0, 80))}`);
  const key = Buffer.allocUnsafe(2 + scopeBytes + HASH_BYTES);
  key[0] = HISTORY;
  key[1] = scopeBytes;
  key.write(scope, 2, 'utf8');
  // Hashes reach the index from validated events: 64 lowercase hex characters.
  if (key.write(program, 2 + scopeBytes, 'hex') !== HASH_BYTES || program.length !== 2 * HASH_BYTES)
    throw new Error(`not a sha256 hash: ${JSON.stringify(program.slice(0, 80))}`);
  return key;
}

function scopeAndProgram(key: Uint8Array): [scope: string, program: string] {
  const b = Buffer.from(key.buffer, key.byteOffset, key.byteLength);
  if (b[0] !== HISTORY) throw new Error(`side row ${b.toString('hex').slice(0, 80)} is not a program's history`);
  const at = 2 + b[1]!;
  return [b.toString('utf8', 2, at), b.toString('hex', at, at + HASH_BYTES)];
}

function pushVarint(out: number[], n: number): void {
  while (n >= 0x80) {
    out.push((n % 0x80) | 0x80);
    n = Math.floor(n / 0x80);
  }
  out.push(n);
}

export function encodeEntry(e: ProgramEntry): Buffer {
  const bytes: number[] = [e.load === undefined ? NO_LOAD : LOADS.indexOf(e.load)];
  pushVarint(bytes, e.events.length / 2);
  let last = 0;
  for (let i = 0; i < e.events.length; i += 2) {
    const position = e.events[i]!;
    const request = e.events[i + 1]!;
    pushVarint(bytes, position - last);
    pushVarint(bytes, request === 0 ? 0 : position - request);
    last = position;
  }
  // In fingerprint order: the same entry is the same bytes whatever order its tests came in.
  for (const fingerprint of [...e.tests.keys()].sort((a, b) => a - b)) {
    for (let shift = (FINGERPRINT_BYTES - 1) * 8; shift >= 0; shift -= 8) bytes.push(Math.floor(fingerprint / 2 ** shift) % 256);
    pushVarint(bytes, e.tests.get(fingerprint)!);
  }
  return Buffer.from(bytes);
}

export function decodeEntry(value: Uint8Array): ProgramEntry {
  const load = value[0] === NO_LOAD ? undefined : LOADS[value[0]!];
  if (value.length === 0 || (value[0] !== NO_LOAD && load === undefined))
    throw new Error(`a program's history row starts with load code ${value[0]}, which names no load outcome`);
  const events: number[] = [];
  let at = 1;
  const varint = (): number => {
    let n = 0;
    let scale = 1;
    for (;;) {
      if (at >= value.length) throw new Error("a program's history row ends inside a number");
      const byte = value[at++]!;
      n += (byte & 0x7f) * scale;
      if (byte < 0x80) return n;
      scale *= 0x80;
    }
  };
  const count = varint();
  let last = 0;
  for (let i = 0; i < count; i++) {
    const position = last + varint();
    const back = varint();
    events.push(position, back === 0 ? 0 : position - back);
    last = position;
  }
  const tests = new Map<number, number>();
  while (at < value.length) {
    if (at + FINGERPRINT_BYTES > value.length) throw new Error("a program's history row ends inside a test's fingerprint");
    let fingerprint = 0;
    for (let k = 0; k < FINGERPRINT_BYTES; k++) fingerprint = fingerprint * 256 + value[at++]!;
    const place = varint();
    if (place >= count) throw new Error(`a program's history row names event ${place} of ${count}`);
    tests.set(fingerprint, place);
  }
  return { load, events, tests };
}

type Nested<T> = Map<string, Map<string, T>>;
function nestedGet<T>(map: Nested<T>, a: string, b: string): T | undefined {
  return map.get(a)?.get(b);
}
function nestedSet<T>(map: Nested<T>, a: string, b: string, value: T): void {
  const inner = map.get(a);
  if (inner) inner.set(b, value);
  else map.set(a, new Map([[b, value]]));
}

/** The index of programs' recorded results (see the top of this file). */
export class ProgramHistory {
  /** Entries read or changed since the last save (null: read, and none is recorded). */
  readonly #held: Nested<ProgramEntry | null> = new Map();
  /** Entries changed since the last save: the next save writes their rows. */
  readonly #changed: Nested<ProgramEntry> = new Map();
  /** The side rows of the latest snapshot (null: folded from the start, none saved yet). */
  #side: SideReader | null;
  /** No snapshot saved or restored yet: the next one replaces the actor's side rows. */
  #replace: boolean;

  constructor(side: SideReader | null) {
    this.#side = side;
    this.#replace = side === null;
  }

  /** What is recorded of the program in the scope (undefined: nothing). */
  entry(scope: string, program: string): ProgramEntry | undefined {
    const held = nestedGet(this.#held, scope, program);
    if (held !== undefined) return held ?? undefined;
    const row = this.#side?.get(keyOf(scope, program));
    const entry = row === undefined ? null : decodeEntry(row);
    // Kept until the next save: a program is asked about several times in a request.
    nestedSet(this.#held, scope, program, entry);
    return entry ?? undefined;
  }

  #changing(scope: string, program: string): ProgramEntry {
    let entry = this.entry(scope, program);
    if (entry === undefined) {
      entry = { load: undefined, events: [], tests: new Map() };
      nestedSet(this.#held, scope, program, entry);
    }
    nestedSet(this.#changed, scope, program, entry);
    return entry;
  }

  /** Notes that the event at `position` recorded results of the program on `tests` (sandbox
   * errors left out), named by the pairs of the request at `request` (0: the event names its
   * test itself). */
  record(scope: string, program: string, position: number, request: number, tests: Iterable<string>): void {
    const entry = this.#changing(scope, program);
    const n = entry.events.length;
    // Folded once per event, in log order: a position at or before the last one is that event again.
    if (n > 0 && entry.events[n - 2]! >= position) return;
    entry.events.push(position, request);
    for (const test of tests) entry.tests.set(fingerprintOf(test), n / 2);
  }

  /** Merges a newly reported load outcome into the program's (see mergeLoad). */
  recordLoad(scope: string, program: string, next: ModuleLoad): void {
    const known = this.entry(scope, program)?.load;
    const merged = mergeLoad(known, next);
    if (merged === known) return;
    this.#changing(scope, program).load = merged;
  }

  load(scope: string, program: string): ModuleLoad | undefined {
    return this.entry(scope, program)?.load;
  }

  /** The rows of the entries changed since the last saved snapshot (all of them before the first
   * save, which replaces the actor's rows). */
  sideRows(): SideRows {
    const rows: [Uint8Array, Uint8Array][] = [];
    for (const [scope, programs] of this.#changed) for (const [program, entry] of programs) rows.push([keyOf(scope, program), encodeEntry(entry)]);
    return { replace: this.#replace, rows };
  }

  /** Once saved, entries are read from `saved` when asked for and dropped here. Without `saved`
   * (a caller keeping no table) they stay, and only what changes from now on is written next. */
  sideSaved(saved?: SideReader): void {
    this.#replace = false;
    this.#changed.clear();
    if (saved === undefined) return;
    this.#side = saved;
    this.#held.clear();
  }

  /** Entries held in memory: those read or changed since the last save, not the run's. */
  get heldEntries(): number {
    let n = 0;
    for (const programs of this.#held.values()) n += programs.size;
    return n;
  }

  /** Every entry, saved or held, in key order, as text: `h<scope>\0<program>` and the load
   * outcome with the positions (tests compare indexes whole with it). */
  recorded(): [string, string][] {
    const rows = new Map<string, string>();
    const text = (scope: string, program: string, e: ProgramEntry) =>
      rows.set(
        `h${scope}\u0000${program}`,
        `${e.load ?? '-'} ${e.events.join(',')} ${[...e.tests]
          .sort((a, b) => a[0] - b[0])
          .map(([f, i]) => `${f}:${i}`)
          .join(',')}`,
      );
    for (const [key, value] of this.#side?.all() ?? []) {
      const [scope, program] = scopeAndProgram(key);
      if (nestedGet(this.#held, scope, program) === undefined) text(scope, program, decodeEntry(value));
    }
    for (const [scope, programs] of this.#held) for (const [program, e] of programs) if (e !== null) text(scope, program, e);
    return [...rows].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  }
}

/** A damaged index or log: an entry names a position where the log holds no such event. */
export class HistoryReadError extends Error {
  constructor(message: string) {
    super(`${message}; delete the run's snapshot file to rebuild the index from the log`);
    this.name = 'HistoryReadError';
  }
}

/** A recorded result to read: the pair, and where its event and that event's request are. */
interface Wanted {
  program: string;
  test: string;
  position: number;
  request: number;
}

/**
 * The recorded results of the wanted pairs, by program and test hash, read from the log at the
 * events the index names: each event (and request) once. A result whose event names another test
 * there (two tests sharing a fingerprint) is not one.
 */
export async function readResults(wanted: readonly Wanted[], read: ReadAt): Promise<Map<string, Map<string, ResultFigures>>> {
  const positions = [...new Set(wanted.flatMap((w) => (w.request === 0 ? [w.position] : [w.position, w.request])))].sort((a, b) => a - b);
  const events = new Map<number, EventEnvelope>();
  if (positions.length > 0) {
    const found = await read(positions.map(asPosition));
    found.forEach((e, i) => {
      if (e !== undefined) events.set(positions[i]!, e);
    });
  }
  const at = (position: number, program: string): EventEnvelope => {
    const e = events.get(position);
    if (e === undefined)
      throw new HistoryReadError(`the log holds no event at position ${position}, where the index of program ${program} records its results`);
    return e;
  };
  /** Per result event read: its results by test hash (the last of a test listed twice). */
  const byTest = new Map<number, Map<string, ResultFigures>>();
  const resultsAt = (w: Wanted): Map<string, ResultFigures> => {
    let results = byTest.get(w.position);
    if (results !== undefined) return results;
    results = new Map();
    byTest.set(w.position, results);
    const e = at(w.position, w.program);
    if (e.type === 'ExecutionCompleted') {
      const r = e.data as PairResult;
      if (r.programHash !== w.program)
        throw new HistoryReadError(`the event at position ${e.position} holds a result of program ${r.programHash}, not of ${w.program}`);
      if (r.verdict !== 'sandbox_error') results.set(r.testHash, figuresOf(r));
      return results;
    }
    if (e.type !== 'ProgramExecuted') throw new HistoryReadError(`the event at position ${e.position} is a ${e.type}, not the results of program ${w.program}`);
    const d = e.data as EventData<'ProgramExecuted'>;
    if (d.programHash !== w.program)
      throw new HistoryReadError(`the event at position ${e.position} holds results of program ${d.programHash}, not of ${w.program}`);
    const request = at(w.request, w.program);
    if (request.type !== 'ExecutionRequested' || (request.data as EventData<'ExecutionRequested'>).requestId !== d.requestId)
      throw new HistoryReadError(`the event at position ${w.request} is not the request ${d.requestId} of the results at ${e.position}`);
    const r = request.data as EventData<'ExecutionRequested'>;
    d.pairs.forEach((pairAt, k) => {
      const testAt = r.pairs[2 * pairAt + 1];
      const test = testAt === undefined ? undefined : r.tests[testAt];
      if (test === undefined)
        throw new HistoryReadError(`the results at position ${e.position} name pair ${pairAt} of request ${d.requestId}, which has ${r.pairs.length / 2}`);
      if (d.verdicts[k] !== SANDBOX_ERROR) results.set(test.testHash, resultAt(d, k));
    });
    return results;
  };
  const out = new Map<string, Map<string, ResultFigures>>();
  for (const w of wanted) {
    const result = resultsAt(w).get(w.test);
    if (result === undefined) continue;
    let tests = out.get(w.program);
    if (!tests) out.set(w.program, (tests = new Map()));
    tests.set(w.test, result);
  }
  return out;
}

const figuresOf = (r: PairResult): ResultFigures => ({
  verdict: r.verdict,
  timeMs: r.timeMs,
  memoryKb: r.memoryKb,
  outputHash: r.outputHash,
  exceptionType: r.exceptionType,
  isolated: r.isolated,
  cached: r.cached,
});

/** Recorded results of some pairs, read from the log for one plan or request. */
export class RecordedResults {
  static readonly EMPTY = new RecordedResults(new Map());
  constructor(readonly byProgram: ReadonlyMap<string, ReadonlyMap<string, ResultFigures>>) {}
  get(program: string, test: string): ResultFigures | undefined {
    return this.byProgram.get(program)?.get(test);
  }
  has(program: string, test: string): boolean {
    return this.byProgram.get(program)?.has(test) ?? false;
  }
}

/** The recorded results of `pairs` in `scope`: the index tells which are recorded and where, and
 * only those events are read (a fresh program, or an old one on new tests, reads nothing). */
export async function resultsOf(
  history: ProgramHistory,
  scope: string,
  pairs: Iterable<{ programHash: string; testHash: string }>,
  read: ReadAt,
): Promise<RecordedResults> {
  const wanted: Wanted[] = [];
  const entries = new Map<string, ProgramEntry | undefined>();
  for (const { programHash, testHash } of pairs) {
    let entry = entries.get(programHash);
    if (entry === undefined && !entries.has(programHash)) entries.set(programHash, (entry = history.entry(scope, programHash)));
    const place = entry?.tests.get(fingerprintOf(testHash));
    if (place === undefined) continue;
    wanted.push({ program: programHash, test: testHash, position: entry!.events[2 * place]!, request: entry!.events[2 * place + 1]! });
  }
  if (wanted.length === 0) return RecordedResults.EMPTY;
  return new RecordedResults(await readResults(wanted, read));
}
