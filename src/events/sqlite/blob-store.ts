/**
 * The BlobStore port (./blobs.ts) in the log's own SQLite file. Writers put a payload before appending the event that names its hash,
 * so every hash in the log resolves.
 */
import type Database from 'better-sqlite3';
import { BlobCorruptError, BlobNotFoundError } from '../errors.js';
import { assertBlobHash, decodeBlobText, sha256Hex, toBytes, type BlobStore } from '../blobs.js';
import { deflateRawSync, inflateRawSync, constants } from 'node:zlib';
import { FifoCache } from '../../core/fifo-cache.js';
import { RecentBlobs } from './recent-blobs.js';

/** Bytes of blobs kept in memory after a read or a write (./recent-blobs.ts). */
const RECENT_BYTES = 64 << 20;
/** Blobs held back for the next append before they are written on their own. Keys are hashes,
 * so every insert lands on a random page of the table: a batch written on its own rewrites
 * about one page per blob, and batches of a few thousand (as a step's tests once were) cost
 * more than everything else in the loop. Held for the step's append instead, a step's blobs
 * dirty each page once. */
const MAX_PENDING = 1 << 20;
const MAX_PENDING_BYTES = 128 << 20;

/** Small blobs (a test, a program) put in one batch are stored together, PACK_SIZE to a row of
 * blob_packs, deflated as one: each alone costs its 32-byte key and a row, more than its
 * bytes, and tests share most of their text. Each is found through blob_members, keyed by
 * the first 52 bits of its hash (a safe integer: an 8-byte varint, not 32 bytes). Two hashes
 * that share those bits (about one pair in a run of 2^26 blobs) are told apart by hashing the
 * member: the second one is stored in blobs under its full key. */
const PACKED_MAX = 256;
const PACK_SIZE = 64;
const PACK_CACHE = 256;

/** The first 52 bits of a hex sha256, as a safe integer. */
const prefixOf = (hash: string): number => parseInt(hash.slice(0, 13), 16);

/** A pack's stored form: member count (u16), each member's length (u32), the members; deflated. */
function packBytes(members: readonly Buffer[]): Buffer {
  const head = Buffer.alloc(2 + 4 * members.length);
  head.writeUInt16BE(members.length, 0);
  members.forEach((m, i) => head.writeUInt32BE(m.byteLength, 2 + 4 * i));
  return deflateRawSync(Buffer.concat([head, ...members]), { level: constants.Z_BEST_SPEED });
}

/** The members of a stored pack; undefined when it does not inflate or its lengths do not add up. */
function unpackBytes(stored: Buffer): Buffer[] | undefined {
  let raw: Buffer;
  try {
    raw = inflateRawSync(stored);
  } catch {
    return undefined;
  }
  if (raw.byteLength < 2) return undefined;
  const n = raw.readUInt16BE(0);
  let at = 2 + 4 * n;
  if (raw.byteLength < at) return undefined;
  const out: Buffer[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const len = raw.readUInt32BE(2 + 4 * i);
    if (at + len > raw.byteLength) return undefined;
    out[i] = raw.subarray(at, at + len);
    at += len;
  }
  return at === raw.byteLength ? out : undefined;
}

/** A row under a binary key stores a tag byte, then the bytes as they are (RAW) or deflated
 * (DEFLATED: kept when it saves a tenth; model responses and training batches are text). Rows
 * under a hex key (format 1) hold the bytes alone. */
const RAW = 0;
const DEFLATED = 1;
const MIN_DEFLATED = 256;

function storedBlob(bytes: Buffer): Buffer {
  if (bytes.byteLength >= MIN_DEFLATED) {
    const packed = deflateRawSync(bytes, { level: constants.Z_BEST_SPEED });
    if (packed.byteLength * 10 < bytes.byteLength * 9) return Buffer.concat([Buffer.of(DEFLATED), packed]);
  }
  return Buffer.concat([Buffer.of(RAW), bytes]);
}

/** The bytes a row under a binary key stands for; undefined when its tag is not one written here. */
function blobOfRow(row: Buffer): Buffer | undefined {
  if (row.byteLength === 0) return undefined;
  if (row[0] === RAW) return row.subarray(1);
  if (row[0] !== DEFLATED) return undefined;
  try {
    return inflateRawSync(row.subarray(1));
  } catch {
    return undefined;
  }
}

/**
 * Blobs in the log's SQLite file, keyed by the 32 bytes of their sha256 (half the size of its
 * hex text, which files written before format 2 hold as keys; both are read, so such a file
 * keeps working when it is appended to), each row's bytes deflated where that pays. A put is buffered and written in the same transaction as the
 * next append (or at close, or when the buffer grows large): an autocommitted insert per blob
 * would cost one fsync each at synchronous=FULL, and a blob is only ever looked for through an
 * event that names it, which that append writes. A blob put by a process that dies before its
 * next append is lost with the work that would have referenced it.
 */
/** Made by the store itself: a file of format 1 (or 2 before packs) gains them when opened. */
const PACK_TABLES = `
CREATE TABLE IF NOT EXISTS blob_packs (id INTEGER PRIMARY KEY, bytes BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS blob_members (prefix INTEGER PRIMARY KEY, place INTEGER NOT NULL);
`;

export class SqliteBlobStore implements BlobStore {
  readonly #db: Database.Database;
  readonly #insert: Database.Statement;
  readonly #select: Database.Statement;
  readonly #exists: Database.Statement;
  /** Not yet written: hash -> bytes. */
  readonly #pending = new Map<string, Buffer>();
  #pendingBytes = 0;
  /** Hashes known to be stored (bounded): a repeated put costs a hash and a lookup. */
  readonly #stored = new Set<string>();
  /** Recently read or written blobs, already verified against their hash (blobs never change),
   * up to RECENT_BYTES: a step's tests are read back by the Judge and the Executor after they
   * are written, and a cache bounded by count missed most of them at Code-A1's size. */
  readonly #recent = new RecentBlobs(RECENT_BYTES);
  readonly #insertPack: Database.Statement;
  readonly #selectPack: Database.Statement;
  readonly #insertMember: Database.Statement;
  readonly #selectMember: Database.Statement;
  /** Recently read packs, inflated: a problem's tests were put together and are read together. */
  readonly #packs = new FifoCache<number, Buffer[]>();

  constructor(db: Database.Database) {
    this.#db = db;
    this.#insert = db.prepare('INSERT OR IGNORE INTO blobs (hash, bytes) VALUES (?, ?)');
    this.#select = db.prepare('SELECT bytes FROM blobs WHERE hash = ?').pluck();
    // The key is bound as 32 bytes, or as hex text for a blob an older writer put.
    this.#exists = db.prepare('SELECT 1 FROM blobs WHERE hash = ?').pluck();
    db.exec(PACK_TABLES);
    this.#insertPack = db.prepare('INSERT INTO blob_packs (bytes) VALUES (?)');
    this.#selectPack = db.prepare('SELECT bytes FROM blob_packs WHERE id = ?').pluck();
    this.#insertMember = db.prepare('INSERT OR IGNORE INTO blob_members (prefix, place) VALUES (?, ?)');
    this.#selectMember = db.prepare('SELECT place FROM blob_members WHERE prefix = ?').pluck();
  }

  async put(content: Uint8Array | string): Promise<string> {
    const bytes = toBytes(content);
    const hash = sha256Hex(bytes);
    if (this.#stored.has(hash) || this.#pending.has(hash)) return hash;
    // Copied: the caller may reuse its buffer.
    this.#pending.set(hash, Buffer.from(bytes));
    this.#pendingBytes += bytes.byteLength;
    if (this.#pending.size >= MAX_PENDING || this.#pendingBytes >= MAX_PENDING_BYTES) this.#db.transaction(() => this.writePending())();
    return hash;
  }

  /** Writes buffered blobs; called inside the append transaction, and on close. */
  writePending(): void {
    if (this.#pending.size === 0) return;
    const whole: string[] = [];
    const small: string[] = [];
    // Small ones in put order (a step's tests of one problem side by side).
    for (const [hash, bytes] of this.#pending) (bytes.byteLength <= PACKED_MAX ? small : whole).push(hash);
    // A lone small blob is not worth a pack.
    if (small.length === 1) whole.push(small.pop()!);
    const members: [number, number, string][] = [];
    for (let at = 0; at < small.length; at += PACK_SIZE) {
      const group = small.slice(at, at + PACK_SIZE);
      const id = Number(this.#insertPack.run(packBytes(group.map((h) => this.#pending.get(h)!))).lastInsertRowid);
      group.forEach((h, i) => members.push([prefixOf(h), id * PACK_SIZE + i, h]));
    }
    // In key order: each b-tree page is visited once per batch, not once per blob. A prefix
    // already taken (by an earlier blob or one of this batch) leaves the blob under its full
    // key; its copy in the pack is never read.
    members.sort((x, y) => x[0] - y[0]);
    for (const [prefix, place, hash] of members) if (this.#insertMember.run(prefix, place).changes === 0) whole.push(hash);
    for (const hash of whole.sort()) this.#insert.run(Buffer.from(hash, 'hex'), storedBlob(this.#pending.get(hash)!));
    if (this.#stored.size > 200_000) this.#stored.clear();
    for (const [hash, bytes] of this.#pending) {
      this.#stored.add(hash);
      this.#remember(hash, bytes);
    }
    this.#pending.clear();
    this.#pendingBytes = 0;
  }

  async get(hash: string): Promise<Uint8Array> {
    assertBlobHash(hash);
    let bytes = this.#pending.get(hash) ?? this.#recent.get(hash);
    if (bytes === undefined) {
      const member = this.#member(hash);
      // A member whose bytes hash to another key shares only its prefix: then the blob, if
      // stored, is under its full key.
      if (member !== undefined && member !== null && sha256Hex(member) === hash) bytes = member;
      else {
        const row = this.#select.get(Buffer.from(hash, 'hex')) as Buffer | undefined;
        bytes = row === undefined ? (this.#select.get(hash) as Buffer | undefined) : blobOfRow(row);
        if (row === undefined && bytes === undefined) {
          // A pack that no longer reads is damage, not absence.
          if (member === null) throw new BlobCorruptError(hash);
          throw new BlobNotFoundError(hash);
        }
        // A flipped byte on disk must not pass as the payload an event refers to.
        if (bytes === undefined || sha256Hex(bytes) !== hash) throw new BlobCorruptError(hash);
      }
      this.#remember(hash, bytes);
    }
    return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** The pack member under the hash's prefix (not yet checked against the hash); undefined when
   * none is, null when its pack does not read. */
  #member(hash: string): Buffer | null | undefined {
    const place = this.#selectMember.get(prefixOf(hash)) as number | undefined;
    if (place === undefined) return undefined;
    const id = Math.floor(place / PACK_SIZE);
    let members = this.#packs.get(id);
    if (members === undefined) {
      const stored = this.#selectPack.get(id) as Buffer | undefined;
      const read = stored === undefined ? undefined : unpackBytes(stored);
      if (read === undefined) return null;
      members = read;
      if (this.#packs.size >= PACK_CACHE) this.#packs.shift();
      this.#packs.set(id, members);
    }
    return members[place % PACK_SIZE] ?? null;
  }

  #remember(hash: string, bytes: Buffer): void {
    if (bytes.byteLength <= 64 << 10) this.#recent.set(hash, bytes);
  }

  async getText(hash: string): Promise<string> {
    return decodeBlobText(hash, await this.get(hash));
  }

  async has(hash: string): Promise<boolean> {
    assertBlobHash(hash);
    if (this.#pending.has(hash) || this.#exists.get(Buffer.from(hash, 'hex')) !== undefined || this.#exists.get(hash) !== undefined) return true;
    const member = this.#member(hash);
    return member !== undefined && member !== null && sha256Hex(member) === hash;
  }

  async *list(): AsyncIterable<string> {
    const seen = new Set(this.#pending.keys());
    yield* seen;
    const fresh = (h: string) => {
      if (seen.has(h)) return false;
      seen.add(h);
      return true;
    };
    for (const key of this.#db.prepare('SELECT hash FROM blobs').pluck().all() as (Buffer | string)[]) {
      // A blob put in the older form and again in the new one is listed once.
      const h = typeof key === 'string' ? key : key.toString('hex');
      if (fresh(h)) yield h;
    }
    // Members are kept by prefix: their hashes are those of their bytes.
    for (const [id, stored] of this.#db.prepare('SELECT id, bytes FROM blob_packs').raw().all() as [number, Buffer][]) {
      const members = unpackBytes(stored);
      if (members === undefined) throw new BlobCorruptError(`pack ${id}`);
      for (const m of members) {
        const h = sha256Hex(m);
        if (fresh(h)) yield h;
      }
    }
  }
}
