/**
 * The in-memory backend of the EventLog port: the whole contract, nothing durable. For unit
 * tests of actors and projections, and to run the conformance suite without any server. Handles
 * opened on one `MemoryLogStore` share its events, as handles on one file or one server do.
 * Positions number commits, not events (as on JetStream), so callers cannot rely on +1.
 */
import { randomUUID } from 'node:crypto';
import { MemoryBlobStore } from '../blobs.js';
import { catalog } from '../catalog.js';
import { decodeStored, encodeCommit, matchesFilter, type StoredEvent } from '../commit.js';
import type { EventEnvelope, NewEvent } from '../envelope.js';
import { ConcurrencyError, DuplicateEventIdError, LogClosedError } from '../errors.js';
import { parseAppendArgs, parseReadArgs, parseStreamName, parseSubscribeOptions } from '../log-args.js';
import {
  DEFAULT_MAX_COMMIT_BYTES,
  MAX_COMMIT_EVENTS,
  ORIGIN,
  type AppendOptions,
  type AppendResult,
  type EventLog,
  type LogCapabilities,
  type Position,
  type ReadFilter,
  type ReadRange,
  type SubscribeOptions,
  type Subscription,
} from '../log.js';
import { eventPosition, headPosition, indexOf, seqOf } from '../positions.js';
import type { EventCodec } from '../registry.js';
import { WakeSubscription } from '../wake-subscription.js';
import { LocalWorkQueue, parseWorkQueueOptions, type WorkQueue, type WorkQueueOptions } from '../work-queue.js';

interface StoredCommit {
  seq: number;
  stream: string;
  commitId: string;
  events: StoredEvent[];
  /** When it was appended (ms, the store's clock): the dedup window counts from here. */
  atMs: number;
}

export interface MemoryLogOptions {
  /** How long a commit id is remembered (ms). Default: forever. */
  dedupWindowMs?: number;
  maxCommitBytes?: number;
  /** The clock the dedup window reads (tests move it). Default Date.now. */
  now?: () => number;
}

/** The events themselves, shared by every handle opened on it. */
export class MemoryLogStore {
  readonly commits: StoredCommit[] = [];
  readonly byCommitId = new Map<string, StoredCommit>();
  readonly eventIds = new Set<string>();
  readonly streamLast = new Map<string, Position>();
  readonly blobs = new MemoryBlobStore();
  readonly listeners = new Set<() => void>();
  /** Every store is another log. */
  readonly identity = `memory:${randomUUID()}`;
  readonly options: Required<Omit<MemoryLogOptions, 'now'>> & { now: () => number };

  constructor(opts: MemoryLogOptions = {}) {
    this.options = {
      dedupWindowMs: opts.dedupWindowMs ?? Number.POSITIVE_INFINITY,
      maxCommitBytes: opts.maxCommitBytes ?? DEFAULT_MAX_COMMIT_BYTES,
      now: opts.now ?? Date.now,
    };
  }

  open(opts: { registry?: EventCodec } = {}): MemoryEventLog {
    return new MemoryEventLog(this, opts.registry ?? catalog);
  }
}

export function openMemoryLog(opts: MemoryLogOptions & { registry?: EventCodec } = {}): MemoryEventLog {
  return new MemoryLogStore(opts).open(opts);
}

export class MemoryEventLog implements EventLog {
  readonly capabilities: LogCapabilities;
  readonly location = 'memory:';
  readonly identity: string;
  readonly blobs: MemoryBlobStore;
  readonly #store: MemoryLogStore;
  readonly #registry: EventCodec;
  readonly #subs = new Set<Subscription>();
  #closed = false;

  constructor(store: MemoryLogStore, registry: EventCodec) {
    this.#store = store;
    this.#registry = registry;
    this.blobs = store.blobs;
    this.identity = store.identity;
    this.capabilities = {
      dedupWindowMs: store.options.dedupWindowMs,
      maxCommitBytes: store.options.maxCommitBytes,
      maxCommitEvents: MAX_COMMIT_EVENTS,
      multiProcess: false,
      durable: false,
      sharedWorkQueues: false,
      refusesReusedEventIds: true,
    };
  }

  async append(stream: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    this.#assertOpen();
    const args = parseAppendArgs(stream, options);
    const { commitId, expectedPosition } = args.options;
    const commit = encodeCommit(this.#registry, args.stream, events, commitId, this.capabilities);
    const store = this.#store;
    const now = store.options.now();
    const earlier = store.byCommitId.get(commitId);
    if (earlier && now - earlier.atMs < store.options.dedupWindowMs) {
      return { positions: earlier.events.map((_, i) => eventPosition(earlier.seq, i)), duplicate: true };
    }
    if (expectedPosition !== undefined) {
      const actual = store.streamLast.get(args.stream) ?? ORIGIN;
      if (actual !== expectedPosition) throw new ConcurrencyError(args.stream, expectedPosition, actual);
    }
    commit.events.forEach((e, index) => {
      if (store.eventIds.has(e.id)) throw new DuplicateEventIdError(e.id, { index, stream: args.stream, commitId });
    });
    const seq = store.commits.length + 1;
    const stored: StoredCommit = { seq, stream: args.stream, commitId, events: commit.events, atMs: now };
    store.commits.push(stored);
    store.byCommitId.set(commitId, stored);
    for (const e of commit.events) store.eventIds.add(e.id);
    const positions = commit.events.map((_, i) => eventPosition(seq, i));
    store.streamLast.set(args.stream, positions[positions.length - 1]!);
    for (const wake of store.listeners) wake();
    return { positions, duplicate: false };
  }

  async readAt(positions: readonly Position[]): Promise<(EventEnvelope | undefined)[]> {
    this.#assertOpen();
    const commits = this.#store.commits;
    return positions.map((position) => {
      const c = commits[seqOf(position) - 1];
      const e = c?.events[indexOf(position)];
      return c && e ? decodeStored(this.#registry, e, position, c.stream, c.commitId) : undefined;
    });
  }

  async *read(range?: ReadRange, filter?: ReadFilter): AsyncIterable<EventEnvelope> {
    this.#assertOpen();
    const args = parseReadArgs(range, filter);
    const head = this.#headNow();
    const to = args.range.to !== undefined && args.range.to < head ? args.range.to : head;
    let left = args.range.limit ?? Number.POSITIVE_INFINITY;
    for (const e of this.eventsBetween(args.range.after ?? ORIGIN, to, args.filter)) {
      if (left-- <= 0) return;
      if (this.#closed) throw new LogClosedError();
      yield e;
    }
  }

  /** Decoded events in (after, to] matching the filter, in order. */
  *eventsBetween(after: Position, to: Position, filter: ReadFilter): Generator<EventEnvelope> {
    const commits = this.#store.commits;
    for (let s = Math.max(1, seqOf(after)); s <= Math.min(commits.length, seqOf(to)); s++) {
      const c = commits[s - 1]!;
      for (let i = 0; i < c.events.length; i++) {
        const position = eventPosition(s, i);
        if (position <= after || position > to) continue;
        const e = c.events[i]!;
        if (!matchesFilter(filter, c.stream, e.type, e.runId)) continue;
        yield decodeStored(this.#registry, e, position, c.stream, c.commitId);
      }
    }
  }

  #headNow(): Position {
    return headPosition(this.#store.commits.length);
  }

  async head(): Promise<Position> {
    this.#assertOpen();
    return this.#headNow();
  }

  async streamHead(stream: string): Promise<Position> {
    this.#assertOpen();
    return this.#store.streamLast.get(parseStreamName('streamHead', stream)) ?? ORIGIN;
  }

  subscribe(options?: SubscribeOptions): Subscription {
    this.#assertOpen();
    const opts = parseSubscribeOptions(options);
    const sub = new WakeSubscription(
      opts.after ?? ORIGIN,
      (after, to) => this.eventsBetween(after, to, opts.filter ?? {}),
      () => this.#headNow(),
      (wake) => {
        this.#store.listeners.add(wake);
        return () => this.#store.listeners.delete(wake);
      },
      () => this.#closed,
      () => this.#subs.delete(sub),
    );
    this.#subs.add(sub);
    return sub;
  }

  async workQueue(options: WorkQueueOptions): Promise<WorkQueue> {
    this.#assertOpen();
    return new LocalWorkQueue(this, parseWorkQueueOptions(options), this.#store.options.now);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const s of this.#subs) await s.close();
  }

  #assertOpen(): void {
    if (this.#closed) throw new LogClosedError();
  }
}
