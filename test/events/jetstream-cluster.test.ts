/**
 * The conformance suite and the work-queue contract on a 3-node cluster with R3 streams, and a
 * server killed while a writer appends: every commit is kept exactly once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeEvent } from '../../src/events/catalog.js';
import { ConcurrencyError } from '../../src/events/errors.js';
import { openJetStreamLog } from '../../src/events/jetstream/jetstream-log.js';
import { JetStreamTaskQueue } from '../../src/events/jetstream/jetstream-tasks.js';
import { restartNode, stopNode } from '../../src/nats-ops/nats-server.js';
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

describe('jetstream cluster: optimistic concurrency', () => {
  it('two writers on different servers racing on one stream: exactly one wins, every time', async () => {
    // 2.9 clusters accept both when only the subject check guards them (nats-server issue 4320).
    const names = uniqueLogNames();
    const a = await openJetStreamLog({ servers: [nats.urls[0]!], ...names, replicas: 3 });
    const b = await openJetStreamLog({ servers: [nats.urls[2]!], ...names, replicas: 3 });
    try {
      const ev = (r: string) => makeEvent('RunFailed', 'r', { reason: r });
      let bothWon = 0;
      for (let i = 0; i < 100; i++) {
        const stream = `k/${i}`;
        await a.append(stream, [ev('seed')], { commitId: `seed-${i}` });
        // Another stream moves too, so a stream-wide expectation alone would not do.
        const other = a.append('elsewhere', [ev('noise')], { commitId: `noise-${i}` });
        const seen = await b.streamHead(stream);
        const results = await Promise.allSettled([
          a.append(stream, [ev('a')], { commitId: `a-${i}`, expectedPosition: seen }),
          b.append(stream, [ev('b')], { commitId: `b-${i}`, expectedPosition: seen }),
        ]);
        await other;
        const won = results.filter((r) => r.status === 'fulfilled').length;
        if (won === 2) bothWon++;
        expect(won).toBeGreaterThanOrEqual(1);
        for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(ConcurrencyError);
      }
      expect(bothWon).toBe(0);
    } finally {
      await a.close();
      await b.close();
    }
  }, 120_000);
});

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

describe('jetstream cluster: replicas', () => {
  it("a client that guessed a smaller cluster makes the streams beside the log with the log's replicas", async () => {
    const names = uniqueLogNames();
    const first = await openJetStreamLog({ servers: nats.urls, ...names, replicas: 3 });
    // As a client that connected while two servers were away would guess.
    const late = await openJetStreamLog({ servers: [nats.urls[1]!], ...names, replicas: 1 });
    try {
      expect(late.replicas).toBe(3);
      await JetStreamTaskQueue.open(late, { name: 'programs' });
      for (const stream of [`${late.streamName}_BLOBS`, `${late.streamName}_TASKS_programs`]) {
        expect((await late.jsm.streams.info(stream)).config.num_replicas).toBe(3);
      }
    } finally {
      await late.close();
      await first.close();
    }
  });
});

describe('jetstream cluster: a cluster too small for R3', () => {
  it('a log on two servers is made with one replica, and so is every stream beside it', async () => {
    const two = await startTestNats(2);
    const log = await openJetStreamLog({ servers: two.urls, ...uniqueLogNames() });
    try {
      expect(log.replicas).toBe(1);
      await log.append('s', [makeEvent('RunFailed', 'r', { reason: 'x' })], { commitId: 'c1' });
      await JetStreamTaskQueue.open(log, { name: 'programs' });
      for (const stream of [log.streamName, `${log.streamName}_BLOBS`, `${log.streamName}_TASKS_programs`]) {
        expect((await log.jsm.streams.info(stream)).config.num_replicas).toBe(1);
      }
    } finally {
      await log.close();
      await two.stop();
    }
  });

  it('a log on three servers is R3 however few of them the first INFO listed', async () => {
    // One server given: its INFO may list the others or not yet; the log is R3 either way.
    const log = await openJetStreamLog({ servers: [nats.urls[0]!], ...uniqueLogNames() });
    try {
      expect(log.replicas).toBe(3);
      expect((await log.jsm.streams.info(log.streamName)).config.num_replicas).toBe(3);
      // A cluster of a server whose replicas can part ways says so to whoever opens the log.
      expect(log.notices.length).toBe(log.features.replicasAgreeAfterFailover ? 0 : 1);
    } finally {
      await log.close();
    }
  });
});
