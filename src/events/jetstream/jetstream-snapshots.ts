/**
 * Actor snapshots kept on the cluster, beside a run's log: a stream of their own
 * (`<log stream>_SNAPSHOTS`) holding content-addressed blobs (snapshot bodies, batches of side
 * rows, the list of batches that make an actor's side rows) and, per actor, a head: the record
 * of its latest snapshot. A worker started on any machine reads the head and starts from it,
 * instead of folding the log from the start (actors/snapshots.ts: a snapshot is a cache of a
 * fold; what is here is checked as any snapshot is, and may be purged at any time).
 */
import { z } from 'zod';
import { JetStreamBlobStore } from './jetstream-blobs.js';
import type { JetStreamEventLog } from './jetstream-log.js';
import { withRetry } from './jetstream-support.js';

const DESCRIPTION = 'crucible actor snapshots, format 1';
const Hash = z.string().regex(/^[0-9a-f]{64}$/);

/** An actor's latest snapshot on the cluster. */
export const SnapshotHead = z.strictObject({
  format: z.literal(1),
  actor: z.string().regex(/^[A-Za-z0-9_-]+$/),
  position: z.number().int().nonnegative(),
  version: z.string().min(1),
  /** sha256 of the body, which is also its blob. */
  hash: Hash,
  /** The blob listing the side-row batches in the order they are applied (null: no side rows). */
  rows: Hash.nullable(),
});
export type SnapshotHead = z.infer<typeof SnapshotHead>;

export class JetStreamSnapshotStore {
  readonly blobs: JetStreamBlobStore;
  readonly #log: JetStreamEventLog;
  readonly #stream: string;
  readonly #prefix: string;

  private constructor(log: JetStreamEventLog) {
    this.#log = log;
    this.#stream = `${log.streamName}_SNAPSHOTS`;
    this.#prefix = `${log.prefix}-snapshots`;
    this.blobs = new JetStreamBlobStore(log, {
      stream: this.#stream,
      subjectPrefix: this.#prefix,
      replicas: log.replicas,
      create: true,
      description: DESCRIPTION,
      extraSubjects: [`${this.#prefix}.head.*`],
    });
  }

  static async open(log: JetStreamEventLog): Promise<JetStreamSnapshotStore> {
    const store = new JetStreamSnapshotStore(log);
    await log.refusedAs(`create the snapshot stream "${store.#stream}"`, () => store.blobs.init());
    return store;
  }

  #subject(actor: string): string {
    return `${this.#prefix}.head.${actor}`;
  }

  /** The actor's latest head; null when none, or when the last one stored is not a head this
   * code reads (a snapshot is a cache: the actor then folds from the log). */
  async head(actor: string): Promise<SnapshotHead | null> {
    const m = await withRetry(this.#log.retryForMs, () => this.#log.jsm.streams.getMessage(this.#stream, { last_by_subj: this.#subject(actor) }));
    if (!m) return null;
    let raw: unknown;
    try {
      raw = JSON.parse(Buffer.from(m.data).toString('utf8'));
    } catch {
      return null;
    }
    const head = SnapshotHead.safeParse(raw);
    return head.success && head.data.actor === actor ? head.data : null;
  }

  async putHead(head: SnapshotHead): Promise<void> {
    const checked = SnapshotHead.parse(head);
    await this.#log.refusedAs(`store the snapshot head of ${checked.actor}`, () =>
      withRetry(this.#log.retryForMs, () => this.#log.js.publish(this.#subject(checked.actor), Buffer.from(JSON.stringify(checked)))),
    );
  }
}
