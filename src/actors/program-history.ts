/**
 * Where each program's recorded results are in the log, as the Judge's verdict index and the
 * Executor's cache keep them: per scope (the Judge's problem id; the Executor has one scope, '')
 * and program, the program's load outcome and the positions of the events that recorded its
 * results, each with the position of its request (whose tests name the results). The results
 * themselves are read from the log when a plan or a request asks about the program
 * (`readResults`): the log is the memory, and beside it an index of a few bytes per recording
 * event, not a second copy of every result.
 *
 * Entries changed or read since the last saved snapshot are held here; the others are read from
 * the snapshot's side rows when asked for (see SideRows), so memory holds one snapshot
 * interval's programs, not the run's.
 *   key:   'h' | scope length (1 byte) | scope (UTF-8) | program hash (32 bytes)
 *   value: the load outcome (1 byte: its place in LOADS, 255: none recorded) | per recording
 *          event, two varints: its position less the one before's (the first: its position), and
 *          its position less its request's (0: an older per-pair event that names its test)
 */
import { mergeLoad, type ModuleLoad } from '../core/module-load.js';
import { VERDICT_CODES } from '../core/verdicts.js';
import { requestPairs, type EventData, type ExecutionPair } from '../events/catalog.js';
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
 * (0: none), ...], in log order. */
export interface ProgramEntry {
  load: ModuleLoad | undefined;
  events: number[];
}

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
  let last = 0;
  for (let i = 0; i < e.events.length; i += 2) {
    const position = e.events[i]!;
    const request = e.events[i + 1]!;
    pushVarint(bytes, position - last);
    pushVarint(bytes, request === 0 ? 0 : position - request);
    last = position;
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
  let last = 0;
  while (at < value.length) {
    const position = last + varint();
    const back = varint();
    events.push(position, back === 0 ? 0 : position - back);
    last = position;
  }
  return { load, events };
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
      entry = { load: undefined, events: [] };
      nestedSet(this.#held, scope, program, entry);
    }
    nestedSet(this.#changed, scope, program, entry);
    return entry;
  }

  /** Notes that the event at `position` recorded results of the program, named by the pairs of
   * the request at `request` (0: the event names its test itself). */
  record(scope: string, program: string, position: number, request: number): void {
    const entry = this.#changing(scope, program);
    const n = entry.events.length;
    // Folded once per event, in log order: a position at or before the last one is that event again.
    if (n > 0 && entry.events[n - 2]! >= position) return;
    entry.events.push(position, request);
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
    const text = (scope: string, program: string, e: ProgramEntry) => rows.set(`h${scope}\u0000${program}`, `${e.load ?? '-'} ${e.events.join(',')}`);
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

/**
 * The recorded results of programs, by program and test hash (a later result of a pair replaces
 * an earlier one; a sandbox error is the sandbox's failure, not a result, and is left out), read
 * from the log at the positions their entries name: every event once, in log order.
 */
export async function readResults(
  entries: readonly (readonly [program: string, ProgramEntry])[],
  read: ReadAt,
): Promise<Map<string, Map<string, ResultFigures>>> {
  const wanted = new Set<number>();
  for (const [, e] of entries) for (const p of e.events) if (p !== 0) wanted.add(p);
  const positions = [...wanted].sort((a, b) => a - b);
  const events = new Map<number, EventEnvelope>();
  if (positions.length > 0) {
    const found = await read(positions.map(asPosition));
    found.forEach((e, i) => {
      if (e !== undefined) events.set(positions[i]!, e);
    });
  }
  const pairsAt = new Map<number, ExecutionPair[]>();
  const at = (position: number, program: string): EventEnvelope => {
    const e = events.get(position);
    if (e === undefined)
      throw new HistoryReadError(`the log holds no event at position ${position}, where the index of program ${program} records its results`);
    return e;
  };
  const out = new Map<string, Map<string, ResultFigures>>();
  for (const [program, entry] of entries) {
    const tests = new Map<string, ResultFigures>();
    out.set(program, tests);
    for (let i = 0; i < entry.events.length; i += 2) {
      const e = at(entry.events[i]!, program);
      if (e.type === 'ExecutionCompleted') {
        const r = e.data as PairResult;
        if (r.programHash !== program)
          throw new HistoryReadError(`the event at position ${e.position} holds a result of program ${r.programHash}, not of ${program}`);
        if (r.verdict !== 'sandbox_error') tests.set(r.testHash, figuresOf(r));
        continue;
      }
      if (e.type !== 'ProgramExecuted') throw new HistoryReadError(`the event at position ${e.position} is a ${e.type}, not the results of program ${program}`);
      const d = e.data as EventData<'ProgramExecuted'>;
      const requestAt = entry.events[i + 1]!;
      let pairs = pairsAt.get(requestAt);
      if (pairs === undefined) {
        const request = at(requestAt, program);
        if (request.type !== 'ExecutionRequested' || (request.data as EventData<'ExecutionRequested'>).requestId !== d.requestId)
          throw new HistoryReadError(`the event at position ${requestAt} is not the request ${d.requestId} of the results at ${e.position}`);
        pairsAt.set(requestAt, (pairs = requestPairs(request.data as EventData<'ExecutionRequested'>)));
      }
      if (d.programHash !== program)
        throw new HistoryReadError(`the event at position ${e.position} holds results of program ${d.programHash}, not of ${program}`);
      d.pairs.forEach((pairAt, k) => {
        const pair = pairs[pairAt];
        if (pair === undefined)
          throw new HistoryReadError(`the results at position ${e.position} name pair ${pairAt} of request ${d.requestId}, which has ${pairs.length}`);
        if (d.verdicts[k] !== SANDBOX_ERROR) tests.set(pair.testHash, resultAt(d, k));
      });
    }
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

/** Recorded results of some programs, read from the log for one plan or request. */
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

/** The recorded results of the programs of `pairs` in `scope`: only programs with an entry are read. */
export async function resultsOf(history: ProgramHistory, scope: string, pairs: Iterable<{ programHash: string }>, read: ReadAt): Promise<RecordedResults> {
  const entries: [string, ProgramEntry][] = [];
  const seen = new Set<string>();
  for (const { programHash } of pairs) {
    if (seen.has(programHash)) continue;
    seen.add(programHash);
    const e = history.entry(scope, programHash);
    if (e !== undefined && e.events.length > 0) entries.push([programHash, { load: e.load, events: e.events.slice() }]);
  }
  if (entries.length === 0) return RecordedResults.EMPTY;
  return new RecordedResults(await readResults(entries, read));
}
