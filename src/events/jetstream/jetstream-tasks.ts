/**
 * Task queues beside a run's JetStream log: small work items that are not events (e.g. one
 * program of an execution request), shared by every process that opens the queue by name.
 *
 * - A work-queue stream per queue (`<log stream>_TASKS_<name>`) holding its one subject, and one
 *   durable pull consumer with explicit acks, so an item is removed when acked and each item is
 *   held by one claimer at a time. Queues share no stream: a queue's consumer cannot be handed
 *   another queue's tasks (with one stream for all, a 2.9 cluster that reset the stream's state
 *   delivered program tasks on the solver's consumer).
 * - A task's id is its message id: several processes publishing the same task within the
 *   stream's duplicate window store it once.
 * - A claimed task not acked within `ackWaitMs` (a process that died) is delivered again;
 *   `working()` pushes the deadline back while a long task runs.
 */
import { headers, nanos } from '@nats-io/transport-node';
import { AckPolicy, DeliverPolicy, JetStreamApiError, RetentionPolicy, StorageType, type Consumer, type StreamConfig } from '@nats-io/jetstream';
import type { JetStreamEventLog } from './jetstream-log.js';
import { ensureStream, isTransient, sleep, withRetry } from './jetstream-support.js';
import { InvalidLogArgumentError } from '../errors.js';

/** 2: a stream per queue (format 1 kept every queue of a run in one stream). */
const DESCRIPTION = 'crucible task queue, format 2';

/** The stream of task queue `name` of a log. */
export function taskStreamOf(log: JetStreamEventLog, name: string): string {
  return `${log.streamName}_TASKS_${name}`;
}

/** The subject of task queue `name` of a log (what nats-auth.ts grants as `crucible.run.*.<name>`). */
export function taskSubjectOf(log: JetStreamEventLog, name: string): string {
  return `${log.prefix}-tasks.${name}`;
}

/** The durable consumer of task queue `name`: the one consumer its items are claimed through
 * (nats-auth.ts lets only the queue's own roles pull or ack through it). */
export function taskQueueConsumer(name: string): string {
  return `tq_${name}`;
}

export interface TaskQueueOptions {
  /** Letters, digits, '-' and '_'. */
  name: string;
  /** A claimed task not acked (nor `working()`) within this many ms is delivered again. Default 30 000. */
  ackWaitMs?: number;
}

export interface Task {
  readonly id: string;
  readonly body: string;
  /** 1 on the first delivery. */
  readonly delivery: number;
  ack(): Promise<void>;
  nak(delayMs?: number): void;
  /** Still working on it: the ack deadline starts again. */
  working(): void;
}

export interface TaskQueueDepth {
  /** Published and not yet claimed. */
  waiting: number;
  /** Claimed and not yet acked. */
  claimed: number;
}

export class JetStreamTaskQueue {
  readonly name: string;
  readonly #log: JetStreamEventLog;
  readonly #subject: string;
  readonly #stream: string;
  readonly #durable: string;
  readonly #consumer: Consumer;

  private constructor(log: JetStreamEventLog, name: string, stream: string, subject: string, durable: string, consumer: Consumer) {
    this.name = name;
    this.#log = log;
    this.#stream = stream;
    this.#subject = subject;
    this.#durable = durable;
    this.#consumer = consumer;
  }

  static async open(log: JetStreamEventLog, options: TaskQueueOptions): Promise<JetStreamTaskQueue> {
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(options.name))
      throw new InvalidLogArgumentError('taskQueue', [{ path: 'name', message: `"${options.name}": letters, digits, '-' and '_' only (1-64)` }]);
    const ackWaitMs = options.ackWaitMs ?? 30_000;
    if (!Number.isInteger(ackWaitMs) || ackWaitMs <= 0)
      throw new InvalidLogArgumentError('taskQueue', [{ path: 'ackWaitMs', message: `${ackWaitMs}: expected a positive integer` }]);
    const stream = taskStreamOf(log, options.name);
    const subject = taskSubjectOf(log, options.name);
    const want: Partial<StreamConfig> = {
      name: stream,
      description: DESCRIPTION,
      subjects: [subject],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
      num_replicas: log.replicas,
      duplicate_window: nanos(120_000),
    };
    await ensureStream(log.jsm, log.retryForMs, want, true, (c) => {
      if (c.description !== DESCRIPTION) return `its description is "${c.description ?? ''}", not a crucible task queue's (format 2)`;
      if ((c.subjects ?? []).length !== 1 || c.subjects![0] !== subject) return `its subjects are ${JSON.stringify(c.subjects ?? [])}, expected ["${subject}"]`;
      return null;
    });
    const durable = taskQueueConsumer(options.name);
    const config = {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      ack_wait: nanos(ackWaitMs),
      max_deliver: -1,
      deliver_policy: DeliverPolicy.All,
      max_ack_pending: 10_000,
      filter_subject: subject,
    };
    try {
      await withRetry(log.retryForMs, () => log.jsm.consumers.info(stream, durable));
    } catch (err) {
      if (!(err instanceof JetStreamApiError && err.code === 10014)) throw err;
      try {
        await withRetry(log.retryForMs, () => log.jsm.consumers.add(stream, config));
      } catch (addErr) {
        // Another process made it meanwhile: use theirs (same name, same config).
        await withRetry(log.retryForMs, () => log.jsm.consumers.info(stream, durable)).catch(() => {
          throw addErr;
        });
      }
    }
    const consumer = await withRetry(log.retryForMs, () => log.js.consumers.get(stream, durable));
    return new JetStreamTaskQueue(log, options.name, stream, subject, durable, consumer);
  }

  /** Stores the task unless a task with this id was published within the duplicate window;
   * true when it was new. */
  async publish(id: string, body: string): Promise<boolean> {
    const h = headers();
    const ack = await withRetry(this.#log.retryForMs, () => this.#log.js.publish(this.#subject, Buffer.from(body, 'utf8'), { msgID: id, headers: h }));
    return !ack.duplicate;
  }

  /** Up to `max` tasks, waiting up to `waitMs` (at least 1 s) when none is ready. */
  async claim(max = 1, waitMs = 1000): Promise<Task[]> {
    const out: Task[] = [];
    try {
      await this.#fetchInto(out, max, waitMs);
    } catch (err) {
      // The server went away during the pull (its heartbeats stopped, the client reconnects):
      // what was delivered is returned, the rest stays in the queue for the next claim.
      if (!isTransient(err)) throw err;
      // Not at once again: a claimer in a loop would spin while the client reconnects.
      if (out.length === 0) await sleep(250);
    }
    return out;
  }

  async #fetchInto(out: Task[], max: number, waitMs: number): Promise<void> {
    const batch = await this.#consumer.fetch({ max_messages: max, expires: Math.max(1000, waitMs) });
    for await (const m of batch) {
      out.push({
        id: m.headers?.get('Nats-Msg-Id') ?? `seq-${m.seq}`,
        body: m.string(),
        delivery: m.info.deliveryCount,
        ack: async () => {
          await m.ackAck();
        },
        nak: (delayMs?: number) => m.nak(delayMs),
        working: () => m.working(),
      });
    }
  }

  /** The depth of queue `name` of the log's run without opening it (nothing is created, so a
   * reader may ask): empty when the queue was never opened. */
  static async depthOf(log: JetStreamEventLog, name: string): Promise<TaskQueueDepth> {
    try {
      const info = await withRetry(log.retryForMs, () => log.jsm.consumers.info(taskStreamOf(log, name), taskQueueConsumer(name)));
      return { waiting: info.num_pending, claimed: info.num_ack_pending };
    } catch (err) {
      // 10014: no such consumer; 10059: no such stream (no worker has opened the queue yet).
      if (err instanceof JetStreamApiError && (err.code === 10014 || err.code === 10059)) return { waiting: 0, claimed: 0 };
      throw err;
    }
  }

  async depth(): Promise<TaskQueueDepth> {
    const info = await withRetry(this.#log.retryForMs, () => this.#log.jsm.consumers.info(this.#stream, this.#durable));
    return { waiting: info.num_pending, claimed: info.num_ack_pending };
  }
}
