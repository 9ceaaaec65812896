/**
 * Content-addressed payloads (program text, tests, responses, batches) in the log's own SQLite
 * file, keyed by sha256. Writers put a payload before appending the event that names its hash,
 * so every hash in the log resolves.
 */
import { createHash } from 'node:crypto';
import type Database from 'better-sqlite3';
import { BlobCorruptError, BlobNotFoundError, BlobNotTextError, InvalidBlobHashError } from './errors.js';
import type { BlobStore } from './log.js';

const HASH = /^[0-9a-f]{64}$/;

export function sha256Hex(bytes: Uint8Array | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

export function toBytes(content: Uint8Array | string): Buffer {
  if (typeof content === 'string') return Buffer.from(content, 'utf8');
  if (content instanceof Uint8Array) return Buffer.from(content.buffer, content.byteOffset, content.byteLength);
  throw new TypeError(`blob content must be a string or Uint8Array, got ${typeof content}`);
}

export function assertBlobHash(hash: string): void {
  if (typeof hash !== 'string' || !HASH.test(hash)) throw new InvalidBlobHashError(String(hash));
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

export class SqliteBlobStore implements BlobStore {
  readonly #insert: Database.Statement;
  readonly #select: Database.Statement;
  readonly #exists: Database.Statement;

  constructor(db: Database.Database) {
    this.#insert = db.prepare('INSERT OR IGNORE INTO blobs (hash, bytes) VALUES (?, ?)');
    this.#select = db.prepare('SELECT bytes FROM blobs WHERE hash = ?').pluck();
    this.#exists = db.prepare('SELECT 1 FROM blobs WHERE hash = ?').pluck();
  }

  async put(content: Uint8Array | string): Promise<string> {
    const bytes = toBytes(content);
    const hash = sha256Hex(bytes);
    this.#insert.run(hash, bytes);
    return hash;
  }

  async get(hash: string): Promise<Uint8Array> {
    assertBlobHash(hash);
    const bytes = this.#select.get(hash) as Buffer | undefined;
    if (bytes === undefined) throw new BlobNotFoundError(hash);
    // A flipped byte on disk must not pass as the payload an event refers to.
    if (sha256Hex(bytes) !== hash) throw new BlobCorruptError(hash);
    return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  async getText(hash: string): Promise<string> {
    const bytes = await this.get(hash);
    try {
      return utf8.decode(bytes);
    } catch {
      throw new BlobNotTextError(hash);
    }
  }

  async has(hash: string): Promise<boolean> {
    assertBlobHash(hash);
    return this.#exists.get(hash) !== undefined;
  }
}
