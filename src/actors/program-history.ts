/**
 * Where each program's recorded results are in the log, as the Judge's verdict index and the
 * Executor's cache keep them: per scope (the problem) and program, the program's load outcome,
 * the positions of the events that recorded its results (each with the position of its request,
 * whose tests name the results), and per test it has a result on, the last 48 bits of the test's
 * hash and which of those events holds its latest result. Whether a pair is recorded is answered
 * from the index; its result is read from the log at that event (`resultsOf`), so a plan reads
 * only the events of the pairs it reuses: the log is the memory, and beside it an index of about
 * 7 bytes per result, not a second copy of each.
 *
 * Entries changed or read since the last saved snapshot are held here; the others are read from
 * the snapshot's side rows when asked for (see SideRows), so memory holds one snapshot
 * interval's programs, not the run's.
 *
 * Rows written together sit together. A program's rows are keyed by its number, the log position
 * of the first event that recorded it (the same in every process folding the log), so the rows
 * of the programs a snapshot interval first saw are new keys at the end of the table: a key made
 * of the program's hash put each on a random leaf of a tree that grows with the run, and the
 * bytes a snapshot wrote grew with it (a 4 KB page, twice, for a row of a few hundred bytes).
 * What finds a program's number from its hash is the scope's directory: its programs in the order
 * they were first recorded, fixed-size records appended, one row per problem rewritten a save.
 *
 * A program's records, appended in log order, fill parts of at most PART_BYTES; a full part is
 * sealed, written once and never again, and each snapshot rewrites only the head (the load
 * outcome and the open part) and the parts sealed since. Parts are cut by the records alone, so
 * the same events give the same rows whatever the snapshot points (processes sharing a snapshot
 * file agree), and each row stays under SQLite's in-page limit for a `WITHOUT ROWID` row (about
 * 1,000 bytes on 4 KB pages), never spilling into overflow pages. A directory is cut the same way
 * (DIRECTORY_PART_RECORDS records a part).
 *   directory key:   'd' | scope length (1 byte) | scope (UTF-8)
 *   directory:       the number of sealed parts (varint) | the open part
 *   directory part:  the directory key | the part's number (4 bytes, big-endian; from 0)
 *   a directory's records: the program hash's last 6 bytes | the program's number (6 bytes)
 *   program part:    'p' | the program's number (6 bytes, big-endian) | the part's number (4
 *                    bytes, big-endian; from 0)
 *   program head:    keyed as its part 2^32 - 1, after its parts: a later save's new parts go
 *                    where the head is, so an old program's rewrite touches one place, not two.
 *                    The program hash (32 bytes) | the load outcome (1 byte: its place in LOADS,
 *                    255: none recorded) | the number of sealed parts (varint) | the open part
 *   a program's part: records. A record: a varint, twice its number of fingerprints, plus 1
 *              where it begins an event; then, where it does, two varints: the event's position
 *              less the one before's (the first: its position), and its position less its
 *              request's (0: an older per-pair event that names its test); then its fingerprints
 *              (6 bytes each, big-endian). An event's fingerprints may go on in records of the
 *              next parts.
 */
import { mergeLoad, type ModuleLoad } from '../core/module-load.js';
import { VERDICT_CODES } from '../core/verdicts.js';
import type { EventData } from '../events/catalog.js';
import type { EventEnvelope } from '../events/envelope.js';
import { asPosition, type Position } from '../events/log.js';
import { resultAt, type PairResult, type ResultFigures } from '../events/program-executed.js';
import type { ReadAt } from '../events/read-at.js';
import type { SideReader, SideRows } from './snapshots.js';

const DIRECTORY = 0x64; // 'd'
const PROGRAM = 0x70; // 'p'
const HASH_BYTES = 32;
const NUMBER_BYTES = 6;
const LOADS: readonly ModuleLoad[] = ['ran', 'raised', 'compile_error', 'unknown'];
const NO_LOAD = 255;
const SANDBOX_ERROR = VERDICT_CODES.sandbox_error;
/** The most bytes of records in a part: with a key of the longest scope (255 bytes) a row stays
 * under SQLite's ~1,000-byte in-page limit. */
export const PART_BYTES = 640;
const PART_NUMBER_BYTES = 4;
/** A directory's record: the program hash's last 6 bytes and the program's number. */
const DIRECTORY_RECORD_BYTES = 12;
/** Records in a directory's part (636 bytes). */
const DIRECTORY_PART_RECORDS = 53;

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
/** A program's fingerprint in its scope's directory, the last 48 bits of its hash as a test's:
 * programs sharing it are told apart by the whole hash in their heads. */
const programFingerprintOf = fingerprintOf;

function directoryKey(scope: string): Buffer {
  const scopeBytes = Buffer.byteLength(scope);
  if (scopeBytes > 255) throw new Error(`scope of a program's history longer than 255 bytes: ${JSON.stringify(scope.slice(0, 80))}`);
  const key = Buffer.allocUnsafe(2 + scopeBytes);
  key[0] = DIRECTORY;
  key[1] = scopeBytes;
  key.write(scope, 2, 'utf8');
  return key;
}

/** What every row of the program's begins with. */
function programKey(number: number): Buffer {
  const key = Buffer.allocUnsafe(1 + NUMBER_BYTES);
  key[0] = PROGRAM;
  key.writeUIntBE(number, 1, NUMBER_BYTES);
  return key;
}
/** The part number of a program's head: after every part. */
const HEAD_PART = 0xffffffff;

function checkedHash(program: string): Buffer {
  // Hashes reach the index from validated events: 64 lowercase hex characters.
  const bytes = Buffer.from(program, 'hex');
  if (bytes.length !== HASH_BYTES || program.length !== 2 * HASH_BYTES) throw new Error(`not a sha256 hash: ${JSON.stringify(program.slice(0, 80))}`);
  return bytes;
}

function partKey(head: Buffer, part: number): Buffer {
  const key = Buffer.allocUnsafe(head.length + PART_NUMBER_BYTES);
  head.copy(key);
  key.writeUInt32BE(part, head.length);
  return key;
}

/** A side row's key read: a directory's (its scope) or a program's (its number), and the part
 * (undefined: the head). */
type ParsedKey = { kind: 'directory'; scope: string; part: number | undefined } | { kind: 'program'; number: number; part: number | undefined };
function parseKey(key: Uint8Array): ParsedKey {
  const b = Buffer.from(key.buffer, key.byteOffset, key.byteLength);
  if (b[0] === DIRECTORY && b.length >= 2) {
    const at = 2 + b[1]!;
    if (b.length === at || b.length === at + PART_NUMBER_BYTES)
      return { kind: 'directory', scope: b.toString('utf8', 2, at), part: b.length === at ? undefined : b.readUInt32BE(at) };
  }
  const at = 1 + NUMBER_BYTES;
  if (b[0] === PROGRAM && b.length === at + PART_NUMBER_BYTES) {
    const part = b.readUInt32BE(at);
    return { kind: 'program', number: b.readUIntBE(1, NUMBER_BYTES), part: part === HEAD_PART ? undefined : part };
  }
  throw new Error(`side row ${b.toString('hex').slice(0, 80)} is not a program's history`);
}

const varintBytes = (n: number): number => {
  let bytes = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 0x80);
    bytes++;
  }
  return bytes;
};

function pushVarint(out: number[], n: number): void {
  while (n >= 0x80) {
    out.push((n % 0x80) | 0x80);
    n = Math.floor(n / 0x80);
  }
  out.push(n);
}

/** The varint at `bytes[at]`, and where the next value begins. */
function readVarint(bytes: Uint8Array, at: number): [value: number, next: number] {
  let n = 0;
  let scale = 1;
  for (;;) {
    if (at >= bytes.length) throw new Error("a program's history row ends inside a number");
    const byte = bytes[at++]!;
    n += (byte & 0x7f) * scale;
    if (byte < 0x80) return [n, at];
    scale *= 0x80;
  }
}

/** A head row read: the load outcome, the number of sealed parts, the events begun in them and
 * the position of the last of those (where the open part's records go on from), and where the
 * open part begins. */
function headOf(head: Uint8Array): { load: ModuleLoad | undefined; sealed: number; before: number; last: number; openAt: number } {
  const load = head[0] === NO_LOAD ? undefined : LOADS[head[0]!];
  if (head.length === 0 || (head[0] !== NO_LOAD && load === undefined))
    throw new Error(`a program's history row starts with load code ${head[0]}, which names no load outcome`);
  const [sealed, a] = readVarint(head, 1);
  const [before, b] = readVarint(head, a);
  const [last, openAt] = readVarint(head, b);
  return { load, sealed, before, last, openAt };
}

/**
 * Reads records, calling `event` for each event begun (its position and request) and `test` for
 * each fingerprint with the place of the event holding it. `state` is where the records go on
 * from: the events begun before them and the last one's position; it is left where they end.
 */
function readRecords(
  bytes: Uint8Array,
  from: number,
  state: { events: number; last: number },
  event: ((position: number, request: number) => void) | null,
  test: ((fingerprint: number, place: number) => void) | null,
): void {
  let at = from;
  while (at < bytes.length) {
    let header: number;
    [header, at] = readVarint(bytes, at);
    if (header % 2 === 1) {
      let delta: number;
      let back: number;
      [delta, at] = readVarint(bytes, at);
      [back, at] = readVarint(bytes, at);
      const position = state.last + delta;
      event?.(position, back === 0 ? 0 : position - back);
      state.last = position;
      state.events++;
    } else if (state.events === 0) throw new Error("a program's history row goes on with an event before it names one");
    const place = state.events - 1;
    const n = Math.floor(header / 2);
    if (at + n * FINGERPRINT_BYTES > bytes.length) throw new Error("a program's history row ends inside a test's fingerprint");
    if (test === null) {
      at += n * FINGERPRINT_BYTES;
      continue;
    }
    for (let k = 0; k < n; k++, at += FINGERPRINT_BYTES)
      test((((bytes[at]! * 256 + bytes[at + 1]!) * 256 + bytes[at + 2]!) * 256 + bytes[at + 3]!) * 65536 + bytes[at + 4]! * 256 + bytes[at + 5]!, place);
  }
}

/**
 * A program's rows as an appender needs them, never its whole history: the load outcome, the
 * number of sealed parts, the open part's bytes and where its records go on from, the events
 * begun and the last one's position, and the parts sealed since the last save (the next save
 * writes them). A program run on every new test (a problem's reference) gathers tens of thousands
 * of records over a run: appending to it reads none of them, and a lookup reads only the
 * fingerprints it asks for (see `decode`).
 */
class Chronicle {
  constructor(
    public load: ModuleLoad | undefined,
    public sealed: number,
    /** Where the open part's records go on from: events begun before it, the last one's position. */
    public base: { events: number; last: number },
    public open: number[],
    /** Events begun so far and the last one's position. */
    public events: number,
    public last: number,
    /** Sealed parts before these are read from the side rows; these are held here. */
    readonly readable = 0,
    readonly kept: Buffer[] = [],
    /** The kept parts sealed since the last save: the next save writes them. */
    readonly fresh: Buffer[] = [],
  ) {}

  static empty(): Chronicle {
    return new Chronicle(undefined, 0, { events: 0, last: 0 }, [], 0, 0);
  }

  /** Appends the event's records; its tests' latest result is now this event's. */
  record(position: number, request: number, fingerprints: readonly number[]): void {
    const opening = varintBytes(position - this.last) + varintBytes(request === 0 ? 0 : position - request);
    let done = 0;
    let first = true;
    do {
      const left = fingerprints.length - done;
      // The header at its largest for what is left: the cut depends on the records alone.
      const header = varintBytes(2 * left + 1) + (first ? opening : 0);
      if (this.open.length + header + (left > 0 ? FINGERPRINT_BYTES : 0) > PART_BYTES) this.#seal();
      const n = Math.min(left, Math.floor((PART_BYTES - this.open.length - header) / FINGERPRINT_BYTES));
      pushVarint(this.open, 2 * n + (first ? 1 : 0));
      if (first) {
        pushVarint(this.open, position - this.last);
        pushVarint(this.open, request === 0 ? 0 : position - request);
        this.events++;
        this.last = position;
      }
      for (let k = done; k < done + n; k++) {
        const fingerprint = fingerprints[k]!;
        for (let shift = (FINGERPRINT_BYTES - 1) * 8; shift >= 0; shift -= 8) this.open.push(Math.floor(fingerprint / 2 ** shift) % 256);
      }
      done += n;
      first = false;
    } while (done < fingerprints.length);
  }

  #seal(): void {
    const part = Buffer.from(this.open);
    this.kept.push(part);
    this.fresh.push(part);
    this.sealed++;
    this.open = [];
    this.base = { events: this.events, last: this.last };
  }

  head(): Buffer {
    const bytes = [this.load === undefined ? NO_LOAD : LOADS.indexOf(this.load)];
    pushVarint(bytes, this.sealed);
    pushVarint(bytes, this.base.events);
    pushVarint(bytes, this.base.last);
    return Buffer.from(bytes.concat(this.open));
  }

  /** The chronicle of a head row: its open part read, no sealed part. */
  static ofHead(head: Uint8Array): Chronicle {
    const { load, sealed, before, last, openAt } = headOf(head);
    const state = { events: before, last };
    readRecords(head, openAt, state, null, null);
    return new Chronicle(load, sealed, { events: before, last }, Array.from(head.subarray(openAt)), state.events, state.last, sealed);
  }

  /**
   * What the records say, read from the sealed parts (as many as the head names, in order) and
   * the open part: every event, and the place of the latest event holding each test (only the
   * tests in `wanted`, where given).
   */
  decode(parts: readonly Uint8Array[], wanted?: ReadonlySet<number>): { events: number[]; tests: Map<number, number> } {
    if (this.sealed !== parts.length) throw new Error(`a program's history row names ${this.sealed} sealed parts, ${parts.length} given`);
    const events: number[] = [];
    const tests = new Map<number, number>();
    const state = { events: 0, last: 0 };
    const event = (position: number, request: number) => events.push(position, request);
    const test = wanted === undefined ? (f: number, place: number) => tests.set(f, place) : (f: number, place: number) => wanted.has(f) && tests.set(f, place);
    for (const part of parts) readRecords(part, 0, state, event, test);
    if (state.events !== this.base.events || state.last !== this.base.last)
      throw new Error(
        `a program's history row goes on from event ${this.base.events} at position ${this.base.last}, where its sealed parts end at event ${state.events} at position ${state.last}`,
      );
    const open = Uint8Array.from(this.open);
    readRecords(open, 0, state, event, test);
    return { events, tests };
  }
}

/** An entry's rows written from nothing: its events recorded in order, each with the tests whose
 * latest result it holds (in fingerprint order). */
export function encodeEntry(e: ProgramEntry): { head: Buffer; parts: Buffer[] } {
  const byEvent = e.events.filter((_, i) => i % 2 === 0).map(() => [] as number[]);
  for (const [fingerprint, place] of [...e.tests].sort((a, b) => a[0] - b[0])) {
    const tests = byEvent[place];
    if (tests === undefined) throw new Error(`an entry's test names event ${place} of ${byEvent.length}`);
    tests.push(fingerprint);
  }
  const chronicle = Chronicle.empty();
  chronicle.load = e.load;
  byEvent.forEach((tests, i) => chronicle.record(e.events[2 * i]!, e.events[2 * i + 1]!, tests));
  return { head: chronicle.head(), parts: chronicle.fresh };
}

/** An entry read from its head row and its sealed parts, in order. */
export function decodeEntry(head: Uint8Array, parts: readonly Uint8Array[] = []): ProgramEntry {
  const chronicle = Chronicle.ofHead(head);
  return { load: chronicle.load, ...chronicle.decode(parts) };
}

/** A program head's row: its hash, then the entry's head (see Chronicle.head). */
function programHeadRow(program: string, chronicle: Chronicle): Buffer {
  return Buffer.concat([checkedHash(program), chronicle.head()]);
}

/** A program head's row read: its hash and the entry's head. */
function programHeadOf(row: Uint8Array, number: number): { program: string; head: Uint8Array } {
  if (row.length <= HASH_BYTES) throw new Error(`the head of program number ${number} in a history's rows is ${row.length} bytes, too short to hold its hash`);
  return { program: Buffer.from(row.buffer, row.byteOffset, HASH_BYTES).toString('hex'), head: row.subarray(HASH_BYTES) };
}

/**
 * A scope's directory: its programs in the order they were first recorded, by fingerprint and
 * number. Its rows are cut by the records alone: part k holds records [53k, 53k + 53), the head
 * the records after the sealed parts.
 */
class Directory {
  constructor(
    readonly fingerprints: number[] = [],
    readonly numbers: number[] = [],
    /** Sealed parts written by the last save (or read from it): later ones are written next. */
    public savedParts = 0,
  ) {}

  /** The numbers of the programs whose hash begins with the fingerprint, oldest first. */
  numbersOf(fingerprint: number): number[] {
    const out: number[] = [];
    const { fingerprints, numbers } = this;
    for (let i = 0; i < fingerprints.length; i++) if (fingerprints[i] === fingerprint) out.push(numbers[i]!);
    return out;
  }

  add(fingerprint: number, number: number): void {
    this.fingerprints.push(fingerprint);
    this.numbers.push(number);
  }

  get sealed(): number {
    return Math.floor(this.numbers.length / DIRECTORY_PART_RECORDS);
  }

  #records(from: number, to: number, out: Buffer, at: number): void {
    for (let i = from; i < to; i++, at += DIRECTORY_RECORD_BYTES) {
      out.writeUIntBE(this.fingerprints[i]!, at, FINGERPRINT_BYTES);
      out.writeUIntBE(this.numbers[i]!, at + FINGERPRINT_BYTES, NUMBER_BYTES);
    }
  }

  head(): Buffer {
    const sealed = this.sealed;
    const prefix: number[] = [];
    pushVarint(prefix, sealed);
    const from = sealed * DIRECTORY_PART_RECORDS;
    const out = Buffer.alloc(prefix.length + (this.numbers.length - from) * DIRECTORY_RECORD_BYTES);
    out.set(prefix);
    this.#records(from, this.numbers.length, out, prefix.length);
    return out;
  }

  part(k: number): Buffer {
    const out = Buffer.alloc(DIRECTORY_PART_RECORDS * DIRECTORY_RECORD_BYTES);
    this.#records(k * DIRECTORY_PART_RECORDS, (k + 1) * DIRECTORY_PART_RECORDS, out, 0);
    return out;
  }

  /** The number of sealed parts a directory's head row names. */
  static sealedOf(head: Uint8Array): number {
    return readVarint(head, 0)[0];
  }

  /** The directory decoded from its head row and its sealed parts, in order. */
  static decode(scope: string, head: Uint8Array, parts: readonly Uint8Array[]): Directory {
    const [sealed, openAt] = readVarint(head, 0);
    if (sealed !== parts.length) throw new Error(`the directory of scope ${JSON.stringify(scope)} names ${sealed} sealed parts, ${parts.length} given`);
    const directory = new Directory([], [], sealed);
    const records = (bytes: Uint8Array, from: number, whole: boolean) => {
      const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      const size = b.length - from;
      if (size % DIRECTORY_RECORD_BYTES !== 0 || (whole && size !== DIRECTORY_PART_RECORDS * DIRECTORY_RECORD_BYTES))
        throw new Error(
          `a row of the directory of scope ${JSON.stringify(scope)} holds ${size} bytes of records, not whole records of ${DIRECTORY_RECORD_BYTES}`,
        );
      for (let at = from; at < b.length; at += DIRECTORY_RECORD_BYTES)
        directory.add(b.readUIntBE(at, FINGERPRINT_BYTES), b.readUIntBE(at + FINGERPRINT_BYTES, NUMBER_BYTES));
    };
    for (const part of parts) records(part, 0, true);
    records(head, openAt, false);
    return directory;
  }
}

/** Reads the parts a head names (as many as `sealed`, in order), or says which one is missing. */
function partsOf(side: SideReader, key: Buffer, sealed: number, what: string): Uint8Array[] {
  if (sealed === 0) return [];
  const parts = side.getMany(Array.from({ length: sealed }, (_, k) => partKey(key, k)));
  const missing = parts.indexOf(undefined);
  if (missing >= 0) throw new Error(`${what} names ${sealed} parts, and part ${missing} is missing`);
  return parts as Uint8Array[];
}

/** The entries of side rows (every row of some scopes and of their programs, in key order):
 * scope, program, entry. */
export function entriesOfRows(rows: Iterable<readonly [Uint8Array, Uint8Array]>): { scope: string; program: string; entry: ProgramEntry }[] {
  const scopeOf = new Map<number, string>();
  const out: { scope: string; program: string; entry: ProgramEntry }[] = [];
  let dir: { scope: string; head: Uint8Array; parts: Uint8Array[] } | undefined;
  let open: { number: number; parts: Uint8Array[] } | undefined;
  const closeDirectory = () => {
    if (dir) for (const n of Directory.decode(dir.scope, dir.head, dir.parts).numbers) scopeOf.set(n, dir.scope);
    dir = undefined;
  };
  const closeProgram = (number: number, row: Uint8Array) => {
    const parts = open?.number === number ? open.parts : [];
    const { program, head } = programHeadOf(row, number);
    const scope = scopeOf.get(number);
    if (scope === undefined) throw new Error(`program number ${number} (${program}) is in no scope's directory`);
    out.push({ scope, program, entry: decodeEntry(head, parts) });
    open = undefined;
  };
  for (const [key, value] of rows) {
    const k = parseKey(key);
    if (k.kind === 'directory') {
      if (k.part === undefined) {
        closeDirectory();
        dir = { scope: k.scope, head: value, parts: [] };
      } else if (dir?.scope === k.scope && k.part === dir.parts.length) dir.parts.push(value);
      else throw new Error(`side row of part ${k.part} of the directory of scope ${JSON.stringify(k.scope)} follows no head and parts before it`);
      continue;
    }
    closeDirectory();
    if (open !== undefined && open.number !== k.number) throw new Error(`the parts of program number ${open.number} are followed by no head`);
    if (k.part === undefined) closeProgram(k.number, value);
    else if ((open?.parts.length ?? 0) === k.part) (open ??= { number: k.number, parts: [] }).parts.push(value);
    else throw new Error(`side row of part ${k.part} of program number ${k.number} follows no parts before it`);
  }
  closeDirectory();
  if (open !== undefined) throw new Error(`the parts of program number ${open.number} are followed by no head`);
  return out;
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

/** A program's chronicle as held: its number (its rows' key) with it. */
interface Held {
  number: number;
  chronicle: Chronicle;
}

/** The index of programs' recorded results (see the top of this file). */
export class ProgramHistory {
  /** Entries read or changed since the last save (null: read, and none is recorded). */
  readonly #held: Nested<Held | null> = new Map();
  /** Entries changed since the last save: the next save writes their head and new parts. */
  readonly #changed: Nested<Held> = new Map();
  /** Directories read or changed since the last save. */
  readonly #directories = new Map<string, Directory>();
  /** Directories changed since the last save. */
  readonly #changedDirectories = new Set<string>();
  /** Numbers given since the side rows were last read: one event records one program, so each
   * is new. */
  readonly #numbered = new Set<number>();
  /** The side rows of the latest snapshot (null: folded from the start, none saved yet). */
  #side: SideReader | null;
  /** No snapshot saved or restored yet: the next one replaces the actor's side rows. */
  #replace: boolean;

  constructor(side: SideReader | null) {
    this.#side = side;
    this.#replace = side === null;
  }

  #directory(scope: string): Directory {
    let directory = this.#directories.get(scope);
    if (directory !== undefined) return directory;
    const side = this.#side;
    const key = directoryKey(scope);
    const head = side?.get(key);
    directory =
      head === undefined
        ? new Directory()
        : Directory.decode(scope, head, partsOf(side!, key, Directory.sealedOf(head), `the directory of scope ${JSON.stringify(scope)}`));
    // Kept until the next save: a problem's programs are asked about together.
    this.#directories.set(scope, directory);
    return directory;
  }

  #held_(scope: string, program: string): Held | undefined {
    const held = nestedGet(this.#held, scope, program);
    if (held !== undefined) return held ?? undefined;
    let found: Held | null = null;
    const side = this.#side;
    for (const number of this.#directory(scope).numbersOf(programFingerprintOf(program))) {
      // A program numbered since the side rows were read is held: another program, not this one.
      if (this.#numbered.has(number)) continue;
      const key = programKey(number);
      const row = side?.get(partKey(key, HEAD_PART));
      if (row === undefined) throw new Error(`the directory of scope ${JSON.stringify(scope)} names program number ${number}, which has no head`);
      const { program: hash, head } = programHeadOf(row, number);
      if (hash !== program) continue;
      found = { number, chronicle: Chronicle.ofHead(head) };
      break;
    }
    // Kept until the next save: a program is asked about several times in a request.
    nestedSet(this.#held, scope, program, found);
    return found ?? undefined;
  }

  /** What the program's records say: all of it, or only the tests in `wanted`. Its sealed parts
   * are read from the side rows (those sealed since they were read are held). */
  #decode(scope: string, program: string, held: Held, wanted?: ReadonlySet<number>): ProgramEntry {
    const { chronicle, number } = held;
    const saved =
      chronicle.readable === 0
        ? []
        : partsOf(this.#side!, programKey(number), chronicle.readable, `the history of program ${program} in scope ${JSON.stringify(scope)}`);
    return { load: chronicle.load, ...chronicle.decode(saved.length === 0 ? chronicle.kept : [...saved, ...chronicle.kept], wanted) };
  }

  /** What is recorded of the program in the scope (undefined: nothing), all of it: every event
   * and every test's latest. */
  entry(scope: string, program: string): ProgramEntry | undefined {
    const held = this.#held_(scope, program);
    return held && this.#decode(scope, program, held);
  }

  /** What is recorded of the program in the scope of the tests with these fingerprints: every
   * event, and the latest event of each of those tests recorded (undefined: nothing recorded).
   * Only those tests are kept from the records read. */
  entryOf(scope: string, program: string, fingerprints: ReadonlySet<number>): ProgramEntry | undefined {
    const held = this.#held_(scope, program);
    return held && this.#decode(scope, program, held, fingerprints);
  }

  /** The program's chronicle to change; a program not yet recorded takes the position of the
   * event that first records it as its number. */
  #changing(scope: string, program: string, position: number): Chronicle {
    let held = this.#held_(scope, program);
    if (held === undefined) {
      if (this.#numbered.has(position) || !Number.isSafeInteger(position) || position < 0 || position >= 2 ** (8 * NUMBER_BYTES))
        throw new Error(
          `program ${program} in scope ${JSON.stringify(scope)}: position ${position} cannot number it (another program has it, or it is out of range)`,
        );
      checkedHash(program);
      this.#numbered.add(position);
      held = { number: position, chronicle: Chronicle.empty() };
      nestedSet(this.#held, scope, program, held);
      this.#directory(scope).add(programFingerprintOf(program), position);
      this.#changedDirectories.add(scope);
    }
    nestedSet(this.#changed, scope, program, held);
    return held.chronicle;
  }

  /** Notes that the event at `position` recorded results of the program on `tests` (sandbox
   * errors left out), named by the pairs of the request at `request` (0: the event names its
   * test itself). */
  record(scope: string, program: string, position: number, request: number, tests: Iterable<string>): void {
    const known = this.#held_(scope, program)?.chronicle;
    // Folded once per event, in log order: a position at or before the last one is that event again.
    if (known !== undefined && known.events > 0 && known.last >= position) return;
    this.#changing(scope, program, position).record(position, request, Array.from(tests, fingerprintOf));
  }

  /** Merges a load outcome reported by the event at `position` into the program's (see
   * mergeLoad). */
  recordLoad(scope: string, program: string, position: number, next: ModuleLoad): void {
    const known = this.load(scope, program);
    const merged = mergeLoad(known, next);
    if (merged === known) return;
    this.#changing(scope, program, position).load = merged;
  }

  load(scope: string, program: string): ModuleLoad | undefined {
    return this.#held_(scope, program)?.chronicle.load;
  }

  /** The rows of the entries changed since the last saved snapshot: each changed directory's head
   * and the parts it sealed since, each changed program's head and the parts it sealed since
   * (every row before the first save, which replaces the actor's rows). */
  sideRows(): SideRows {
    const rows: [Uint8Array, Uint8Array][] = [];
    for (const scope of this.#changedDirectories) {
      const directory = this.#directories.get(scope)!;
      const key = directoryKey(scope);
      rows.push([key, directory.head()]);
      for (let k = directory.savedParts; k < directory.sealed; k++) rows.push([partKey(key, k), directory.part(k)]);
    }
    for (const programs of this.#changed.values())
      for (const [program, { number, chronicle }] of programs) {
        const key = programKey(number);
        rows.push([partKey(key, HEAD_PART), programHeadRow(program, chronicle)]);
        const first = chronicle.sealed - chronicle.fresh.length;
        chronicle.fresh.forEach((part, k) => rows.push([partKey(key, first + k), part]));
      }
    return { replace: this.#replace, rows };
  }

  /** Once saved, entries are read from `saved` when asked for and dropped here. Without `saved`
   * (a caller keeping no table) they stay, and only what changes from now on is written next. */
  sideSaved(saved?: SideReader): void {
    this.#replace = false;
    for (const programs of this.#changed.values()) for (const { chronicle } of programs.values()) chronicle.fresh.length = 0;
    this.#changed.clear();
    for (const scope of this.#changedDirectories) {
      const directory = this.#directories.get(scope)!;
      directory.savedParts = directory.sealed;
    }
    this.#changedDirectories.clear();
    if (saved === undefined) return;
    this.#numbered.clear();
    this.#side = saved;
    this.#held.clear();
    this.#directories.clear();
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
    for (const { scope, program, entry } of entriesOfRows(this.#side?.all() ?? []))
      if (nestedGet(this.#held, scope, program) === undefined) text(scope, program, entry);
    for (const [scope, programs] of this.#held)
      for (const [program, held] of programs) if (held !== null) text(scope, program, this.#decode(scope, program, held));
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
  // Each program's records are read once, keeping only the tests asked about.
  const asked = new Map<string, { tests: string[]; fingerprints: Set<number> }>();
  for (const { programHash, testHash } of pairs) {
    let a = asked.get(programHash);
    if (a === undefined) asked.set(programHash, (a = { tests: [], fingerprints: new Set() }));
    a.tests.push(testHash);
    a.fingerprints.add(fingerprintOf(testHash));
  }
  for (const [program, { tests, fingerprints }] of asked) {
    const entry = history.entryOf(scope, program, fingerprints);
    if (entry === undefined) continue;
    for (const test of tests) {
      const place = entry.tests.get(fingerprintOf(test));
      if (place !== undefined) wanted.push({ program, test, position: entry.events[2 * place]!, request: entry.events[2 * place + 1]! });
    }
  }
  if (wanted.length === 0) return RecordedResults.EMPTY;
  return new RecordedResults(await readResults(wanted, read));
}
