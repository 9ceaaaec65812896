/**
 * A worker's snapshot table mirrored on the cluster, so that a replacement on any machine (no
 * local files) starts from the latest snapshot and folds only the events after it.
 *
 * The actor's runtime reads and writes the local table (a SQLite file, synchronous), as without
 * a cluster. Each save is then published, in order and off the actor's loop: the body as a blob,
 * the side rows written since the previous save as one batch blob, the list of batches that make
 * the side rows as a blob, and last the head naming them (a head is visible only once all it
 * names is stored). Side rows grow with the run (a row per recorded result), so a save ships only
 * its new rows, not all of them again; a list grown long, a publish that failed, or a start the
 * list does not describe ships every row once and starts a new list.
 *
 * At start, `restore` copies an actor's head into the local table when it is newer than what the
 * table holds; the runtime then checks and uses it as any snapshot (or refuses it and refolds).
 */
import type { SideReader, SideRows, SnapshotTable, StoredSnapshot } from '../actors/snapshots.js';
import type { Position } from '../events/log.js';
import type { JetStreamSnapshotStore } from '../events/jetstream/jetstream-snapshots.js';

/** Batches in an actor's list before a save ships every row again (a restore reads each). */
export const MAX_BATCHES = 32;

/** Side rows as bytes: per row, the key's length (4 bytes, big-endian), the key, the value's
 * length, the value. */
export function encodeRows(rows: readonly (readonly [Uint8Array, Uint8Array])[]): Uint8Array {
  let size = 0;
  for (const [k, v] of rows) size += 8 + k.byteLength + v.byteLength;
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (const [k, v] of rows) {
    out.writeUInt32BE(k.byteLength, at);
    out.set(k, at + 4);
    at += 4 + k.byteLength;
    out.writeUInt32BE(v.byteLength, at);
    out.set(v, at + 4);
    at += 4 + v.byteLength;
  }
  return out;
}

export function decodeRows(bytes: Uint8Array): [Uint8Array, Uint8Array][] {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const rows: [Uint8Array, Uint8Array][] = [];
  let at = 0;
  const take = (): Uint8Array => {
    if (at + 4 > buf.byteLength) throw new Error(`side-row batch cut short at byte ${at} of ${buf.byteLength}`);
    const n = buf.readUInt32BE(at);
    if (at + 4 + n > buf.byteLength) throw new Error(`side-row batch cut short: a field of ${n} bytes at byte ${at} of ${buf.byteLength}`);
    const field = buf.subarray(at + 4, at + 4 + n);
    at += 4 + n;
    return field;
  };
  while (at < buf.byteLength) rows.push([take(), take()]);
  return rows;
}

const RowList = (text: string): string[] => {
  const raw = JSON.parse(text) as unknown;
  if (!Array.isArray(raw) || !raw.every((h) => typeof h === 'string' && /^[0-9a-f]{64}$/.test(h)))
    throw new Error('the list of side-row batches is not a list of sha256');
  return raw as string[];
};

/** What a save ships for one actor, copied at the save (the local table moves on meanwhile). */
interface Shipment {
  ref: StoredSnapshot['ref'];
  body: Uint8Array;
  /** The rows' batch, or null when the actor keeps no side rows. */
  batch: Uint8Array | null;
  /** True when the batch holds every row (a new list starts with it). */
  whole: boolean;
  /** The actor's list generation when copied: a failure since makes it stale. */
  generation: number;
}

interface ActorMirror {
  /** Taken at each save (synchronously): whether the next save may extend the list, and the
   * batches in it then. */
  known: boolean;
  length: number;
  /** The list of the last head shipped (the shipping side's). */
  shipped: string[];
  /** Bumped by a failed shipment: those queued before it are dropped. */
  generation: number;
}

export interface ClusterSnapshotsReport {
  actor: string;
  /** 'restored': the head was copied into the local table; 'local': the local table holds it or newer. */
  outcome: 'restored' | 'local' | 'none';
  position: Position | null;
}

export class ClusterSnapshots implements SnapshotTable {
  readonly #local: SnapshotTable;
  readonly #store: JetStreamSnapshotStore;
  readonly #say: (line: string) => void;
  readonly #actors = new Map<string, ActorMirror>();
  #queue: Promise<void> = Promise.resolve();
  /** Heads published (tests and figures). */
  published = 0;

  constructor(local: SnapshotTable, store: JetStreamSnapshotStore, say: (line: string) => void = () => {}) {
    this.#local = local;
    this.#store = store;
    this.#say = say;
  }

  #mirror(actor: string): ActorMirror {
    let m = this.#actors.get(actor);
    if (!m) this.#actors.set(actor, (m = { known: false, length: 0, shipped: [], generation: 0 }));
    return m;
  }

  /** Copies each actor's head into the local table where it is newer than the local snapshot. */
  async restore(actors: readonly string[]): Promise<ClusterSnapshotsReport[]> {
    const out: ClusterSnapshotsReport[] = [];
    for (const actor of actors) {
      const head = await this.#store.head(actor);
      const local = this.#local.latest(actor);
      const m = this.#mirror(actor);
      if (!head) {
        out.push({ actor, outcome: 'none', position: null });
        continue;
      }
      const sameAsLocal = local !== null && local.ref.position === head.position && local.ref.hash === head.hash;
      if (local !== null && local.ref.position >= head.position && !sameAsLocal) {
        // The local one is newer (or another at the same place): what the head's list makes is
        // not what the actor starts from, so the next save ships every row.
        out.push({ actor, outcome: 'local', position: local.ref.position });
        continue;
      }
      const batches = head.rows === null ? [] : RowList(await this.#store.blobs.getText(head.rows));
      if (!sameAsLocal) {
        const body = await this.#store.blobs.get(head.hash);
        const rows: [Uint8Array, Uint8Array][] = [];
        for (const b of batches) for (const row of decodeRows(await this.#store.blobs.get(b))) rows.push(row);
        this.#local.save([
          {
            ref: { actor, position: head.position as Position, version: head.version, hash: head.hash },
            body,
            ...(head.rows === null ? {} : { side: { replace: true, rows } }),
          },
        ]);
      }
      m.known = head.rows !== null;
      m.length = batches.length;
      m.shipped = batches;
      out.push({ actor, outcome: sameAsLocal ? 'local' : 'restored', position: head.position as Position });
    }
    return out;
  }

  latest(actor: string): StoredSnapshot | null {
    return this.#local.latest(actor);
  }

  side(actor: string): SideReader {
    return this.#local.side(actor);
  }

  save(snapshots: readonly StoredSnapshot[]): void {
    this.#local.save(snapshots);
    for (const s of snapshots) this.#enqueue(this.#shipment(s));
  }

  /** The rows to ship for a save, taken now: the save's new rows where they extend the list,
   * else every row the local table holds for the actor. */
  #shipment({ ref, body, side }: StoredSnapshot): Shipment {
    const m = this.#mirror(ref.actor);
    const base = { ref, body: Buffer.from(body), generation: m.generation };
    if (!side) return { ...base, batch: null, whole: true };
    if (!side.replace && m.known && m.length < MAX_BATCHES) {
      m.length++;
      return { ...base, batch: encodeRows((side as SideRows).rows), whole: false };
    }
    m.known = true;
    m.length = 1;
    const rows = side.replace ? side.rows : [...this.#local.side(ref.actor).all()];
    return { ...base, batch: encodeRows(rows), whole: true };
  }

  #enqueue(s: Shipment): void {
    this.#queue = this.#queue.then(() => this.#ship(s));
  }

  async #ship(s: Shipment): Promise<void> {
    const m = this.#mirror(s.ref.actor);
    if (s.generation !== m.generation) return;
    try {
      let rows: string | null = null;
      if (s.batch !== null) {
        const batch = await this.#store.blobs.put(s.batch);
        const shipped = s.whole ? [batch] : [...m.shipped, batch];
        rows = await this.#store.blobs.put(JSON.stringify(shipped));
        m.shipped = shipped;
      }
      await this.#store.blobs.put(s.body);
      await this.#store.putHead({ format: 1, actor: s.ref.actor, position: s.ref.position, version: s.ref.version, hash: s.ref.hash, rows });
      this.published++;
    } catch (err) {
      // The list no longer describes the rows: the shipments queued after this one are dropped
      // and the next save ships every row. The cluster keeps its older head meanwhile.
      m.generation++;
      m.known = false;
      m.length = 0;
      this.#say(
        `could not store the snapshot of ${s.ref.actor} at position ${s.ref.position} on the cluster (${(err as Error).message}); the next one ships all its rows`,
      );
    }
  }

  /** Waits for the shipments queued so far (at most `ms`). */
  async flush(ms = 10_000): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const done = await Promise.race([
      this.#queue.then(() => true),
      new Promise<boolean>((r) => {
        timer = setTimeout(() => r(false), ms);
        timer.unref();
      }),
    ]);
    clearTimeout(timer);
    return done;
  }

  close(): void {
    this.#local.close();
  }
}
