/**
 * The conformance suite and the work-queue contract on a 3-node cluster with R3 streams, and a
 * server killed while a writer appends: every commit is kept exactly once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeEvent } from '../../src/events/catalog.js';
import { openJetStreamLog } from '../../src/events/jetstream-log.js';
import { restartNode, stopNode } from '../../src/events/nats-server.js';
import { startTestNats, uniqueLogNames, type TestNats } from '../support/nats.js';
import { describeEventLogConformance } from './conformance.js';
import { describeWorkQueueContract } from './work-queue-contract.js';

let nats: TestNats;
beforeAll(async () => {
  nats = await startTestNats(3);
}, 60_000);
afterAll(async () => {
  await nats?.stop();
});

const fixture = async () => {
  const names = uniqueLogNames();
  return {
    open: (opts?: { registry?: Parameters<typeof openJetStreamLog>[0]['registry'] }) =>
      openJetStreamLog({ servers: nats.urls, ...names, replicas: 3, ...opts }),
    dispose: async () => {},
  };
};

describeEventLogConformance('jetstream (3-node cluster, R3)', fixture);
describeWorkQueueContract('jetstream (3-node cluster, R3)', fixture);

describe('jetstream cluster: a server dies mid-run', () => {
  it('keeps every commit exactly once while one of three servers is killed and restarted', async () => {
    const names = uniqueLogNames();
    const log = await openJetStreamLog({ servers: nats.urls, ...names, replicas: 3, retryForMs: 60_000 });
    try {
      const total = 300;
      let killed = false;
      for (let i = 0; i < total; i++) {
        if (i === 100) {
          // The stream leader or not: either way the other two keep a quorum.
          await stopNode(nats.cluster.nodes[0]!, 'SIGKILL');
          killed = true;
        }
        if (i === 250) await restartNode(nats.cluster.dir, nats.cluster.nodes[0]!.name);
        await log.append(`w/${i % 3}`, [makeEvent('RoundStarted', 'r', { round: i, problemIds: [] })], { commitId: `c${i}` });
      }
      expect(killed).toBe(true);
      const rounds: number[] = [];
      for await (const e of log.read()) rounds.push((e.data as { round: number }).round);
      expect(rounds).toEqual(Array.from({ length: total }, (_, i) => i));
    } finally {
      await log.close();
    }
  }, 120_000);
});
