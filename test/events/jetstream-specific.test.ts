/** What only the JetStream backend has: a finite dedup window, server-side checks, clear errors. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { makeEvent } from '../../src/events/catalog.js';
import {
  CommitTooLargeError,
  IncompatibleStreamError,
  LogBehindError,
  LogNotFoundError,
  LogUnavailableError,
  MissingLogMessageError,
} from '../../src/events/errors.js';
import { featuresOf, openJetStreamLog, serverNotices, type JetStreamEventLog } from '../../src/events/jetstream/jetstream-log.js';
import { freePort } from '../../src/nats-ops/nats-server.js';
import type { Position, ReadRange } from '../../src/events/log.js';
import { startTestNats, uniqueLogNames, type TestNats } from '../support/nats.js';

let nats: TestNats;
beforeAll(async () => {
  nats = await startTestNats(1);
}, 30_000);
afterAll(async () => {
  await nats?.stop();
});

const ev = (reason: string) => makeEvent('RunFailed', 'r', { reason });

type Consumed = Awaited<ReturnType<JetStreamEventLog['orderedMessages']>>;
type Delivered = IteratorResult<Consumed extends AsyncIterable<infer M> ? M : never>;

/** Makes the first ordered consumer the log starts (after each reset of the count) deliver
 * through `next` (what a consumer on a server in trouble does, which a test cannot time);
 * returns the number of consumers started since the last reset. */
function firstConsumerDelivers(
  log: JetStreamEventLog,
  next: (inner: () => Promise<Delivered>, messages: Consumed) => Promise<Delivered>,
): { started(): number; reset(): void } {
  const ordered = log.orderedMessages.bind(log);
  let consumers = 0;
  log.orderedMessages = async (...args: Parameters<typeof ordered>) => {
    const messages = await ordered(...args);
    if (consumers++ > 0) return messages;
    const iterate = messages[Symbol.asyncIterator].bind(messages);
    messages[Symbol.asyncIterator] = () => {
      const it = iterate();
      return { ...it, next: () => next(() => it.next(), messages) };
    };
    return messages;
  };
  return { started: () => consumers, reset: () => (consumers = 0) };
}

describe('jetstream log', () => {
  it('reports the server version and gates features 2.9 lacks', async () => {
    const log = await openJetStreamLog({ servers: nats.urls, ...uniqueLogNames() });
    try {
      expect(log.features.version).toBe(nats.cluster.version);
      expect(featuresOf('2.9.10')).toEqual({
        version: '2.9.10',
        atomicBatch: false,
        multiFilterConsumers: false,
        messageTtl: false,
        serializedSubjectChecks: false,
        replicasAgreeAfterFailover: false,
      });
      expect(featuresOf('2.12.1')).toMatchObject({ atomicBatch: true, multiFilterConsumers: true, messageTtl: true, serializedSubjectChecks: true });
      // The replicas' fix came in a patch release of 2.9, and with 2.10.
      expect(['2.9.20', '2.9.21', '2.10.0', '2.10.27', '3.0.0-beta'].map((v) => featuresOf(v).replicasAgreeAfterFailover)).toEqual([
        false,
        true,
        true,
        true,
        true,
      ]);
      expect(log.capabilities).toMatchObject({ dedupWindowMs: 120_000, multiProcess: true, sharedWorkQueues: true });
      // One server: nothing for the operator whatever its version.
      expect(log.notices).toEqual([]);
      expect(serverNotices(featuresOf('2.9.10'), 1)).toEqual([]);
      expect(serverNotices(featuresOf('2.10.27'), 3)).toEqual([]);
      expect(serverNotices(featuresOf('2.9.10'), 3)).toEqual([
        expect.stringMatching(/^nats-server 2\.9\.10 on a cluster: .*different histories.*2\.10 or newer/),
      ]);
    } finally {
      await log.close();
    }
  });

  it('never skips a message missing from its stream: a read across it fails naming it, by direct gets and by a consumer alike', async () => {
    // Before, a read skipped it: a worker folded past an event it never saw and waited forever.
    const log = await openJetStreamLog({ servers: nats.urls, ...uniqueLogNames(), retryForMs: 300, directReadMessages: 4 });
    try {
      const at: Position[] = [];
      for (let i = 0; i < 10; i++) at.push((await log.append('s', [ev(`e${i}`)], { commitId: `c${i}` })).positions[0]!);
      await log.jsm.streams.deleteMessage(log.streamName, 3);
      const read = async (range: ReadRange) => {
        const out: string[] = [];
        for await (const e of log.read(range)) out.push((e.data as { reason: string }).reason);
        return out;
      };
      // From sequence 2 to the end (9 messages): an ordered consumer; from 2 to 4: direct gets.
      for (const range of [{ after: at[0] }, { after: at[0], to: at[3] }]) {
        const err = await read(range).then(
          () => null,
          (e: unknown) => e,
        );
        expect(err, JSON.stringify(range)).toBeInstanceOf(MissingLogMessageError);
        expect((err as MissingLogMessageError).seq).toBe(3);
        expect((err as Error).message).toMatch(/^message 3 of the log's stream "\w+" is missing, though the stream holds messages up to (10|4): deleted/);
      }
      // Around it, reads are whole.
      expect(await read({ after: at[3] })).toEqual(['e4', 'e5', 'e6', 'e7', 'e8', 'e9']);
    } finally {
      await log.close();
    }
  });

  it('a read up to a position never ends short of it: a server behind that answers first is asked again', async () => {
    // After a healed partition the stream's old leader can answer a stream-info request first,
    // with the stream as it was. A read up to the head a reader was told then ended there, and
    // the reader's checkpoint moved past events it never applied (a run's table lost rounds).
    // That moment cannot be timed from a test: the first answers are made stale here.
    const log = await openJetStreamLog({ servers: nats.urls, ...uniqueLogNames(), retryForMs: 2000, directReadMessages: 4 });
    try {
      const at: Position[] = [];
      for (let i = 0; i < 10; i++) at.push((await log.append('s', [ev(`e${i}`)], { commitId: `c${i}` })).positions[0]!);
      const info = log.jsm.streams.info.bind(log.jsm.streams);
      let stale = 0;
      let behind = 2;
      log.jsm.streams.info = async (...args: Parameters<typeof info>) => {
        const answer = await info(...args);
        if (behind-- <= 0) return answer;
        stale++;
        return { ...answer, state: { ...answer.state, last_seq: 2 } };
      };
      const read = async (range: ReadRange) => {
        const out: string[] = [];
        for await (const e of log.read(range)) out.push((e.data as { reason: string }).reason);
        return out;
      };
      // By a consumer (9 messages after the first) and by direct gets (2 to 5).
      expect(await read({ after: at[0], to: at[9] })).toEqual(['e1', 'e2', 'e3', 'e4', 'e5', 'e6', 'e7', 'e8', 'e9']);
      expect(stale).toBe(2);
      behind = 2;
      expect(await read({ after: at[1], to: at[5] })).toEqual(['e2', 'e3', 'e4', 'e5']);
      expect(stale).toBe(4);
      // Behind for longer than the log retries: an error naming both ends, not a short read.
      behind = Number.POSITIVE_INFINITY;
      const err = await read({ to: at[9] }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(LogBehindError);
      expect((err as Error).message).toMatch(
        /^the server that answered holds the log's stream "\w+" up to message 2, short of message 10 the read was asked to reach/,
      );
    } finally {
      await log.close();
    }
  });

  it('a consumer that nats.js ends on its own before the last message: a read takes the rest by direct gets, a subscription goes on with a new one', async () => {
    // nats.js ends a consumer's messages without an error when its connection drains or closes;
    // a read then ended short and a subscription ended. Here the first consumer ends after its
    // first message, as nats.js ends one.
    const log = await openJetStreamLog({ servers: nats.urls, ...uniqueLogNames(), directReadMessages: 4 });
    let delivered = 0;
    const consumers = firstConsumerDelivers(log, async (inner, messages) => {
      if (delivered++ < 1) return inner();
      messages.stop();
      return { done: true as const, value: undefined };
    });
    try {
      for (let i = 0; i < 10; i++) await log.append('s', [ev(`e${i}`)], { commitId: `c${i}` });
      const read: string[] = [];
      for await (const e of log.read()) read.push((e.data as { reason: string }).reason);
      expect(read).toEqual(['e0', 'e1', 'e2', 'e3', 'e4', 'e5', 'e6', 'e7', 'e8', 'e9']);
      expect(consumers.started()).toBe(1);

      consumers.reset();
      const sub = log.subscribe();
      const seen: string[] = [];
      try {
        for await (const item of sub) {
          if (item.kind === 'event') seen.push((item.event.data as { reason: string }).reason);
          if (seen.length === 10) break;
        }
      } finally {
        await sub.close();
      }
      expect(seen).toEqual(['e0', 'e1', 'e2', 'e3', 'e4', 'e5', 'e6', 'e7', 'e8', 'e9']);
      expect(consumers.started()).toBe(2);
    } finally {
      await log.close();
    }
  });

  it('a consumer that skips a message (on a replica behind): a read and a subscription take it from the leader, in order', async () => {
    // Seen in chaos runs: a consumer on a server catching up after its restart delivered 125
    // where 124 was next; the read threw and its worker died, and a subscription went on past
    // it. Here the first consumer of each leaves out message 3.
    const log = await openJetStreamLog({ servers: nats.urls, ...uniqueLogNames(), directReadMessages: 4 });
    const consumers = firstConsumerDelivers(log, async (inner) => {
      const r = await inner();
      return !r.done && r.value.seq === 3 ? inner() : r;
    });
    const reasons = (es: readonly { data: unknown }[]) => es.map((e) => (e.data as { reason: string }).reason);
    try {
      for (let i = 0; i < 10; i++) await log.append('s', [ev(`e${i}`)], { commitId: `c${i}` });
      const all = ['e0', 'e1', 'e2', 'e3', 'e4', 'e5', 'e6', 'e7', 'e8', 'e9'];
      const read = [];
      for await (const e of log.read()) read.push(e);
      expect(reasons(read)).toEqual(all);

      consumers.reset();
      const sub = log.subscribe();
      const seen = [];
      try {
        for await (const item of sub) {
          if (item.kind === 'event') seen.push(item.event);
          if (seen.length === 10) break;
        }
      } finally {
        await sub.close();
      }
      expect(reasons(seen)).toEqual(all);
      expect(seen.map((e) => e.position)).toEqual([...seen.map((e) => e.position)].sort((a, b) => a - b));
      expect(log.gapsFilled).toBe(1);
    } finally {
      await log.close();
    }
  });

  it('a subscription whose consumer is lost on the server goes on with a new one: nothing missed, nothing twice', async () => {
    // nats.js alone recreates it only after two missed heartbeats (about 30 s at its defaults);
    // a run's supervisor once waited past its timeout this way (stall-watch.ts).
    const log = await openJetStreamLog({ servers: nats.urls, ...uniqueLogNames(), stallMs: 300 });
    const sub = log.subscribe();
    try {
      const seen: string[] = [];
      const iter = sub[Symbol.asyncIterator]();
      const until = async (n: number, ms: number) => {
        const deadline = Date.now() + ms;
        while (seen.length < n) {
          const left = deadline - Date.now();
          if (left <= 0) return false;
          const item = await Promise.race([iter.next(), new Promise<null>((r) => setTimeout(() => r(null), left))]);
          if (item === null) return false;
          if (!item.done && item.value.kind === 'event') seen.push((item.value.event.data as { reason: string }).reason);
        }
        return true;
      };
      for (let i = 0; i < 3; i++) await log.append('s', [ev(`e${i}`)], { commitId: `c${i}` });
      expect(await until(3, 10_000)).toBe(true);
      for (const c of await log.jsm.consumers.list(log.streamName).next()) await log.jsm.consumers.delete(log.streamName, c.name);
      for (let i = 3; i < 6; i++) await log.append('s', [ev(`e${i}`)], { commitId: `c${i}` });
      expect(await until(6, 10_000)).toBe(true);
      expect(seen).toEqual(['e0', 'e1', 'e2', 'e3', 'e4', 'e5']);
      expect(log.stalls).toBeGreaterThanOrEqual(1);
    } finally {
      await sub.close();
      await log.close();
    }
  });

  it('forgets a commit id after its configured dedup window: within it a retry is a duplicate', async () => {
    const log = await openJetStreamLog({ servers: nats.urls, ...uniqueLogNames(), dedupWindowMs: 1000 });
    try {
      expect(log.capabilities.dedupWindowMs).toBe(1000);
      const a = await log.append('s', [ev('x')], { commitId: 'c' });
      expect(await log.append('s', [ev('x')], { commitId: 'c' })).toEqual({ positions: a.positions, duplicate: true });
      await new Promise((r) => setTimeout(r, 1500));
      const b = await log.append('s', [ev('x')], { commitId: 'c' });
      expect(b.duplicate).toBe(false);
      expect(b.positions).not.toEqual(a.positions);
    } finally {
      await log.close();
    }
  });

  it('an existing stream keeps its own window, and says so', async () => {
    const names = uniqueLogNames();
    const first = await openJetStreamLog({ servers: nats.urls, ...names, dedupWindowMs: 5000 });
    await first.close();
    const second = await openJetStreamLog({ servers: nats.urls, ...names, dedupWindowMs: 60_000 });
    expect(second.capabilities.dedupWindowMs).toBe(5000);
    await second.close();
  });

  it('refuses an oversized commit before publishing, under the server max payload', async () => {
    const log = await openJetStreamLog({ servers: nats.urls, ...uniqueLogNames() });
    try {
      expect(log.capabilities.maxCommitBytes).toBeLessThan(1024 * 1024);
      const err = await log.append('s', [ev('z'.repeat(2 * 1024 * 1024))], { commitId: 'big' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CommitTooLargeError);
      expect(String(err)).toMatch(/commit "big" on stream "s" is \d+ bytes, over the log's limit/);
      expect(await log.head()).toBe(0);
    } finally {
      await log.close();
    }
  });

  it('says clearly that no server answers at the address', async () => {
    const port = await freePort();
    const err = await openJetStreamLog({ servers: `nats://127.0.0.1:${port}` }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LogUnavailableError);
    expect(String(err)).toMatch(new RegExp(`cannot reach the event log at nats://127.0.0.1:${port}.*nats up`));
  });

  it('refuses a stream made by another application or a newer crucible, leaving it untouched', async () => {
    const nc = await connect({ servers: nats.urls });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: 'OTHER_APP', subjects: ['other.>'], description: 'orders of a shop' });
    await jsm.streams.add({ name: 'NEWER', subjects: ['newer.>'], description: 'crucible event log, format 9' });
    try {
      const other = await openJetStreamLog({ servers: nats.urls, stream: 'OTHER_APP', subjectPrefix: 'other' }).catch((e: unknown) => e);
      expect(other).toBeInstanceOf(IncompatibleStreamError);
      expect(String(other)).toMatch(/"OTHER_APP".*description is "orders of a shop"/);
      const newer = await openJetStreamLog({ servers: nats.urls, stream: 'NEWER', subjectPrefix: 'newer' }).catch((e: unknown) => e);
      expect(newer).toBeInstanceOf(IncompatibleStreamError);
      expect(String(newer)).toMatch(/log format 9, newer than this crucible reads \(1\); upgrade crucible/);
      expect((await jsm.streams.info('OTHER_APP')).config.description).toBe('orders of a shop');
      const missing = await openJetStreamLog({ servers: nats.urls, ...uniqueLogNames(), create: false }).catch((e: unknown) => e);
      expect(missing).toBeInstanceOf(LogNotFoundError);
    } finally {
      await nc.close();
    }
  });

  it('creates its streams idempotently when many open the same log at once', async () => {
    const names = uniqueLogNames();
    const logs = await Promise.all([1, 2, 3, 4].map(() => openJetStreamLog({ servers: nats.urls, ...names })));
    await logs[0]!.append('s', [ev('a')], { commitId: 'one' });
    for (const l of logs) expect((await l.streamHead('s')) > 0).toBe(true);
    for (const l of logs) await l.close();
  });

  it('stores blobs larger than one message in chunks, before any event names them', async () => {
    const log = await openJetStreamLog({ servers: nats.urls, ...uniqueLogNames() });
    try {
      const big = new Uint8Array(700_000).map((_, i) => (i * 31) % 251);
      const h = await log.blobs.put(big);
      const back = await log.blobs.get(h);
      expect(Buffer.compare(Buffer.from(back), Buffer.from(big))).toBe(0);
      const listed: string[] = [];
      for await (const x of log.blobs.list()) listed.push(x);
      expect(listed).toEqual([h]);
    } finally {
      await log.close();
    }
  });
});
