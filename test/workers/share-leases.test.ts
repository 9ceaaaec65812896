/**
 * The leases of a Judge split in shares, on a real nats-server: processes spread over the
 * shares, a share nobody holds is taken within about two lease lengths, and the shares of a
 * process that stops move to the others.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openJetStreamLog, type JetStreamEventLog } from '../../src/events/jetstream/jetstream-log.js';
import { WorkerBoard } from '../../src/events/jetstream/jetstream-board.js';
import { ShareLeases } from '../../src/workers/share-leases.js';
import { startTestNats, uniqueLogNames, type TestNats } from '../support/nats.js';
import { until } from '../support/until.js';

let nats: TestNats;
let log: JetStreamEventLog;
let board: WorkerBoard;

beforeAll(async () => {
  nats = await startTestNats(1);
  log = await openJetStreamLog({ servers: nats.urls, ...uniqueLogNames() });
  board = await WorkerBoard.open(log);
}, 60_000);
afterAll(async () => {
  await log?.close();
  await nats?.stop();
});

const TTL = 600;

describe('share leases', () => {
  it('two processes take a share each, the third share goes to one of them, and a stopped one leaves its shares to the other', async () => {
    const changes: string[] = [];
    const a = new ShareLeases(board, 'judge', 'A', 3, TTL, 0, (held) => changes.push(`A ${held.join(',')}`));
    const b = new ShareLeases(board, 'judge', 'B', 3, TTL, 0, (held) => changes.push(`B ${held.join(',')}`));
    await a.start();
    await b.start();
    try {
      // Both preferred share 0: A has it; B, holding none, took the next free one at once.
      expect(a.held).toEqual([0]);
      expect(b.held).toEqual([1]);
      expect(await board.holderOf('role-judge/s0')).toBe('A');
      // Share 2 has no process of its own: one of them takes it once it was free a lease length.
      await until('share 2 taken', 10_000, async () => ((await board.holderOf('role-judge/s2')) !== null ? true : null));
      expect([...a.held, ...b.held].sort()).toEqual([0, 1, 2]);
      // Held leases are renewed: after several lease lengths nothing moved.
      const before = { a: a.held, b: b.held };
      await new Promise((r) => setTimeout(r, 3 * TTL));
      expect({ a: a.held, b: b.held }).toEqual(before);
      // A goes away (its leases released): B holds every share.
      await a.stop();
      await until('B holds all three shares', 10_000, async () => (b.held.length === 3 ? true : null));
      expect(await board.holderOf('role-judge/s0')).toBe('B');
      expect(changes).toContain('A 0');
      expect(changes).toContain('B 1');
    } finally {
      await a.stop();
      await b.stop();
    }
  });

  it('a holder that stops renewing (a dead process) loses its share to a live one', async () => {
    // 'Z' holds share 0 and never renews: its lease lapses after TTL.
    const dead = await board.acquire('role-judge/s0', 'Z', TTL);
    expect(dead).not.toBeNull();
    const live = new ShareLeases(board, 'judge', 'C', 2, TTL, 0, () => undefined);
    await live.start();
    try {
      expect(live.held).toEqual([1]);
      await until('C takes the lapsed share 0', 10_000, async () => (live.holds(0) ? true : null));
      expect(await live.ensure(0, 100)).toBe(true);
      expect(await board.holderOf('role-judge/s0')).toBe('C');
    } finally {
      await live.stop();
    }
  });
});
