/**
 * The EventLog port. Every backend (memory, SQLite, JetStream) implements exactly this, and the
 * conformance suite in test/events/conformance.ts checks each one with the same tests.
 *
 * Written for many processes sharing one log:
 * - positions are opaque: totally ordered, but not counters (JetStream numbers whole commits);
 *   read strictly after a position, compare with `comparePositions`, never add to one;
 * - a commit id is remembered for `capabilities.dedupWindowMs` (finite on JetStream): a
 *   duplicate inside the window is reported as success (`duplicate: true`), so writers retry freely;
 * - a commit is bounded (`capabilities.maxCommitBytes`): too large is refused before anything is sent;
 * - blobs have their own port (./blobs.ts) and are durable before the event naming them is appended;
 * - work shared by many processes goes through claim/ack work queues (./work-queue.ts).
 */
import type { BlobStore } from './blobs.js';
import type { EventEnvelope, NewEvent } from './envelope.js';
import type { WorkQueue, WorkQueueOptions } from './work-queue.js';

declare const positionBrand: unique symbol;
/**
 * Where an event sits in the global order. Opaque: a backend may leave gaps (JetStream gives
 * every event of a commit the commit's message number plus its index), so arithmetic on a
 * position means nothing. Compare with `comparePositions` (or <, >, which agree with it).
 */
export type Position = number & { readonly [positionBrand]: true };

/** The position before the first event: "read everything" and "the stream has no event yet". */
export const ORIGIN = 0 as Position;

/** Orders two positions of the same log: negative, zero or positive. */
export function comparePositions(a: Position, b: Position): number {
  return a - b;
}

export function maxPosition(a: Position, b: Position): Position {
  return comparePositions(a, b) >= 0 ? a : b;
}

/** Turns a stored checkpoint (a number read from a database) back into a position. */
export function asPosition(n: number): Position {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${n} is not a log position`);
  return n as Position;
}

export interface AppendOptions {
  /** Optimistic concurrency: the position of the stream's last event as the writer saw it
   * (`streamHead`, or the last position an append returned; ORIGIN = the stream has no event yet).
   * Omit to append unconditionally. */
  expectedPosition?: Position;
  /** Idempotency key of the commit: within the dedup window, a second commit with the same id is
   * not applied again and is reported as a success with `duplicate: true`. */
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
  /** Return events strictly after this position. Default ORIGIN (from the first event). */
  after?: Position;
  /** Last position to return (inclusive): "as of" reads. Default: the head when the read began. */
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
  /** Resume after this position (the subscriber's checkpoint). Default ORIGIN. */
  after?: Position;
  filter?: ReadFilter;
}

/** What a backend can do, for callers that must decide (instead of asking which backend it is). */
export interface LogCapabilities {
  /** How long a commit id is remembered, in ms; Infinity: forever. */
  readonly dedupWindowMs: number;
  /** Largest commit accepted, in bytes of its encoded events. */
  readonly maxCommitBytes: number;
  /** Most events in one commit. */
  readonly maxCommitEvents: number;
  /** Other processes (on this machine or others) can append to and read the same log. */
  readonly multiProcess: boolean;
  /** The log survives the process (false for the in-memory backend). */
  readonly durable: boolean;
  /** Work queues are shared with other processes (JetStream) rather than local to this handle. */
  readonly sharedWorkQueues: boolean;
  /** An explicit event id already in the log (from another commit) is refused. Derived ids
   * (the default) are unique whenever commit ids are. */
  readonly refusesReusedEventIds: boolean;
}

/** Defaults every backend applies unless configured: a commit fits JetStream's default payload. */
export const DEFAULT_MAX_COMMIT_BYTES = 1024 * 1024 - 4096;
/** Events of one commit share its position space on JetStream (see jetstream-log.ts). */
export const MAX_COMMIT_EVENTS = 65_535;

/** One commit of an `appendCommits` call. */
export interface CommitRequest {
  stream: string;
  events: readonly NewEvent[];
  options: AppendOptions;
}

export interface EventLog {
  readonly capabilities: LogCapabilities;
  /** Where the log lives, for messages and for reopening: a file path or a nats:// URL. */
  readonly location: string;
  /** Which log this is: equal for every handle on the same log (wherever it is reached from),
   * different for any other log, a log file made again or a stream deleted and made again among
   * them. Positions mean something only in the log they came from, so whatever keeps positions
   * (read models, snapshots) keeps this beside them. */
  readonly identity: string;
  append(stream: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult>;
  /** Optional: several commits, each exactly as `append` would write it, in the order given and
   * durable together (one transaction, one sync on SQLite). A failing commit writes none of them. */
  appendCommits?(commits: readonly CommitRequest[]): Promise<AppendResult[]>;
  read(range?: ReadRange, filter?: ReadFilter): AsyncIterable<EventEnvelope>;
  /** Optional: the same events as `read`, a page (array) at a time; bulk replays use it when present. */
  readPages?(range?: ReadRange, filter?: ReadFilter): AsyncIterable<readonly EventEnvelope[]>;
  /** Optional: the events at these positions, in the order asked (undefined where the log holds
   * none), each checked as `read` checks it: an actor reads a program's recorded results where
   * they are in the log instead of keeping a copy (see readAtPositions in ./read-at.ts, which
   * falls back to `read` of each position). */
  readAt?(positions: readonly Position[]): Promise<(EventEnvelope | undefined)[]>;
  /** Optional: the commit id of the message holding `position` as the log keeps it now (null:
   * none there). A log whose servers can show a reader messages they later drop (JetStream
   * failing over) offers it, so that a reader can check what it read is still the log. */
  commitIdAt?(position: Position): Promise<string | null>;
  /** A position at or after every stored event and before any later one (ORIGIN when empty). */
  head(): Promise<Position>;
  /** Position of one stream's last event (ORIGIN when it has none): what `expectedPosition` takes. */
  streamHead(stream: string): Promise<Position>;
  subscribe(options?: SubscribeOptions): Subscription;
  /** A claim/ack queue over the events that match its filter (see ./work-queue.ts). */
  workQueue(options: WorkQueueOptions): Promise<WorkQueue>;
  readonly blobs: BlobStore;
  /** Optional: what whoever opened the log must tell its operator (a server with a known fault). */
  readonly notices?: readonly string[];
  close(): Promise<void>;
}

export type { BlobStore } from './blobs.js';
