/**
 * The EventLog port. Every backend (SQLite, JetStream) implements exactly this, and the
 * conformance suite in test/events/conformance.ts checks each one with the same tests.
 */
import type { EventEnvelope, NewEvent } from './envelope.js';

/** Position in the global order: 1, 2, 3... with no gaps. 0 means "before the first event". */
export type Position = number;

export interface AppendOptions {
  /** Optimistic concurrency: the position of the stream's last event as the writer saw it
   * (0 = the stream has no event yet). Omit to append unconditionally. */
  expectedPosition?: Position;
  /** Idempotency key of the commit: a second commit with the same id is not applied again. */
  commitId: string;
}

export interface AppendResult {
  /** Positions given to the events, in order. */
  positions: Position[];
  /** True when this commitId had already been applied: nothing new was written. */
  duplicate: boolean;
}

export interface ReadFilter {
  runId?: string;
  types?: readonly string[];
  streams?: readonly string[];
  /** Prefix match on stream names (e.g. "judge/"). */
  streamPrefix?: string;
}

export interface ReadRange {
  /** First position to return (inclusive). Default 1. */
  from?: Position;
  /** Last position to return (inclusive): "as of" reads. Default: the current end. */
  to?: Position;
  /** Maximum number of events. */
  limit?: number;
}

export type SubscriptionItem =
  | { kind: 'event'; event: EventEnvelope }
  /** Everything up to `position` was delivered: sent once the stored events are delivered, and again
   * after each later batch of live events. `position` is the log head scanned, which may be past
   * the last event that matched the filter, so a consumer may store it as its checkpoint. */
  | { kind: 'caught-up'; position: Position };

export interface Subscription extends AsyncIterable<SubscriptionItem> {
  close(): Promise<void>;
}

export interface SubscribeOptions {
  /** Resume after this position (the subscriber's checkpoint). Default 0. */
  after?: Position;
  filter?: ReadFilter;
}

export interface BlobStore {
  /** Stores bytes or text; returns the lowercase hex sha256. Putting the same content twice is a no-op. */
  put(content: Uint8Array | string): Promise<string>;
  /** Throws BlobNotFoundError when absent. */
  get(hash: string): Promise<Uint8Array>;
  getText(hash: string): Promise<string>;
  has(hash: string): Promise<boolean>;
}

export interface EventLog {
  readonly backend: 'sqlite' | 'jetstream';
  append(stream: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult>;
  read(range?: ReadRange, filter?: ReadFilter): AsyncIterable<EventEnvelope>;
  /** Optional: the same events as `read`, a page (array) at a time; bulk replays use it when present. */
  readPages?(range?: ReadRange, filter?: ReadFilter): AsyncIterable<readonly EventEnvelope[]>;
  /** Last position of the whole log (0 when empty). */
  head(): Promise<Position>;
  /** Last position of one stream (0 when it has no event). */
  streamHead(stream: string): Promise<Position>;
  subscribe(options?: SubscribeOptions): Subscription;
  readonly blobs: BlobStore;
  close(): Promise<void>;
}
