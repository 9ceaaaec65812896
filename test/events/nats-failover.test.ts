/**
 * A client whose server stops answering without closing the connection (frozen by SIGSTOP, as a
 * cut link looks from the client) gives it up after its unanswered pings and goes on through
 * another server of the cluster: an append made while its server is frozen is stored once.
 * Real 3-node cluster on loopback.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Status } from '@nats-io/transport-node';
import { makeEvent } from '../../src/events/catalog.js';
import { InvalidLogArgumentError } from '../../src/events/errors.js';
import { connectNats, openJetStreamLog } from '../../src/events/jetstream/jetstream-log.js';
import { startTestNats, uniqueLogNames, type TestNats } from '../support/nats.js';

let nats: TestNats;
beforeAll(async () => {
  nats = await startTestNats(3);
}, 60_000);
afterAll(async () => {
  for (const n of nats?.cluster.nodes ?? []) {
    try {
      process.kill(n.pid, 'SIGCONT');
    } catch {
      // already gone
    }
  }
  await nats?.stop();
});

describe('client failover', () => {
  it('refuses ping settings that make no sense, naming the setting', async () => {
    await expect(connectNats(nats.urls, { ping: { intervalMs: 10 } })).rejects.toThrow(InvalidLogArgumentError);
    await expect(connectNats(nats.urls, { ping: { intervalMs: 10 } })).rejects.toThrow(/ping\.intervalMs: 10: expected an integer of at least 100/);
    await expect(connectNats(nats.urls, { ping: { maxOut: 0 } })).rejects.toThrow(/ping\.maxOut: 0: expected a positive integer/);
  });

  it('with the default pings, leaves a frozen server for another and appends through it, once', async () => {
    const log = await openJetStreamLog({ servers: nats.urls, ...uniqueLogNames(), replicas: 3 });
    const seen: string[] = [];
    void (async () => {
      for await (const s of log.connection.status() as AsyncIterable<Status>) {
        if (s.type === 'staleConnection') seen.push('stale');
        if (s.type === 'reconnect') seen.push(`reconnect ${s.server}`);
      }
    })().catch(() => undefined);
    const runId = 'failover';
    const note = (reason: string) => makeEvent('RunFailed', runId, { reason });
    const frozen = nats.cluster.nodes.find((n) => log.connection.getServer().endsWith(`:${n.port}`))!;
    try {
      await log.append('conductor', [note('before')], { commitId: 'before' });
      process.kill(frozen.pid, 'SIGSTOP');
      // Made while the client still thinks its server is there: retried through another.
      const during = await log.append('conductor', [note('during')], { commitId: 'during' });
      expect(during.duplicate).toBe(false);
      expect(seen[0]).toBe('stale');
      const reconnected = seen.find((s) => s.startsWith('reconnect '))!;
      expect(reconnected).toBeDefined();
      expect(reconnected.endsWith(`:${frozen.port}`)).toBe(false);
      const ids: string[] = [];
      for await (const e of log.read({}, { runId })) ids.push(e.commitId);
      expect(ids).toEqual(['before', 'during']);
    } finally {
      process.kill(frozen.pid, 'SIGCONT');
      await log.close();
    }
  }, 60_000);
});
