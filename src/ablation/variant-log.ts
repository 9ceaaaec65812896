/**
 * A variant's events as a read-only EventLog, so the run's own projections (ProjectionRunner,
 * RUN_PROJECTIONS) build its read models unchanged. Blobs are read from the recorded run; what a
 * variant's judgement puts is kept in memory, never written into the original run.
 */
import type { EventEnvelope } from '../events/envelope.js';
import { MemoryBlobStore, type BlobStore } from '../events/blobs.js';
import { ORIGIN, asPosition, type EventLog, type LogCapabilities, type Position, type ReadFilter, type ReadRange, type Subscription } from '../events/log.js';
import type { WorkQueue } from '../events/work-queue.js';
import { AblationError } from './errors.js';

/** Reads from the recorded store; puts go to memory or to the variant's own log (a variant never
 * writes into the run it re-judges). */
export class OverlayBlobStore implements BlobStore {
  readonly #base: BlobStore;
  readonly #own: BlobStore;

  constructor(base: BlobStore, own: BlobStore = new MemoryBlobStore()) {
    this.#base = base;
    this.#own = own;
  }

  put(content: Uint8Array | string): Promise<string> {
    return this.#own.put(content);
  }

  async get(hash: string): Promise<Uint8Array> {
    return (await this.#own.has(hash)) ? this.#own.get(hash) : this.#base.get(hash);
  }

  async getText(hash: string): Promise<string> {
    return (await this.#own.has(hash)) ? this.#own.getText(hash) : this.#base.getText(hash);
  }

  async has(hash: string): Promise<boolean> {
    return (await this.#own.has(hash)) || this.#base.has(hash);
  }

  async *list(): AsyncIterable<string> {
    yield* this.#base.list();
    yield* this.#own.list();
  }
}

/** Room for the events a variant writes for one recorded event (its judgement, and with --execute
 * the executions it ran): far more than one problem-round's. */
const SLOTS = 65_536;

/**
 * Where the `k`-th event a variant writes for the `ordinal`-th recorded event it read sits in its
 * log. Positions follow the recorded order, not the variant's own count, so an event passed
 * through sits at the same position in every variant's log, and variants that write the same
 * events share the read models built from them (./project.ts).
 */
export function variantPosition(ordinal: number, k: number): Position {
  if (!Number.isInteger(ordinal) || ordinal < 1 || !Number.isInteger(k) || k < 0)
    throw new AblationError(`no variant position for recorded event ${ordinal}, event ${k}`);
  if (k >= SLOTS)
    throw new AblationError(`a variant wrote more than ${SLOTS} events for recorded event ${ordinal}: more than one problem-round's judgement and executions`);
  const at = ordinal * SLOTS + k;
  if (!Number.isSafeInteger(at)) throw new AblationError(`recorded event ${ordinal} is past the variant positions a number can hold`);
  return asPosition(at);
}

/** The head of a variant's log after `ordinals` recorded events: after anything any variant wrote for them. */
export const variantHead = (ordinals: number): Position => (ordinals === 0 ? ORIGIN : variantPosition(ordinals, SLOTS - 1));

const readOnly = (what: string) => new AblationError(`a variant's log is read-only: ${what} is not available`);

export class VariantLog implements EventLog {
  readonly capabilities: LogCapabilities = {
    dedupWindowMs: Infinity,
    maxCommitBytes: 0,
    maxCommitEvents: 0,
    multiProcess: false,
    durable: false,
    sharedWorkQueues: false,
    refusesReusedEventIds: true,
  };
  readonly location: string;
  readonly identity: string;
  readonly blobs: BlobStore;
  /** In position order, positions strictly increasing. */
  readonly #events: readonly EventEnvelope[];
  readonly #head: Position;

  /** `head`: where the log ends (default its last event), at or after its last event.
   * `identity`: variants of one run share it (default `location`): their positions follow the
   * recorded order, so read models built from one variant's events serve another's. */
  constructor(location: string, events: readonly EventEnvelope[], blobs: BlobStore, head?: Position, identity?: string) {
    this.location = location;
    this.identity = identity ?? location;
    this.#events = events;
    this.blobs = blobs;
    const last = events.at(-1)?.position ?? ORIGIN;
    if (head !== undefined && head < last) throw new AblationError(`${location}: head ${head} is before the last event (${last})`);
    this.#head = head ?? last;
  }

  append(): never {
    throw readOnly('append');
  }

  async *read(range: ReadRange = {}, filter: ReadFilter = {}): AsyncIterable<EventEnvelope> {
    for await (const page of this.readPages(range, filter)) yield* page;
  }

  async *readPages(range: ReadRange = {}, filter: ReadFilter = {}): AsyncIterable<readonly EventEnvelope[]> {
    const after = range.after ?? ORIGIN;
    const to = range.to ?? Infinity;
    const types = filter.types ? new Set(filter.types) : null;
    const streams = filter.streams ? new Set(filter.streams) : null;
    const out: EventEnvelope[] = [];
    for (const e of this.#events) {
      if (e.position <= after) continue;
      if (e.position > to) break;
      if (filter.runId !== undefined && e.runId !== filter.runId) continue;
      if (types && !types.has(e.type)) continue;
      if (streams && !streams.has(e.stream)) continue;
      if (filter.streamPrefix !== undefined && !e.stream.startsWith(filter.streamPrefix)) continue;
      out.push(e);
      if (range.limit !== undefined && out.length >= range.limit) break;
    }
    yield out;
  }

  async head(): Promise<Position> {
    return this.#head;
  }

  async streamHead(stream: string): Promise<Position> {
    for (let i = this.#events.length - 1; i >= 0; i--) if (this.#events[i]!.stream === stream) return asPosition(this.#events[i]!.position);
    return ORIGIN;
  }

  subscribe(): Subscription {
    throw readOnly('subscribe');
  }

  workQueue(): Promise<WorkQueue> {
    throw readOnly('a work queue');
  }

  async close(): Promise<void> {}
}
