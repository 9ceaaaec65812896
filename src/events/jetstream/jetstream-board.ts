/**
 * The worker board beside a run's JetStream log: leases (who may write a singleton's stream)
 * and heartbeats (which processes are alive, for `status`). A stream that keeps the last
 * message per subject (what a KV bucket is), written with compare-and-set on the subject's
 * last sequence, so two processes cannot both take or renew one lease.
 *
 * A lease names its holder and the time it lapses (the holder's clock; holders renew well
 * before, so clocks only need to agree to within the lease's length). A holder that misses its
 * renewals loses the lease to the first standby that finds it lapsed.
 */
import { JetStreamApiError, RetentionPolicy, StorageType, type StreamConfig } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { z } from 'zod';
import type { JetStreamEventLog } from './jetstream-log.js';
import { ensureStream, withRetry } from './jetstream-support.js';

const DESCRIPTION = 'crucible worker board, format 1';

const LeaseRecord = z.strictObject({ holder: z.string().nullable(), until: z.number() });
type LeaseRecord = z.infer<typeof LeaseRecord>;

/** What a worker says of itself every few seconds. */
export const Heartbeat = z.strictObject({
  workerId: z.string(),
  role: z.string(),
  pid: z.int(),
  host: z.string(),
  /** live: doing its role's work; standby: a singleton waiting for the lease. */
  state: z.enum(['live', 'standby', 'stopping']),
  /** Sequence of the last log message folded. */
  folded: z.int().nonnegative(),
  /** Effects (or tasks) it is running now. */
  running: z.int().nonnegative(),
  /** Effects it knows are pending (singletons) or tasks done (executors). */
  pending: z.int().nonnegative(),
  done: z.int().nonnegative(),
  startedAt: z.number(),
  at: z.number(),
});
export type Heartbeat = z.infer<typeof Heartbeat>;

/** Subject token: base64url, so any name is one valid token. */
const token = (name: string) => Buffer.from(name, 'utf8').toString('base64url');

/** Whether a publish failed only because the subject moved past the expected sequence. */
function lostRace(err: unknown): boolean {
  return err instanceof JetStreamApiError && (err.code === 10071 || err.code === 10164);
}

export class Lease {
  #seq: number;
  #until: number;
  #held = true;
  /** Renewals and the release, one at a time: each is a compare-and-set on the sequence the
   * previous one wrote. Two at once (the holder's timer and a writer making sure of its margin)
   * would both expect the same sequence, and the loser would take its own holder's renewal for
   * someone else's and give up a lease it still holds. */
  #chain: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly board: WorkerBoard,
    readonly name: string,
    readonly holder: string,
    readonly ttlMs: number,
    seq: number,
    until: number,
  ) {
    this.#seq = seq;
    this.#until = until;
  }

  /** True while the lease is ours with at least `marginMs` to run (by this process's clock). */
  heldFor(marginMs = 0): boolean {
    return this.#held && Date.now() + marginMs < this.#until;
  }

  /** Extends the lease; false (and lost for good) when someone else took it meanwhile. */
  renew(): Promise<boolean> {
    return this.#serial(() => this.#renew());
  }

  #serial<T>(op: () => Promise<T>): Promise<T> {
    const next = this.#chain.then(op);
    this.#chain = next.catch(() => undefined);
    return next;
  }

  async #renew(): Promise<boolean> {
    if (!this.#held) return false;
    const until = Date.now() + this.ttlMs;
    const seq = await this.board.put(this.name, { holder: this.holder, until }, this.#seq);
    if (seq === null) {
      this.#held = false;
      return false;
    }
    this.#seq = seq;
    this.#until = until;
    return true;
  }

  /** Gives the lease up at once, so a standby need not wait for it to lapse. */
  release(): Promise<void> {
    // Not held from now on; the record is cleared after a renewal under way (with its sequence).
    const held = this.#held;
    this.#held = false;
    return this.#serial(async () => {
      if (held) await this.board.put(this.name, { holder: null, until: 0 }, this.#seq).catch(() => null);
    });
  }
}

export class WorkerBoard {
  readonly #log: JetStreamEventLog;
  readonly #stream: string;
  readonly #prefix: string;

  private constructor(log: JetStreamEventLog) {
    this.#log = log;
    this.#stream = `${log.streamName}_WORKERS`;
    this.#prefix = `${log.prefix}-workers`;
  }

  static async open(log: JetStreamEventLog): Promise<WorkerBoard> {
    const board = new WorkerBoard(log);
    const want: Partial<StreamConfig> = {
      name: board.#stream,
      description: DESCRIPTION,
      // Leases and heartbeats only: nothing else a role's grants reach is stored here.
      subjects: [`${board.#prefix}.lease.*`, `${board.#prefix}.hb.*`],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      num_replicas: log.replicas,
      max_msgs_per_subject: 1,
      // A heartbeat nobody renews is gone after a day; leases are renewed far more often.
      max_age: nanos(24 * 3600 * 1000),
    };
    await ensureStream(log.jsm, log.retryForMs, want, true, (c) =>
      c.description === DESCRIPTION ? null : `its description is "${c.description ?? ''}", not a crucible worker board's`,
    );
    return board;
  }

  #leaseSubject(name: string): string {
    return `${this.#prefix}.lease.${token(name)}`;
  }

  async #last(subject: string): Promise<{ seq: number; text: string } | null> {
    const m = await withRetry(this.#log.retryForMs, () => this.#log.jsm.streams.getMessage(this.#stream, { last_by_subj: subject }));
    return m ? { seq: m.seq, text: Buffer.from(m.data).toString('utf8') } : null;
  }

  /** Writes a lease record if the subject's last sequence is still `expected` (0: none yet);
   * the new sequence, or null when another process wrote first. */
  async put(name: string, record: LeaseRecord, expected: number): Promise<number | null> {
    try {
      const ack = await withRetry(this.#log.retryForMs, () =>
        this.#log.js.publish(this.#leaseSubject(name), Buffer.from(JSON.stringify(record)), { expect: { lastSubjectSequence: expected } }),
      );
      return ack.seq;
    } catch (err) {
      if (lostRace(err)) return null;
      throw err;
    }
  }

  /** The lease's holder now (null when free or lapsed). */
  async holderOf(name: string): Promise<string | null> {
    const last = await this.#last(this.#leaseSubject(name));
    if (!last) return null;
    const r = LeaseRecord.safeParse(JSON.parse(last.text));
    if (!r.success || r.data.until <= Date.now()) return null;
    return r.data.holder;
  }

  /** Takes the lease when it is free or lapsed; null when someone else holds it. */
  async acquire(name: string, holder: string, ttlMs: number): Promise<Lease | null> {
    const last = await this.#last(this.#leaseSubject(name));
    if (last) {
      const r = LeaseRecord.safeParse(JSON.parse(last.text));
      if (r.success && r.data.holder !== null && r.data.holder !== holder && r.data.until > Date.now()) return null;
    }
    const until = Date.now() + ttlMs;
    const seq = await this.put(name, { holder, until }, last?.seq ?? 0);
    return seq === null ? null : new Lease(this, name, holder, ttlMs, seq, until);
  }

  async beat(beat: Heartbeat): Promise<void> {
    await withRetry(this.#log.retryForMs, () =>
      this.#log.js.publish(`${this.#prefix}.hb.${token(beat.workerId)}`, Buffer.from(JSON.stringify(Heartbeat.parse(beat)))),
    );
  }

  /** The last heartbeat of every worker that ever beat on this run. */
  async heartbeats(): Promise<Heartbeat[]> {
    const info = await withRetry(this.#log.retryForMs, () => this.#log.jsm.streams.info(this.#stream, { subjects_filter: `${this.#prefix}.hb.>` }));
    const subjects = Object.keys(info.state.subjects ?? {}).sort();
    const out: Heartbeat[] = [];
    for (const s of subjects) {
      const last = await this.#last(s);
      if (!last) continue;
      // Any worker may beat under any name: what is not a heartbeat is passed over.
      const r = Heartbeat.safeParse(parseJson(last.text));
      if (r.success) out.push(r.data);
    }
    return out;
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
