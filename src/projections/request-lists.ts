/**
 * An ExecutionRequested's lists as the read models keep them, packed: the executions read
 * model's tables, which answer selection reads too. A reward request's lists are tens of
 * kilobytes as JSON, and a problem's requests name the same tests, so:
 * - hashes are 32 bytes each in one blob (the event's hashes are lowercase hex: one hex decode
 *   of the joined list, no string per hash);
 * - pairs and reused pairs are little-endian uint32 blobs;
 * - a request's test ids are stored once under a digest of their text in `request_test_ids`,
 *   and each request names them: a problem's oracle and reward requests name the same tests
 *   (under other hashes: the reward request's are the corrected tests'), so one row serves both.
 * `packRequest` writes these rows, `requestListsOf` is the one reader (both read models use it).
 */
import { createHash } from 'node:crypto';
import type { EventData } from '../events/catalog.js';
import { put, type ReadView, type RowWrite, type TableSpec } from './readmodel.js';

type Requested = EventData<'ExecutionRequested'>;

/** Each request's lists, stored once. */
export const EXECUTION_REQUESTS = 'execution_requests';
/** Test id lists by a digest of their text: a problem's requests share one. */
export const REQUEST_TESTS = 'request_test_ids';

export const REQUEST_LIST_TABLES = {
  [EXECUTION_REQUESTS]: {
    columns: {
      request_id: 'text',
      purpose: 'text',
      program_ids: 'text',
      program_hashes: 'blob',
      test_ids: 'text',
      test_hashes: 'blob',
      pairs: 'blob',
      reused: 'blob',
    },
    key: ['request_id'],
  },
  [REQUEST_TESTS]: { columns: { test_ids: 'text', ids: 'text' }, key: ['test_ids'] },
} as const satisfies Readonly<Record<string, TableSpec>>;

/** Requests whose verdicts answer selection reads, reused pairs included. */
export const collectedPurpose = (purpose: string) => purpose === 'reward' || purpose === 'heldout';

const HASH_BYTES = 32;

/** Indexes as a little-endian uint32 blob (the same bytes on every machine). */
function packIndexes(list: readonly number[]): Buffer {
  const b = Buffer.allocUnsafe(list.length * 4);
  for (let i = 0; i < list.length; i++) b.writeUInt32LE(list[i]!, i * 4);
  return b;
}

function unpackIndexes(b: Uint8Array): Uint32Array {
  const out = new Uint32Array(b.length / 4);
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  for (let i = 0; i < out.length; i++) out[i] = view.getUint32(i * 4, true);
  return out;
}

/** A list of lowercase hex hashes as one blob, 32 bytes each. */
function packHashes(hashes: string[]): Buffer {
  return Buffer.from(hashes.join(''), 'hex');
}

/**
 * The rows of one request (pure: the same data, the same rows). The test ids' row is left out
 * when `view` already has it (a problem's earlier request wrote it): its key is its text's
 * digest, so the row there is this one.
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
  const ids = JSON.stringify(testIds);
  const key = createHash('sha256').update(ids).digest('hex').slice(0, 32);
  const out: RowWrite[] = [];
  if (view.get(REQUEST_TESTS, { test_ids: key }) === undefined) out.push(put(REQUEST_TESTS, { test_ids: key, ids }));
  // Reused pairs are looked up for collected requests only (answer selection's verdictsOf).
  const reused = collectedPurpose(d.purpose) ? d.reused : [];
  out.push(
    put(EXECUTION_REQUESTS, {
      request_id: d.requestId,
      purpose: d.purpose,
      program_ids: JSON.stringify(programIds),
      program_hashes: packHashes(programHashes),
      test_ids: key,
      test_hashes: packHashes(testHashes),
      pairs: packIndexes(d.pairs),
      reused: packIndexes(reused),
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

const hexAt = (b: Uint8Array, i: number) => Buffer.from(b.buffer, b.byteOffset + i * HASH_BYTES, HASH_BYTES).toString('hex');

/** The one reader: a request's lists from the rows `packRequest` wrote, or undefined when the
 * request is not there. A request naming test ids that are missing is refused. */
export function requestListsOf(view: ReadView, requestId: string): RequestLists | undefined {
  const r = view.get(EXECUTION_REQUESTS, { request_id: requestId }) as
    { program_ids: string; program_hashes: Uint8Array; test_ids: string; test_hashes: Uint8Array; pairs: Uint8Array; reused: Uint8Array } | undefined;
  if (r === undefined) return undefined;
  const t = view.get(REQUEST_TESTS, { test_ids: r.test_ids }) as { ids: string } | undefined;
  if (t === undefined) throw new RequestListsError(`request ${requestId} names test ids ${r.test_ids}, which are not in ${REQUEST_TESTS}`);
  return new RequestLists(
    requestId,
    JSON.parse(r.program_ids) as string[],
    r.program_hashes,
    JSON.parse(t.ids) as string[],
    r.test_hashes,
    unpackIndexes(r.pairs),
    unpackIndexes(r.reused),
  );
}
