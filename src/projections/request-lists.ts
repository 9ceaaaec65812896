/**
 * An ExecutionRequested's lists as answer selection keeps them, packed. A reward request's lists
 * are tens of kilobytes as JSON, and a problem-round's requests name the same tests, so:
 * - hashes are 32 bytes each in one blob (the event's hashes are lowercase hex: one hex decode
 *   of the joined list, no string per hash);
 * - a request's test ids and its test hashes are each stored once under a digest of their
 *   content, and the request names both: a problem-round's oracle, kill and reward requests
 *   name the same test ids, its oracle and kill requests the same hashes (the reward request's
 *   are the corrected tests');
 * - test ids are stored in the log's packed form (src/events/packed-json.ts): ids that count up
 *   (`.../s0/t0/0`, `.../s0/t0/1`, ...) as runs. At `bench scale --fraction 0.02` the lists'
 *   text went from 16.4 to 8.3 MB (a Mistake Book test's id names its input and stays whole),
 *   the read models from 84.7 to 70.4 bytes per result;
 * - pairs and reused pairs are runs of one program on consecutive tests, three little-endian
 *   uint32 each (program, first test, length): a request of one program on every test is one
 *   run, whatever its number of tests.
 * `packRequest` writes these rows, `requestListsOf` is the one reader.
 */
import { createHash } from 'node:crypto';
import type { EventData } from '../events/catalog.js';
import { packJson, unpackJson, type Json } from '../events/packed-json.js';
import { put, type ReadView, type RowWrite, type TableSpec } from './readmodel.js';

type Requested = EventData<'ExecutionRequested'>;

/** Each request's lists. */
export const REQUEST_LISTS = 'answer_selection_request_lists';
/** Test id lists (packed JSON text) by a digest of the list's JSON: a problem-round's requests share one. */
export const TEST_IDS = 'answer_selection_test_ids';
/** Test hash lists by a digest of their bytes: a problem-round's oracle and kill requests share one. */
export const TEST_HASHES = 'answer_selection_test_hashes';

export const REQUEST_LIST_TABLES = {
  [REQUEST_LISTS]: {
    columns: { request_id: 'text', program_ids: 'text', program_hashes: 'blob', test_ids: 'text', test_hashes: 'text', pairs: 'blob', reused: 'blob' },
    key: ['request_id'],
    internal: true,
  },
  [TEST_IDS]: { columns: { key: 'text', ids: 'text' }, key: ['key'], internal: true },
  [TEST_HASHES]: { columns: { key: 'text', hashes: 'blob' }, key: ['key'], internal: true },
} as const satisfies Readonly<Record<string, TableSpec>>;

/** Requests whose verdicts answer selection reads, reused pairs included. */
export const collectedPurpose = (purpose: string) => purpose === 'reward' || purpose === 'heldout';

const HASH_BYTES = 32;
const RUN_BYTES = 12;

/** Flat (program, test) pairs as runs of one program on consecutive tests. */
function packRuns(pairs: readonly number[]): Buffer {
  const runs: number[] = [];
  for (let i = 0; i < pairs.length; i += 2) {
    const p = pairs[i]!;
    const t = pairs[i + 1]!;
    const n = runs.length;
    if (n > 0 && runs[n - 3] === p && runs[n - 2]! + runs[n - 1]! === t) runs[n - 1]!++;
    else runs.push(p, t, 1);
  }
  const b = Buffer.allocUnsafe(runs.length * 4);
  for (let i = 0; i < runs.length; i++) b.writeUInt32LE(runs[i]!, i * 4);
  return b;
}

function unpackRuns(requestId: string, what: string, b: Uint8Array): Uint32Array {
  if (b.length % RUN_BYTES !== 0) throw new RequestListsError(`request ${requestId}: its ${what} take ${b.length} bytes, not a whole number of runs`);
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  let count = 0;
  for (let at = 8; at < b.length; at += RUN_BYTES) count += view.getUint32(at, true);
  const out = new Uint32Array(count * 2);
  let k = 0;
  for (let at = 0; at < b.length; at += RUN_BYTES) {
    const p = view.getUint32(at, true);
    const t = view.getUint32(at + 4, true);
    const n = view.getUint32(at + 8, true);
    for (let j = 0; j < n; j++) {
      out[k++] = p;
      out[k++] = t + j;
    }
  }
  return out;
}

const digest = (data: string | Buffer) => createHash('sha256').update(data).digest('hex').slice(0, 32);

/**
 * The rows of one request (pure: the same data, the same rows). A test list's row is left out
 * when `view` already has it (an earlier request wrote it): its key is its content's digest, so
 * the row there is this one.
 */
export function packRequest(d: Requested, view: ReadView): RowWrite[] {
  const np = d.programs.length;
  const nt = d.tests.length;
  const programIds = new Array<string>(np);
  const programHashes = new Array<string>(np);
  const testIds = new Array<string>(nt);
  const testHashes = new Array<string>(nt);
  for (let i = 0; i < np; i++) {
    const p = d.programs[i]!;
    programIds[i] = p.programId;
    programHashes[i] = p.programHash;
  }
  for (let i = 0; i < nt; i++) {
    const t = d.tests[i]!;
    testIds[i] = t.testId;
    testHashes[i] = t.testHash;
  }
  // Keyed by the list's JSON (native, cheap), packed only when no earlier request stored it.
  const idsKey = digest(JSON.stringify(testIds));
  const hashes = Buffer.from(testHashes.join(''), 'hex');
  const hashesKey = digest(hashes);
  const out: RowWrite[] = [];
  if (view.get(TEST_IDS, { key: idsKey }) === undefined) out.push(put(TEST_IDS, { key: idsKey, ids: JSON.stringify(packJson(testIds)) }));
  if (view.get(TEST_HASHES, { key: hashesKey }) === undefined) out.push(put(TEST_HASHES, { key: hashesKey, hashes }));
  // Reused pairs are looked up for collected requests only (answer selection's verdictsOf).
  const reused = collectedPurpose(d.purpose) ? d.reused : [];
  out.push(
    put(REQUEST_LISTS, {
      request_id: d.requestId,
      program_ids: JSON.stringify(programIds),
      program_hashes: Buffer.from(programHashes.join(''), 'hex'),
      test_ids: idsKey,
      test_hashes: hashesKey,
      pairs: packRuns(d.pairs),
      reused: packRuns(reused),
    }),
  );
  return out;
}

export class RequestListsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RequestListsError';
  }
}

/** A request's lists as stored: ids as strings, hashes unpacked to hex when asked for. */
export class RequestLists {
  readonly #programHashes: Uint8Array;
  readonly #testHashes: Uint8Array;
  readonly #programHex: (string | undefined)[];
  readonly #testHex: (string | undefined)[];

  constructor(
    readonly requestId: string,
    readonly programIds: readonly string[],
    programHashes: Uint8Array,
    readonly testIds: readonly string[],
    testHashes: Uint8Array,
    /** (program index, test index) per pair position, flat. */
    readonly pairs: Uint32Array,
    /** The same, for pairs answered by an earlier execution (collected requests only). */
    readonly reused: Uint32Array,
  ) {
    if (programHashes.length !== programIds.length * HASH_BYTES || testHashes.length !== testIds.length * HASH_BYTES) {
      throw new RequestListsError(
        `request ${requestId}: ${programIds.length} programs and ${testIds.length} tests, but ${programHashes.length / HASH_BYTES} and ${testHashes.length / HASH_BYTES} hashes`,
      );
    }
    this.#programHashes = programHashes;
    this.#testHashes = testHashes;
    this.#programHex = new Array<string | undefined>(programIds.length);
    this.#testHex = new Array<string | undefined>(testIds.length);
  }

  get pairCount(): number {
    return this.pairs.length / 2;
  }

  programHash(i: number): string | undefined {
    if (!(i >= 0 && i < this.programIds.length)) return undefined;
    return (this.#programHex[i] ??= hexAt(this.#programHashes, i));
  }

  testHash(i: number): string | undefined {
    if (!(i >= 0 && i < this.testIds.length)) return undefined;
    return (this.#testHex[i] ??= hexAt(this.#testHashes, i));
  }
}

/** A stored test id list read back, refused unless it is a list of strings. */
function testIdsOf(requestId: string, text: string): string[] {
  const ids = unpackJson(JSON.parse(text) as Json);
  if (!Array.isArray(ids) || ids.some((id) => typeof id !== 'string'))
    throw new RequestListsError(`request ${requestId}: its test ids are not a list of strings`);
  return ids as string[];
}

const hexAt = (b: Uint8Array, i: number) => Buffer.from(b.buffer, b.byteOffset + i * HASH_BYTES, HASH_BYTES).toString('hex');

interface ListsRow {
  program_ids: string;
  program_hashes: Uint8Array;
  test_ids: string;
  test_hashes: string;
  pairs: Uint8Array;
  reused: Uint8Array;
}

/** The one reader: a request's lists from the rows `packRequest` wrote, or undefined when the
 * request is not there. A request naming a test list that is missing is refused. */
export function requestListsOf(view: ReadView, requestId: string): RequestLists | undefined {
  const r = view.get(REQUEST_LISTS, { request_id: requestId }) as ListsRow | undefined;
  if (r === undefined) return undefined;
  const ids = view.get(TEST_IDS, { key: r.test_ids }) as { ids: string } | undefined;
  if (ids === undefined) throw new RequestListsError(`request ${requestId} names test ids ${r.test_ids}, which are not in ${TEST_IDS}`);
  const hashes = view.get(TEST_HASHES, { key: r.test_hashes }) as { hashes: Uint8Array } | undefined;
  if (hashes === undefined) throw new RequestListsError(`request ${requestId} names test hashes ${r.test_hashes}, which are not in ${TEST_HASHES}`);
  return new RequestLists(
    requestId,
    JSON.parse(r.program_ids) as string[],
    r.program_hashes,
    testIdsOf(requestId, ids.ids),
    hashes.hashes,
    unpackRuns(requestId, 'pairs', r.pairs),
    unpackRuns(requestId, 'reused pairs', r.reused),
  );
}
