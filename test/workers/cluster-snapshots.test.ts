/** Actor snapshots mirrored on the cluster: what a save ships, and what a table restored on
 * another machine (no local files) holds, against a real nats-server. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteSnapshotTable, sha256Hex, type SideRows, type StoredSnapshot } from '../../src/actors/snapshots.js';
import { openJetStreamLog, type JetStreamEventLog } from '../../src/events/jetstream/jetstream-log.js';
import { JetStreamSnapshotStore } from '../../src/events/jetstream/jetstream-snapshots.js';
import type { Position } from '../../src/events/log.js';
import { ClusterSnapshots, MAX_BATCHES, decodeRows, encodeRows } from '../../src/workers/cluster-snapshots.js';
import { startTestNats, uniqueLogNames, type TestNats } from '../support/nats.js';

const RUN = 'run-1';
let nats: TestNats;
let dir: string;
beforeAll(async () => {
  nats = await startTestNats(1);
  dir = mkdtempSync(path.join(tmpdir(), 'crucible-cluster-snapshots-'));
}, 30_000);
afterAll(async () => {
  await nats?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const bytes = (s: string) => new Uint8Array(Buffer.from(s));
const row = (k: string, v: string) => [bytes(k), bytes(v)] as const;
let files = 0;
/** A machine's own snapshot file, new and empty. */
const localTable = () => new SqliteSnapshotTable(path.join(dir, `m${files++}.db`), RUN);

function snapshot(position: number, state: string, side?: SideRows): StoredSnapshot {
  const body = bytes(JSON.stringify({ state, position }));
  return { ref: { actor: 'judge', position: position as Position, version: 'v1', hash: sha256Hex(body) }, body, ...(side ? { side } : {}) };
}

/** What a table holds for the judge: its latest snapshot and every side row, as text. */
function held(t: { latest(a: string): StoredSnapshot | null; side(a: string): { all(): IterableIterator<[Uint8Array, Uint8Array]> } }) {
  const latest = t.latest('judge');
  return {
    position: latest?.ref.position ?? null,
    body: latest ? Buffer.from(latest.body).toString() : null,
    rows: [...t.side('judge').all()].map(([k, v]) => `${Buffer.from(k).toString()}=${Buffer.from(v).toString()}`),
  };
}

async function withLog(fn: (log: JetStreamEventLog, store: JetStreamSnapshotStore) => Promise<void>): Promise<void> {
  const log = await openJetStreamLog({ servers: nats.urls, ...uniqueLogNames() });
  try {
    await fn(log, await JetStreamSnapshotStore.open(log));
  } finally {
    await log.close();
  }
}

describe('side rows as bytes', () => {
  it('round-trips rows of any bytes, and names where a batch is cut short', () => {
    const rows = [row('a', ''), row('', 'x'), [new Uint8Array([0, 255, 10]), new Uint8Array(300).fill(7)] as const];
    expect(decodeRows(encodeRows(rows)).map(([k, v]) => [Buffer.from(k).toString('hex'), Buffer.from(v).toString('hex')])).toEqual(
      rows.map(([k, v]) => [Buffer.from(k).toString('hex'), Buffer.from(v).toString('hex')]),
    );
    const whole = encodeRows([row('key', 'value')]);
    expect(() => decodeRows(whole.subarray(0, whole.byteLength - 2))).toThrow(/^side-row batch cut short: a field of 5 bytes at byte 7 of 14$/);
    expect(() => decodeRows(whole.subarray(0, 2))).toThrow(/^side-row batch cut short at byte 0 of 2$/);
  });
});

describe('actor snapshots on the cluster', () => {
  it('a table on another machine starts from the latest save: the same body and side rows, its new rows only shipped', async () => {
    await withLog(async (_log, store) => {
      const a = new ClusterSnapshots(localTable(), store);
      expect(await a.restore(['judge'])).toEqual([{ actor: 'judge', outcome: 'none', position: null }]);
      a.save([snapshot(10, 's1', { replace: true, rows: [row('k1', 'v1'), row('k2', 'v2')] })]);
      a.save([snapshot(20, 's2', { replace: false, rows: [row('k2', 'v2b'), row('k3', 'v3')] })]);
      expect(await a.flush()).toBe(true);
      expect(a.published).toBe(2);
      const head = (await store.head('judge'))!;
      expect(head).toMatchObject({ position: 20, version: 'v1' });
      // Two batches: the first save's rows, then only the second's.
      const batches = JSON.parse(await store.blobs.getText(head.rows!)) as string[];
      expect(batches.length).toBe(2);
      expect(decodeRows(await store.blobs.get(batches[1]!)).length).toBe(2);

      const b = new ClusterSnapshots(localTable(), store);
      expect(await b.restore(['judge'])).toEqual([{ actor: 'judge', outcome: 'restored', position: 20 }]);
      expect(held(b)).toEqual(held(a));
      expect(held(b).rows).toEqual(['k1=v1', 'k2=v2b', 'k3=v3']);

      // B goes on from there: its list extends the one it started from.
      b.save([snapshot(30, 's3', { replace: false, rows: [row('k4', 'v4')] })]);
      await b.flush();
      const c = new ClusterSnapshots(localTable(), store);
      await c.restore(['judge']);
      expect(held(c)).toEqual(held(b));
      expect(held(c)).toMatchObject({ position: 30, rows: ['k1=v1', 'k2=v2b', 'k3=v3', 'k4=v4'] });
      expect((JSON.parse(await store.blobs.getText((await store.head('judge'))!.rows!)) as string[]).length).toBe(3);
    });
  });

  it('a local snapshot newer than the head is kept, and its first save ships every row', async () => {
    await withLog(async (_log, store) => {
      const a = new ClusterSnapshots(localTable(), store);
      a.save([snapshot(10, 's1', { replace: true, rows: [row('k1', 'v1')] })]);
      await a.flush();
      const local = localTable();
      local.save([snapshot(50, 'local', { replace: true, rows: [row('k1', 'v1'), row('k9', 'v9')] })]);
      const b = new ClusterSnapshots(local, store);
      expect(await b.restore(['judge'])).toEqual([{ actor: 'judge', outcome: 'local', position: 50 }]);
      expect(held(b).body).toContain('local');
      b.save([snapshot(60, 's6', { replace: false, rows: [row('k5', 'v5')] })]);
      await b.flush();
      const batches = JSON.parse(await store.blobs.getText((await store.head('judge'))!.rows!)) as string[];
      expect(batches.length).toBe(1);
      const c = new ClusterSnapshots(localTable(), store);
      await c.restore(['judge']);
      expect(held(c)).toEqual(held(b));
      expect(held(c).rows).toEqual(['k1=v1', 'k5=v5', 'k9=v9']);
    });
  });

  it('a shipment that fails drops those queued after it; the next save ships every row, and a restore is whole', async () => {
    await withLog(async (_log, store) => {
      const said: string[] = [];
      const a = new ClusterSnapshots(localTable(), store, (l) => said.push(l));
      a.save([snapshot(10, 's1', { replace: true, rows: [row('k1', 'v1')] })]);
      await a.flush();
      // The cluster refuses the next head (a server away for longer than the log retries).
      const putHead = store.putHead.bind(store);
      let refuse = 1;
      store.putHead = async (h) => {
        if (refuse-- > 0) throw new Error('no server answered');
        return putHead(h);
      };
      a.save([snapshot(20, 's2', { replace: false, rows: [row('k2', 'v2')] })]);
      a.save([snapshot(30, 's3', { replace: false, rows: [row('k3', 'v3')] })]);
      await a.flush();
      expect(said).toEqual(['could not store the snapshot of judge at position 20 on the cluster (no server answered); the next one ships all its rows']);
      expect((await store.head('judge'))!.position).toBe(10);
      a.save([snapshot(40, 's4', { replace: false, rows: [row('k4', 'v4')] })]);
      await a.flush();
      const batches = JSON.parse(await store.blobs.getText((await store.head('judge'))!.rows!)) as string[];
      expect(batches.length).toBe(1);
      const b = new ClusterSnapshots(localTable(), store);
      await b.restore(['judge']);
      expect(held(b)).toEqual(held(a));
      expect(held(b).rows).toEqual(['k1=v1', 'k2=v2', 'k3=v3', 'k4=v4']);
    });
  });

  it(`a list of ${MAX_BATCHES} batches starts again with every row; an actor without side rows ships its body only`, async () => {
    await withLog(async (_log, store) => {
      const a = new ClusterSnapshots(localTable(), store);
      a.save([snapshot(1, 's', { replace: true, rows: [row('k0', 'v')] })]);
      for (let i = 1; i <= MAX_BATCHES; i++) a.save([snapshot(1 + i, 's', { replace: false, rows: [row(`k${i}`, 'v')] })]);
      await a.flush();
      const batches = JSON.parse(await store.blobs.getText((await store.head('judge'))!.rows!)) as string[];
      expect(batches.length).toBe(1);
      expect(decodeRows(await store.blobs.get(batches[0]!)).length).toBe(MAX_BATCHES + 1);

      const plain = new ClusterSnapshots(localTable(), store);
      plain.save([snapshot(100, 'no rows')]);
      await plain.flush();
      expect((await store.head('judge'))!).toMatchObject({ position: 100, rows: null });
      const b = new ClusterSnapshots(localTable(), store);
      await b.restore(['judge']);
      expect(held(b)).toMatchObject({ position: 100, rows: [] });
    });
  });

  it("a head that is not one (junk, another actor's) is no snapshot: the actor folds from the log", async () => {
    await withLog(async (log, store) => {
      const subject = `${log.prefix}-snapshots.head.judge`;
      for (const junk of [
        'not json',
        JSON.stringify({ format: 1, actor: 'judge' }),
        JSON.stringify({ format: 1, actor: 'executor', position: 1, version: 'v', hash: 'a'.repeat(64), rows: null }),
      ]) {
        await log.js.publish(subject, Buffer.from(junk));
        expect(await store.head('judge')).toBeNull();
        expect(await new ClusterSnapshots(localTable(), store).restore(['judge'])).toEqual([{ actor: 'judge', outcome: 'none', position: null }]);
      }
      await expect(store.putHead({ format: 1, actor: 'judge', position: -1, version: 'v', hash: 'x', rows: null })).rejects.toThrow(/position|hash/);
    });
  });
});
