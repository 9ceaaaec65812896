/**
 * The BlobStore port (./blobs.ts) in the log's own SQLite file. Writers put a payload before appending the event that names its hash,
 * so every hash in the log resolves.
 */
import type Database from 'better-sqlite3';
import { BlobCorruptError, BlobNotFoundError } from './errors.js';
import { assertBlobHash, decodeBlobText, sha256Hex, toBytes, type BlobStore } from './blobs.js';

/**
 * Blobs in the log's SQLite file. A put is buffered and written in the same transaction as the
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
  /** Hashes known to be stored (bounded): a repeated put costs a hash and a lookup. */
  readonly #stored = new Set<string>();
  /** Recently read blobs, already verified against their hash (blobs never change). */
  readonly #recent = new Map<string, Buffer>();

  constructor(db: Database.Database) {
    this.#db = db;
    this.#insert = db.prepare('INSERT OR IGNORE INTO blobs (hash, bytes) VALUES (?, ?)');
    this.#select = db.prepare('SELECT bytes FROM blobs WHERE hash = ?').pluck();
    this.#exists = db.prepare('SELECT 1 FROM blobs WHERE hash = ?').pluck();
  }

  async put(content: Uint8Array | string): Promise<string> {
    const bytes = toBytes(content);
    const hash = sha256Hex(bytes);
    if (this.#stored.has(hash) || this.#pending.has(hash)) return hash;
    // Copied: the caller may reuse its buffer.
    this.#pending.set(hash, Buffer.from(bytes));
    this.#pendingBytes += bytes.byteLength;
    if (this.#pending.size >= 4096 || this.#pendingBytes >= 16 << 20) this.#db.transaction(() => this.writePending())();
    return hash;
  }

  /** Writes buffered blobs; called inside the append transaction, and on close. */
  writePending(): void {
    if (this.#pending.size === 0) return;
    for (const [hash, bytes] of this.#pending) this.#insert.run(hash, bytes);
    if (this.#stored.size > 200_000) this.#stored.clear();
    for (const hash of this.#pending.keys()) this.#stored.add(hash);
    this.#pending.clear();
    this.#pendingBytes = 0;
  }

  async get(hash: string): Promise<Uint8Array> {
    assertBlobHash(hash);
    let bytes = this.#pending.get(hash) ?? this.#recent.get(hash);
    if (bytes === undefined) {
      bytes = (this.#select.get(hash) as Buffer | undefined) ?? undefined;
      if (bytes === undefined) throw new BlobNotFoundError(hash);
      // A flipped byte on disk must not pass as the payload an event refers to.
      if (sha256Hex(bytes) !== hash) throw new BlobCorruptError(hash);
      if (bytes.byteLength <= 64 << 10) {
        if (this.#recent.size >= 8192) this.#recent.delete(this.#recent.keys().next().value!);
        this.#recent.set(hash, bytes);
      }
    }
    return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  async getText(hash: string): Promise<string> {
    return decodeBlobText(hash, await this.get(hash));
  }

  async has(hash: string): Promise<boolean> {
    assertBlobHash(hash);
    return this.#pending.has(hash) || this.#exists.get(hash) !== undefined;
  }

  async *list(): AsyncIterable<string> {
    yield* [...this.#pending.keys()];
    for (const h of this.#db.prepare('SELECT hash FROM blobs').pluck().all() as string[]) {
      if (!this.#pending.has(h)) yield h;
    }
  }
}
