/**
 * The BlobStore port on JetStream: a stream of its own, one message per small blob and chunked
 * messages plus a manifest for large ones (a message must fit the server's max payload). A put
 * resolves once the server has stored the blob (on a cluster: a quorum of replicas), so the
 * event naming it may be published next. Message ids make a repeated put harmless.
 */
import { randomUUID } from 'node:crypto';
import { headers } from '@nats-io/transport-node';
import { RetentionPolicy, StorageType, type StreamConfig } from '@nats-io/jetstream';
import { assertBlobHash, decodeBlobText, sha256Hex, toBytes, verifiedBlob, type BlobStore } from '../blobs.js';
import { BlobNotFoundError } from '../errors.js';
import type { JetStreamEventLog } from './jetstream-log.js';
import { ensureStream, withRetry } from './jetstream-support.js';
import { FifoCache } from '../../core/fifo-cache.js';

const CHUNK = 256 * 1024;
const DESCRIPTION = 'crucible blob store, format 1';

export class JetStreamBlobStore implements BlobStore {
  readonly #log: JetStreamEventLog;
  readonly #stream: string;
  readonly #prefix: string;
  readonly #replicas: number;
  readonly #create: boolean;
  /** Hashes known to be stored: a repeated put costs a hash only. */
  readonly #stored = new Set<string>();
  /** Recently read small blobs, already verified (blobs never change). */
  readonly #recent = new FifoCache<string, Uint8Array>();

  readonly #description: string;
  readonly #extraSubjects: readonly string[];

  /** `description` and `extraSubjects`: a stream of another kind that keeps blobs beside records
   * of its own (the actor snapshots' stream keeps their heads). */
  constructor(
    log: JetStreamEventLog,
    opts: { stream: string; subjectPrefix: string; replicas: number; create: boolean; description?: string; extraSubjects?: readonly string[] },
  ) {
    this.#log = log;
    this.#stream = opts.stream;
    this.#prefix = opts.subjectPrefix;
    this.#replicas = opts.replicas;
    this.#create = opts.create;
    this.#description = opts.description ?? DESCRIPTION;
    this.#extraSubjects = opts.extraSubjects ?? [];
  }

  async init(): Promise<void> {
    const want: Partial<StreamConfig> = {
      name: this.#stream,
      description: this.#description,
      // Blob subjects only (a blob's message, a large blob's chunks): nothing else a role's
      // grants reach under the run's name is stored here.
      subjects: [`${this.#prefix}.m.*`, `${this.#prefix}.c.*.*`, ...this.#extraSubjects],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      num_replicas: this.#replicas,
      max_msgs: -1,
      max_bytes: -1,
      max_age: 0,
    };
    await ensureStream(this.#log.jsm, this.#log.retryForMs, want, this.#create, (c) =>
      c.description === this.#description ? null : `its description is "${c.description ?? ''}", not "${this.#description}"`,
    );
  }

  #manifest(hash: string): string {
    return `${this.#prefix}.m.${hash}`;
  }

  async #publish(subject: string, data: Uint8Array, msgID: string, chunks: number): Promise<void> {
    const h = headers();
    h.set('Crucible-Chunks', String(chunks));
    h.set('Crucible-Size', String(data.byteLength));
    await this.#log.refusedAs('store a blob', () => withRetry(this.#log.retryForMs, () => this.#log.js.publish(subject, data, { msgID, headers: h })));
  }

  async put(content: Uint8Array | string): Promise<string> {
    const bytes = toBytes(content);
    const hash = sha256Hex(bytes);
    if (this.#stored.has(hash)) return hash;
    const found = await this.#last(this.#manifest(hash));
    // Any role may publish under a blob's subject: a copy there that is not this content (a
    // small blob's bytes are its message) is stored over, under a message id of its own (the
    // other copy may hold the blob's id in the duplicate window). A get reads the last copy.
    const corrupt = found !== null && bytes.byteLength <= CHUNK && (sha256Hex(found.data) !== hash || (found.header.get('Crucible-Chunks') || '0') !== '0');
    if (found === null || corrupt) {
      if (bytes.byteLength <= CHUNK) {
        await this.#publish(this.#manifest(hash), bytes, corrupt ? `m.${hash}.${randomUUID()}` : `m.${hash}`, 0);
      } else {
        const n = Math.ceil(bytes.byteLength / CHUNK);
        for (let i = 0; i < n; i++) {
          await this.#publish(`${this.#prefix}.c.${hash}.${i}`, bytes.subarray(i * CHUNK, (i + 1) * CHUNK), `c.${hash}.${i}`, 0);
        }
        // The manifest last: a blob is visible only once every chunk is stored.
        const manifest = Buffer.from(JSON.stringify({ size: bytes.byteLength, chunks: n }));
        const h = headers();
        h.set('Crucible-Chunks', String(n));
        await this.#log.refusedAs('store a blob', () =>
          withRetry(this.#log.retryForMs, () => this.#log.js.publish(this.#manifest(hash), manifest, { msgID: `m.${hash}`, headers: h })),
        );
      }
    }
    if (this.#stored.size > 200_000) this.#stored.clear();
    this.#stored.add(hash);
    return hash;
  }

  async #last(subject: string) {
    return withRetry(this.#log.retryForMs, () => this.#log.jsm.streams.getMessage(this.#stream, { last_by_subj: subject }));
  }

  async get(hash: string): Promise<Uint8Array> {
    assertBlobHash(hash);
    const cached = this.#recent.get(hash);
    if (cached) return cached;
    const m = await this.#last(this.#manifest(hash));
    if (!m) throw new BlobNotFoundError(hash);
    const chunks = Number(m.header.get('Crucible-Chunks') || '0');
    let bytes: Uint8Array;
    if (chunks === 0) bytes = m.data;
    else {
      const parts: Uint8Array[] = [];
      for (let i = 0; i < chunks; i++) {
        const c = await this.#last(`${this.#prefix}.c.${hash}.${i}`);
        if (!c) throw new BlobNotFoundError(hash);
        parts.push(c.data);
      }
      bytes = Buffer.concat(parts);
    }
    verifiedBlob(hash, bytes);
    if (bytes.byteLength <= 64 << 10) {
      if (this.#recent.size >= 8192) this.#recent.shift();
      this.#recent.set(hash, bytes);
    }
    return bytes;
  }

  async getText(hash: string): Promise<string> {
    return decodeBlobText(hash, await this.get(hash));
  }

  async has(hash: string): Promise<boolean> {
    assertBlobHash(hash);
    if (this.#stored.has(hash)) return true;
    return (await this.#last(this.#manifest(hash))) !== null;
  }

  async *list(): AsyncIterable<string> {
    const info = await withRetry(this.#log.retryForMs, () => this.#log.jsm.streams.info(this.#stream, { subjects_filter: `${this.#prefix}.m.>` }));
    const subjects = Object.keys(info.state.subjects ?? {});
    const cut = this.#prefix.length + 3;
    // A subject that is not a sha256 names no blob (a get by hash never reads it).
    for (const s of subjects) if (/^[0-9a-f]{64}$/.test(s.slice(cut))) yield s.slice(cut);
  }
}
