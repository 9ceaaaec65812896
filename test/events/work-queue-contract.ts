/**
 * The work-queue contract, written once and run against every backend (as the EventLog
 * conformance suite is): claim, ack, nak with backoff, redelivery after the ack deadline, and the
 * delivery limit that ends in a recorded WorkAbandoned event.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeEvent } from '../../src/events/catalog.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import type { EventLog } from '../../src/events/log.js';
import type { WorkItem, WorkQueue } from '../../src/events/work-queue.js';
import type { LogFixture } from './conformance.js';

const RUN = 'run-wq';
const job = (n: number) => makeEvent('RoundStarted', RUN, { round: n, problemIds: [`p${n}`] });
const noise = (r: string) => makeEvent('RunFailed', RUN, { reason: r });
const rounds = (items: readonly WorkItem[]) => items.map((i) => i.events.map((e) => (e.data as { round: number }).round));

async function collect(it: AsyncIterable<EventEnvelope>): Promise<EventEnvelope[]> {
  const out: EventEnvelope[] = [];
  for await (const e of it) out.push(e);
  return out;
}

export function describeWorkQueueContract(name: string, factory: () => Promise<LogFixture>): void {
  describe(`work queue contract: ${name}`, () => {
    let fixture: LogFixture;
    let log: EventLog;
    const queues: WorkQueue[] = [];
    const queue = async (opts: Parameters<EventLog['workQueue']>[0]) => {
      const q = await log.workQueue({ filter: { types: ['RoundStarted'] }, ...opts });
      queues.push(q);
      return q;
    };

    beforeEach(async () => {
      fixture = await factory();
      log = await fixture.open();
    });
    afterEach(async () => {
      for (const q of queues.splice(0)) await q.close();
      await log.close();
      await fixture.dispose();
    });

    it('delivers one item per matching commit, in log order; an acked item never comes back', async () => {
      await log.append('conductor', [job(0), noise('skip me'), job(1)], { commitId: 'j01' });
      await log.append('conductor', [noise('not work')], { commitId: 'n1' });
      await log.append('conductor', [job(2)], { commitId: 'j2' });
      const q = await queue({ name: 'order', ackWaitMs: 5000 });
      const got = await q.claim({ max: 10, waitMs: 2000 });
      expect(got.map((i) => i.commitId)).toEqual(['j01', 'j2']);
      expect(rounds(got)).toEqual([[0, 1], [2]]);
      expect(got.every((i) => i.delivery === 1)).toBe(true);
      for (const i of got) await i.ack();
      // Work appended later is delivered too.
      await log.append('conductor', [job(3)], { commitId: 'j3' });
      const later = await q.claim({ max: 10, waitMs: 2000 });
      expect(later.map((i) => i.commitId)).toEqual(['j3']);
      await later[0]!.ack();
      expect(await q.claim({ max: 10, waitMs: 300 })).toEqual([]);
    });

    it('a claimed item is not handed to another claimer while its claim holds', async () => {
      for (let n = 0; n < 6; n++) await log.append('conductor', [job(n)], { commitId: `j${n}` });
      const q = await queue({ name: 'share', ackWaitMs: 10_000 });
      const batches = await Promise.all([q.claim({ max: 2, waitMs: 2000 }), q.claim({ max: 2, waitMs: 2000 }), q.claim({ max: 2, waitMs: 2000 })]);
      const ids = batches.flat().map((i) => i.commitId);
      expect(ids.sort()).toEqual(['j0', 'j1', 'j2', 'j3', 'j4', 'j5']);
      for (const i of batches.flat()) await i.ack();
    });

    it('a nakked item comes back after its backoff, counted as the next delivery', async () => {
      await log.append('conductor', [job(0)], { commitId: 'j0' });
      const q = await queue({ name: 'nak', ackWaitMs: 10_000, backoffMs: [200] });
      const [first] = await q.claim({ waitMs: 2000 });
      expect(first!.delivery).toBe(1);
      await first!.nak();
      const again = await q.claim({ waitMs: 3000 });
      expect(again.map((i) => [i.commitId, i.delivery])).toEqual([['j0', 2]]);
      await again[0]!.ack();
    });

    it('an item not acked before its deadline is delivered again', async () => {
      await log.append('conductor', [job(0)], { commitId: 'j0' });
      const q = await queue({ name: 'deadline', ackWaitMs: 400 });
      const [first] = await q.claim({ waitMs: 2000 });
      expect(first!.delivery).toBe(1);
      // Not acked: the claim lapses.
      const again = await q.claim({ waitMs: 4000 });
      expect(again.map((i) => [i.commitId, i.delivery])).toEqual([['j0', 2]]);
      await again[0]!.ack();
    });

    it('after its last delivery an item is dropped and WorkAbandoned is recorded once', async () => {
      await log.append('conductor', [job(0)], { commitId: 'doomed' });
      await log.append('conductor', [job(1)], { commitId: 'fine' });
      const q = await queue({ name: 'limit', ackWaitMs: 10_000, maxDeliveries: 2, backoffMs: [50] });
      const deliveries: number[] = [];
      // Both items, then the doomed one again (a claim returns once it has `max` items; a larger
      // max waits out waitMs); the third claim waits while its third delivery is refused and recorded.
      for (const max of [2, 1, 5]) {
        const got = await q.claim({ max, waitMs: 1500 });
        for (const i of got) {
          if (i.commitId === 'fine') await i.ack();
          else {
            deliveries.push(i.delivery);
            await i.nak();
          }
        }
      }
      expect(deliveries).toEqual([1, 2]);
      const abandoned = await collect(log.read({}, { types: ['WorkAbandoned'] }));
      expect(abandoned.map((e) => e.data)).toEqual([{ queue: 'limit', commitId: 'doomed', deliveries: 2, reason: 'not acked after 2 deliveries' }]);
      expect(abandoned[0]!.stream).toBe('queue/limit');
      expect(await q.claim({ max: 5, waitMs: 300 })).toEqual([]);
    });

    it('refuses a bad queue name with a named argument', async () => {
      await expect(log.workQueue({ name: 'has space' })).rejects.toThrow(/options\.name/);
    });
  });
}
