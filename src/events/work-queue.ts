/**
 * Claim/ack work queues over the log: the events matching a queue's filter are its work, one item
 * per commit (the matching events of that commit). A claimed item is invisible to other claimers
 * until it is acked (done), nakked (given back, delivered again after a backoff) or its ack
 * deadline passes (delivered again). An item delivered `maxDeliveries` times without an ack is
 * dropped and a `WorkAbandoned` event is appended, so the failure is in the log, not lost.
 *
 * On JetStream a queue is a durable pull consumer shared by every process; `LocalWorkQueue` is the
 * in-process equivalent used by the memory and SQLite backends (one queue per log handle).
 */
import { z } from 'zod';
import type { EventEnvelope } from './envelope.js';
import { InvalidLogArgumentError, summarizeIssues } from './errors.js';
import { ReadFilterSchema } from './log-args.js';
import { ORIGIN, type EventLog, type Position, type ReadFilter } from './log.js';

export interface WorkQueueOptions {
  /** The queue's name (a durable consumer's name on JetStream): letters, digits, '-' and '_'. */
  name: string;
  /** Which events are work. */
  filter?: ReadFilter;
  /** A claimed item not acked within this many ms is delivered again. Default 30 000. */
  ackWaitMs?: number;
  /** Deliveries before an item is abandoned (and WorkAbandoned recorded). Default 5. */
  maxDeliveries?: number;
  /** Delay before a nakked item is delivered again, by delivery number (the last one repeats). Default [1000]. */
  backoffMs?: readonly number[];
}

export interface ClaimOptions {
  /** Most items to return. Default 1. */
  max?: number;
  /** How long to wait for an item when none is ready, in ms. Default 0 (JetStream: at least 1 s,
   * the shortest pull request the client makes). */
  waitMs?: number;
}

export interface WorkItem {
  readonly commitId: string;
  /** The events of the commit that match the queue's filter (at least one). */
  readonly events: readonly EventEnvelope[];
  /** 1 on the first delivery, 2 on the second... */
  readonly delivery: number;
  /** The work is done: never delivered again. */
  ack(): Promise<void>;
  /** The work is given back: delivered again after `delayMs` (default: the queue's backoff). */
  nak(delayMs?: number): Promise<void>;
}

export interface WorkQueue {
  readonly name: string;
  claim(options?: ClaimOptions): Promise<WorkItem[]>;
  close(): Promise<void>;
}

export const WorkQueueOptionsSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "letters, digits, '-' and '_' only (1-64)"),
  filter: ReadFilterSchema.optional(),
  ackWaitMs: z.int().positive().optional(),
  maxDeliveries: z.int().positive().optional(),
  backoffMs: z.array(z.int().nonnegative()).min(1).readonly().optional(),
});

export interface ResolvedQueueOptions {
  name: string;
  filter: ReadFilter;
  ackWaitMs: number;
  maxDeliveries: number;
  backoffMs: readonly number[];
}

export function parseWorkQueueOptions(options: unknown): ResolvedQueueOptions {
  const r = WorkQueueOptionsSchema.safeParse(options);
  if (!r.success) throw new InvalidLogArgumentError('workQueue', summarizeIssues(r.error.issues, 'options'));
  return {
    name: r.data.name,
    filter: r.data.filter ?? {},
    ackWaitMs: r.data.ackWaitMs ?? 30_000,
    maxDeliveries: r.data.maxDeliveries ?? 5,
    backoffMs: r.data.backoffMs ?? [1000],
  };
}

export function backoffFor(opts: ResolvedQueueOptions, delivery: number): number {
  return opts.backoffMs[Math.min(delivery, opts.backoffMs.length) - 1]!;
}

/** Records an abandoned item in the log (idempotent: one event per queue and item). */
export async function recordAbandoned(
  log: EventLog,
  queue: string,
  item: { commitId: string; events: readonly EventEnvelope[] },
  deliveries: number,
): Promise<void> {
  await log.append(
    `queue/${queue}`,
    [
      {
        type: 'WorkAbandoned',
        runId: item.events[0]!.runId,
        causationId: item.events[0]!.id,
        correlationId: item.events[0]!.correlationId ?? item.events[0]!.id,
        data: { queue, commitId: item.commitId, deliveries, reason: `not acked after ${deliveries} deliveries` },
      },
    ],
    { commitId: `queue/${queue}/abandoned/${item.commitId}` },
  );
}

interface LocalItem {
  commitId: string;
  events: EventEnvelope[];
  deliveries: number;
  /** Not deliverable before this time (ms). */
  visibleAt: number;
  /** Set while claimed: the claim that holds it. */
  claim: number | null;
}

/**
 * The in-process work queue: reads the log after its cursor, keeps unfinished items in memory.
 * Its state is lost with the process (work not acked is delivered again by a new queue from the
 * start of the log, unless acked items are skipped by the caller's own idempotence).
 */
export class LocalWorkQueue implements WorkQueue {
  readonly name: string;
  readonly #log: EventLog;
  readonly #opts: ResolvedQueueOptions;
  readonly #now: () => number;
  #cursor: Position = ORIGIN;
  readonly #items = new Map<string, LocalItem>();
  #claims = 0;
  #closed = false;

  constructor(log: EventLog, opts: ResolvedQueueOptions, now: () => number = Date.now) {
    this.name = opts.name;
    this.#log = log;
    this.#opts = opts;
    this.#now = now;
  }

  async #pull(): Promise<void> {
    for await (const e of this.#log.read({ after: this.#cursor }, this.#opts.filter)) {
      let item = this.#items.get(e.commitId);
      if (!item) this.#items.set(e.commitId, (item = { commitId: e.commitId, events: [], deliveries: 0, visibleAt: 0, claim: null }));
      item.events.push(e);
      this.#cursor = e.position;
    }
  }

  async claim(options: ClaimOptions = {}): Promise<WorkItem[]> {
    const max = options.max ?? 1;
    const until = this.#now() + (options.waitMs ?? 0);
    for (;;) {
      if (this.#closed) return [];
      await this.#pull();
      const out: WorkItem[] = [];
      const now = this.#now();
      for (const item of [...this.#items.values()]) {
        if (out.length >= max) break;
        if (item.visibleAt > now) continue;
        if (item.deliveries >= this.#opts.maxDeliveries) {
          this.#items.delete(item.commitId);
          await recordAbandoned(this.#log, this.name, item, item.deliveries);
          continue;
        }
        item.deliveries++;
        const claim = ++this.#claims;
        item.claim = claim;
        item.visibleAt = now + this.#opts.ackWaitMs;
        out.push(this.#workItem(item, claim));
      }
      if (out.length > 0 || this.#now() >= until) return out;
      await new Promise((r) => setTimeout(r, Math.min(20, Math.max(1, until - this.#now()))));
    }
  }

  #workItem(item: LocalItem, claim: number): WorkItem {
    // Acting on a claim that has expired (and was delivered again) is ignored, as JetStream does.
    const current = () => this.#items.get(item.commitId) === item && item.claim === claim;
    return {
      commitId: item.commitId,
      events: [...item.events],
      delivery: item.deliveries,
      ack: async () => {
        if (current()) this.#items.delete(item.commitId);
      },
      nak: async (delayMs?: number) => {
        if (!current()) return;
        item.claim = null;
        item.visibleAt = this.#now() + (delayMs ?? backoffFor(this.#opts, item.deliveries));
      },
    };
  }

  async close(): Promise<void> {
    this.#closed = true;
  }
}
