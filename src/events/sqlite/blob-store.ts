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
import { PACK_SIZE, PackedBlobIndex, type BlobIndexOptions } from './blob-index.js';

/** Bytes of blobs kept in memory after a read or a write (./recent-blobs.ts). */
const RECENT_BYTES = 64 << 20;
/** Blobs held back for the next append before they are written in a transaction of their own
 * (each transaction rewrites the last page of every table it touches). */
const MAX_PENDING = 1 << 20;
const MAX_PENDING_BYTES = 128 << 20;

/** Blobs of up to PACKED_MAX bytes put in one batch (a step's tests, its programs) are stored
 * together, up to PACK_SIZE members or PACK_BYTES to a row of blob_packs, deflated as one: each
 * alone would cost its 32-byte key, a row and a random leaf of a tree keyed by hash, more than
 * its bytes, and tests share most of their text. Each is found through the packed-blob index
 * (./blob-index.ts). */
const PACKED_MAX = 16 << 10;
const PACK_BYTES = 32 << 10;
const PACK_CACHE = 256;

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
 * Blobs in the log's SQLite file: small ones in packs, larger ones keyed by the 32 bytes of their
 * sha256 (half the size of its hex text, which files written before format 2 hold as keys; both
 * are read, so such a file keeps working when it is appended to), each row's bytes deflated where
 * that pays. A put is buffered and written in the same transaction as the
 * next append (or at close, or when the buffer grows large): an autocommitted insert per blob
 * would cost one fsync each at synchronous=FULL, and a blob is only ever looked for through an
 * event that names it, which that append writes. A blob put by a process that dies before its
 * next append is lost with the work that would have referenced it.
 */
export class SqliteBlobStore implements BlobStore {
  readonly #db: Database.Database;
  readonly #insert: Database.Statement;
  readonly #select: Database.Statement;
  readonly #exists: Database.Statement;
  /** Not yet written: hash -> bytes. */
  readonly #pending = new Map<string, Buffer>();
  #pendingBytes = 0;
  /** Packs written in the open transaction, taken into the index once it commits. */
  #written: { id: number; hashes: string[] }[] = [];
  /** Hashes known to be stored (bounded): a repeated put costs a hash and a lookup. */
  readonly #stored = new Set<string>();
  /** Recently read or written blobs, already verified against their hash (blobs never change),
   * up to RECENT_BYTES: a step's tests are read back by the Judge and the Executor after they
   * are written, and a cache bounded by count missed most of them at Code-A1's size. */
  readonly #recent = new RecentBlobs(RECENT_BYTES);
  readonly #index: PackedBlobIndex;
  #insertPack: Database.Statement | undefined;
  #selectPack: Database.Statement | undefined;
  /** Recently read packs, inflated: a problem's tests were put together and are read together. */
  readonly #packs = new FifoCache<number, Buffer[]>();

  constructor(db: Database.Database, index: BlobIndexOptions = {}) {
    this.#db = db;
    this.#insert = db.prepare('INSERT OR IGNORE INTO blobs (hash, bytes) VALUES (?, ?)');
    this.#select = db.prepare('SELECT bytes FROM blobs WHERE hash = ?').pluck();
    // The key is bound as 32 bytes, or as hex text for a blob an older writer put.
    this.#exists = db.prepare('SELECT 1 FROM blobs WHERE hash = ?').pluck();
    // Makes the pack tables in a file that lacks them (formats 1 and 2 before packs).
    this.#index = new PackedBlobIndex(db, (id) => this.#readPack(id), index);
  }

  async put(content: Uint8Array | string): Promise<string> {
    const bytes = toBytes(content);
    const hash = sha256Hex(bytes);
    if (this.#stored.has(hash) || this.#pending.has(hash)) return hash;
    // Copied: the caller may reuse its buffer.
    this.#pending.set(hash, Buffer.from(bytes));
    this.#pendingBytes += bytes.byteLength;
    if (this.#pending.size >= MAX_PENDING || this.#pendingBytes >= MAX_PENDING_BYTES) this.flush();
    return hash;
  }

  /** Writes buffered blobs in a transaction of their own (when no append comes to carry them). */
  flush(): void {
    if (this.#pending.size === 0) return;
    try {
      this.#db.transaction(() => this.writePending())();
    } catch (err) {
      this.rolledBack();
      throw err;
    }
    this.committed();
    this.mergeIfDue();
  }

  /** Writes buffered blobs inside the caller's transaction (the append's); the caller then says
   * whether it committed (committed, then mergeIfDue) or not (rolledBack: they stay buffered). */
  writePending(): void {
    this.#written = [];
    if (this.#pending.size === 0) return;
    const whole: string[] = [];
    // Small ones in put order (a step's tests of one problem side by side).
    let group: string[] = [];
    let groupBytes = 0;
    const writeGroup = () => {
      if (group.length === 0) return;
      this.#insertPack ??= this.#db.prepare('INSERT INTO blob_packs (bytes) VALUES (?)');
      const id = Number(this.#insertPack.run(packBytes(group.map((h) => this.#pending.get(h)!))).lastInsertRowid);
      this.#written.push({ id, hashes: group });
      group = [];
      groupBytes = 0;
    };
    for (const [hash, bytes] of this.#pending) {
      if (bytes.byteLength > PACKED_MAX) {
        whole.push(hash);
        continue;
      }
      if (group.length === PACK_SIZE || groupBytes + bytes.byteLength > PACK_BYTES) writeGroup();
      group.push(hash);
      groupBytes += bytes.byteLength;
    }
    writeGroup();
    for (const hash of whole.sort()) this.#insert.run(Buffer.from(hash, 'hex'), storedBlob(this.#pending.get(hash)!));
  }

  /** The transaction that wrote the buffered blobs committed. */
  committed(): void {
    for (const { id, hashes } of this.#written) this.#index.added(id, hashes);
    this.#written = [];
    if (this.#stored.size > 200_000) this.#stored.clear();
    for (const [hash, bytes] of this.#pending) {
      this.#stored.add(hash);
      this.#remember(hash, bytes);
    }
    this.#pending.clear();
    this.#pendingBytes = 0;
  }

  /** The transaction that wrote them rolled back: they are written with the next one. */
  rolledBack(): void {
    this.#written = [];
  }

  /** Merges the packed-blob index when it is due (./blob-index.ts); after a commit, outside any
   * transaction. Another process holding the file's lock only defers it. */
  mergeIfDue(): void {
    try {
      this.#index.mergeIfDue();
    } catch (err) {
      if ((err as { code?: unknown }).code !== 'SQLITE_BUSY') throw err;
    }
  }

  async get(hash: string): Promise<Uint8Array> {
    assertBlobHash(hash);
    let bytes = this.#pending.get(hash) ?? this.#recent.get(hash);
    if (bytes === undefined) {
      let member = this.#member(hash);
      if (member instanceof Buffer) bytes = member;
      else {
        const row = this.#select.get(Buffer.from(hash, 'hex')) as Buffer | undefined;
        bytes = row === undefined ? (this.#select.get(hash) as Buffer | undefined) : blobOfRow(row);
        if (row === undefined && bytes === undefined) {
          // Not stored whole: packed by another connection since this one last looked?
          const later = this.#packedSince(hash);
          if (later instanceof Buffer) bytes = later;
          else {
            if (later === null) member = null;
            // A pack that no longer reads is damage, not absence.
            if (member === null) throw new BlobCorruptError(hash);
            throw new BlobNotFoundError(hash);
          }
        }
        // A flipped byte on disk must not pass as the payload an event refers to.
        else if (bytes === undefined || sha256Hex(bytes) !== hash) throw new BlobCorruptError(hash);
      }
      this.#remember(hash, bytes);
    }
    return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** The packed blob with this hash (checked) as this connection knows the packs; undefined
   * when none of them holds it, null when a pack that may hold it does not read. */
  #member(hash: string): Buffer | null | undefined {
    let damaged = false;
    for (const place of this.#index.placesOf(hash)) {
      const m = this.#readPack(Math.floor(place / PACK_SIZE))?.[place % PACK_SIZE];
      if (m === undefined) damaged = true;
      // A member whose bytes hash to another key shares only its prefix.
      else if (sha256Hex(m) === hash) return m;
    }
    return damaged || this.#index.unreadablePacks > 0 ? null : undefined;
  }

  /** The same after taking in what other connections wrote since this one last looked (only on
   * a miss: it reads the packs table). */
  #packedSince(hash: string): Buffer | null | undefined {
    return this.#index.catchUp() ? this.#member(hash) : this.#index.unreadablePacks > 0 ? null : undefined;
  }

  /** A pack's members, inflated (cached); undefined when it is not there or does not read. */
  #readPack(id: number): Buffer[] | undefined {
    let members = this.#packs.get(id);
    if (members === undefined) {
      this.#selectPack ??= this.#db.prepare('SELECT bytes FROM blob_packs WHERE id = ?').pluck();
      const stored = this.#selectPack.get(id) as Buffer | undefined;
      members = stored === undefined ? undefined : unpackBytes(stored);
      if (members === undefined) return undefined;
      if (this.#packs.size >= PACK_CACHE) this.#packs.shift();
      this.#packs.set(id, members);
    }
    return members;
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
    return this.#member(hash) instanceof Buffer || this.#packedSince(hash) instanceof Buffer;
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
