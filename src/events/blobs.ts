/**
 * The BlobStore port: content-addressed payloads (program text, tests, responses, batches) keyed
 * by the lowercase hex sha256 of their bytes. Events carry the hash and stay small.
 *
 * Contract: when `put` resolves, the blob is stored as durably as the log's own commits, so an
 * event naming it may be appended next (on SQLite the blob is written in that append's own
 * transaction, which gives the same guarantee). Putting the same content twice is a no-op.
 * Backends: a directory (here), the log's SQLite file (./blob-store.ts), a
 * JetStream stream (./jetstream-blobs.ts), and memory for tests.
 */
import { createHash } from 'node:crypto';
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, writeSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { BlobCorruptError, BlobNotFoundError, BlobNotTextError, InvalidBlobHashError } from './errors.js';
import type { EventEnvelope } from './envelope.js';

export interface BlobStore {
  /** Stores bytes or text; returns the lowercase hex sha256. Resolves once stored durably. */
  put(content: Uint8Array | string): Promise<string>;
  /** Throws BlobNotFoundError when absent, BlobCorruptError when the bytes no longer match. */
  get(hash: string): Promise<Uint8Array>;
  getText(hash: string): Promise<string>;
  has(hash: string): Promise<boolean>;
  /** Every stored hash, in no particular order. */
  list(): AsyncIterable<string>;
}

const HASH = /^[0-9a-f]{64}$/;

export function sha256Hex(bytes: Uint8Array | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

export function toBytes(content: Uint8Array | string): Buffer {
  if (typeof content === 'string') return Buffer.from(content, 'utf8');
  if (content instanceof Uint8Array) return Buffer.from(content.buffer, content.byteOffset, content.byteLength);
  throw new TypeError(`blob content must be a string or Uint8Array, got ${typeof content}`);
}

export function isBlobHash(s: unknown): s is string {
  return typeof s === 'string' && HASH.test(s);
}

export function assertBlobHash(hash: string): void {
  if (!isBlobHash(hash)) throw new InvalidBlobHashError(String(hash));
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

export function decodeBlobText(hash: string, bytes: Uint8Array): string {
  try {
    return utf8.decode(bytes);
  } catch {
    throw new BlobNotTextError(hash);
  }
}

/** Checks stored bytes against their key: a flipped byte must not pass as the payload an event names. */
export function verifiedBlob(hash: string, bytes: Uint8Array): Uint8Array {
  if (sha256Hex(bytes) !== hash) throw new BlobCorruptError(hash);
  return bytes;
}

/** Blobs in memory: for unit tests and the in-memory log. */
export class MemoryBlobStore implements BlobStore {
  readonly #blobs = new Map<string, Uint8Array>();

  async put(content: Uint8Array | string): Promise<string> {
    const bytes = toBytes(content);
    const hash = sha256Hex(bytes);
    if (!this.#blobs.has(hash)) this.#blobs.set(hash, new Uint8Array(bytes));
    return hash;
  }

  async get(hash: string): Promise<Uint8Array> {
    assertBlobHash(hash);
    const bytes = this.#blobs.get(hash);
    if (!bytes) throw new BlobNotFoundError(hash);
    return bytes;
  }

  async getText(hash: string): Promise<string> {
    return decodeBlobText(hash, await this.get(hash));
  }

  async has(hash: string): Promise<boolean> {
    assertBlobHash(hash);
    return this.#blobs.has(hash);
  }

  async *list(): AsyncIterable<string> {
    yield* [...this.#blobs.keys()];
  }
}

/**
 * Blobs as files in a directory, `<dir>/<first two hex>/<hash>`: written to a temporary name,
 * fsynced, then renamed, so a blob is either whole or absent after a crash.
 */
export class DirectoryBlobStore implements BlobStore {
  readonly #dir: string;

  constructor(dir: string) {
    this.#dir = dir;
    mkdirSync(dir, { recursive: true });
  }

  #path(hash: string): string {
    return join(this.#dir, hash.slice(0, 2), hash);
  }

  async put(content: Uint8Array | string): Promise<string> {
    const bytes = toBytes(content);
    const hash = sha256Hex(bytes);
    const target = this.#path(hash);
    if (existsSync(target)) return hash;
    mkdirSync(join(this.#dir, hash.slice(0, 2)), { recursive: true });
    const tmp = `${target}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
    const fd = openSync(tmp, 'w');
    try {
      writeSync(fd, bytes);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, target);
    // The rename itself is durable only once the directory is synced.
    const dfd = openSync(join(this.#dir, hash.slice(0, 2)), 'r');
    try {
      fsyncSync(dfd);
    } finally {
      closeSync(dfd);
    }
    return hash;
  }

  async get(hash: string): Promise<Uint8Array> {
    assertBlobHash(hash);
    let bytes: Buffer;
    try {
      bytes = readFileSync(this.#path(hash));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new BlobNotFoundError(hash);
      throw err;
    }
    return verifiedBlob(hash, new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  }

  async getText(hash: string): Promise<string> {
    return decodeBlobText(hash, await this.get(hash));
  }

  async has(hash: string): Promise<boolean> {
    assertBlobHash(hash);
    return existsSync(this.#path(hash));
  }

  async *list(): AsyncIterable<string> {
    if (!existsSync(this.#dir)) return;
    for (const sub of readdirSync(this.#dir)) {
      if (!/^[0-9a-f]{2}$/.test(sub)) continue;
      for (const name of readdirSync(join(this.#dir, sub))) if (isBlobHash(name)) yield name;
    }
  }
}

/** Every blob hash an event's data names (any string field that is a sha256 hex). */
export function blobHashesIn(value: unknown, into: Set<string> = new Set()): Set<string> {
  if (isBlobHash(value)) into.add(value);
  else if (Array.isArray(value)) for (const v of value) blobHashesIn(v, into);
  else if (value !== null && typeof value === 'object') for (const v of Object.values(value)) blobHashesIn(v, into);
  return into;
}

/**
 * The blobs of a run: every hash its events name that the store holds, and those a policy
 * version's parameters name. A string that merely
 * looks like a hash (a stored test's own digest, say) but is not in the store is skipped.
 */
export async function runBlobHashes(events: AsyncIterable<EventEnvelope>, store: BlobStore): Promise<string[]> {
  const named = new Set<string>();
  const params = new Set<string>();
  for await (const e of events) {
    blobHashesIn(e.data, named);
    // A published version, or a warm start's checkpoint (what a resumed warm start loads).
    if (e.type === 'PolicyVersionPublished' || e.type === 'WarmStartCheckpointed') {
      const cp = (e.data as { checkpoint?: unknown }).checkpoint;
      if (isBlobHash(cp)) params.add(cp);
    }
  }
  // A policy version's parameters are a JSON blob that may name blobs of their own (a
  // checkpoint's files): without them a copied run could not load its policies elsewhere.
  for (const h of params) {
    if (!(await store.has(h))) continue;
    let value: unknown;
    try {
      value = JSON.parse(await store.getText(h));
    } catch {
      continue; // parameters that are not JSON name nothing
    }
    blobHashesIn(value, named);
  }
  const out: string[] = [];
  for (const h of named) if (await store.has(h)) out.push(h);
  return out.sort();
}

/** Copies blobs between stores (content-addressed: copying twice is harmless). Returns how many. */
export async function copyBlobs(from: BlobStore, to: BlobStore, hashes: Iterable<string>): Promise<number> {
  let n = 0;
  for (const h of hashes) {
    if (await to.has(h)) continue;
    const put = await to.put(await from.get(h));
    if (put !== h) throw new Error(`blob ${h} changed while being copied (got ${put})`);
    n++;
  }
  return n;
}
