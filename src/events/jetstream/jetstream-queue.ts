/**
 * A work queue on JetStream: a durable pull consumer with explicit acks, shared by every process
 * that opens the queue by name. The ack deadline is the consumer's ack_wait; a nak carries its
 * delay; the delivery limit is checked here (the consumer delivers without limit), so the item
 * that exceeds it is terminated and a WorkAbandoned event recorded, as on the local queues.
 */
import { AckPolicy, DeliverPolicy, JetStreamApiError, type Consumer, type ConsumerConfig } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import type { JetStreamEventLog } from './jetstream-log.js';
import { commitIdOf, withRetry } from './jetstream-support.js';
import { backoffFor, recordAbandoned, type ClaimOptions, type ResolvedQueueOptions, type WorkItem, type WorkQueue } from '../work-queue.js';

/** The durable consumer of work queue `name` (nats-auth.ts closes a role's own queue, the one
 * named after the role, to every other role). */
export function workQueueConsumer(name: string): string {
  return `wq_${name}`;
}

export class JetStreamWorkQueue implements WorkQueue {
  readonly name: string;
  readonly #log: JetStreamEventLog;
  readonly #opts: ResolvedQueueOptions;
  readonly #consumer: Consumer;
  #closed = false;

  private constructor(log: JetStreamEventLog, opts: ResolvedQueueOptions, consumer: Consumer) {
    this.name = opts.name;
    this.#log = log;
    this.#opts = opts;
    this.#consumer = consumer;
  }

  static async open(log: JetStreamEventLog, opts: ResolvedQueueOptions): Promise<JetStreamWorkQueue> {
    const durable = workQueueConsumer(opts.name);
    const streams = opts.filter.streams;
    const config: Partial<ConsumerConfig> = {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      ack_wait: nanos(opts.ackWaitMs),
      max_deliver: -1,
      deliver_policy: DeliverPolicy.All,
      max_ack_pending: 10_000,
      // One stream can be filtered by the server; anything else is filtered here (2.9: one filter).
      filter_subject: streams?.length === 1 ? log.subjectOf(streams[0]!) : `${log.prefix}.s.*`,
    };
    const jsm = log.jsm;
    let exists = true;
    try {
      const info = await withRetry(log.retryForMs, () => jsm.consumers.info(log.streamName, durable));
      if (info.config.ack_wait !== config.ack_wait || info.config.filter_subject !== config.filter_subject) {
        await withRetry(log.retryForMs, () =>
          jsm.consumers.update(log.streamName, durable, { ack_wait: config.ack_wait, filter_subject: config.filter_subject }),
        );
      }
    } catch (err) {
      if (!(err instanceof JetStreamApiError && err.code === 10014)) throw err;
      exists = false;
    }
    if (!exists) {
      await withRetry(log.retryForMs, () => jsm.consumers.add(log.streamName, config));
    }
    const consumer = await withRetry(log.retryForMs, () => log.js.consumers.get(log.streamName, durable));
    return new JetStreamWorkQueue(log, opts, consumer);
  }

  async claim(options: ClaimOptions = {}): Promise<WorkItem[]> {
    const max = options.max ?? 1;
    const until = Date.now() + (options.waitMs ?? 0);
    const out: WorkItem[] = [];
    while (!this.#closed && out.length < max) {
      const remaining = Math.max(1000, until - Date.now());
      const batch = await this.#consumer.fetch({ max_messages: max - out.length, expires: remaining });
      for await (const m of batch) {
        const commitId = commitIdOf(m);
        const events = this.#log.decodeMessage(m.seq, m.subject, m.data, commitId, this.#opts.filter);
        if (events.length === 0) {
          // Not work for this queue (another type or run): done with it at once.
          m.ack();
          continue;
        }
        const delivery = m.info.deliveryCount;
        if (delivery > this.#opts.maxDeliveries) {
          await recordAbandoned(this.#log, this.name, { commitId, events }, delivery - 1);
          m.term(`delivered ${delivery - 1} times without an ack`);
          continue;
        }
        out.push({
          commitId,
          events,
          delivery,
          ack: async () => {
            await m.ackAck();
          },
          nak: async (delayMs?: number) => {
            m.nak(delayMs ?? backoffFor(this.#opts, delivery));
          },
        });
      }
      if (out.length > 0 || Date.now() >= until) break;
    }
    return out;
  }

  async close(): Promise<void> {
    this.#closed = true;
  }
}
