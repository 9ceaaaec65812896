/**
 * A JetStream cluster failing over can show a reader messages it then drops (seen with
 * nats-server 2.9 under server kills and partitions: messages 83-86 read by every worker, then
 * gone, other commits written at those sequences). A reader that applied them cannot tell from
 * the next read. Here, on a real nats-server, a message read is deleted (the log holds none
 * there), or the stream is made again under the reader with another commit at the sequence it
 * read (as the cluster did): the log says what it holds at a position now (commitIdAt), the actor
 * runtime stops with LogRewrittenError instead of folding on, and read models rebuild from the
 * start and match the log again.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeEvent } from '../../src/events/catalog.js';
import { LogRewrittenError } from '../../src/events/errors.js';
import { openJetStreamLog, type JetStreamEventLog } from '../../src/events/jetstream/jetstream-log.js';
import { ActorRuntime } from '../../src/actors/runtime.js';
import { eventCounts, type EventCountRow } from '../../src/projections/event-counts.js';
import { ProjectionRunner } from '../../src/projections/runner.js';
import { startTestNats, uniqueLogNames, type TestNats } from '../support/nats.js';

let nats: TestNats;
let dir: string;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  nats = await startTestNats(1);
  dir = mkdtempSync(join(tmpdir(), 'crucible-rewrite-'));
}, 60_000);
afterAll(async () => {
  await nats?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const openLog = (names = uniqueLogNames()) => openJetStreamLog({ servers: nats.urls, ...names, retryForMs: 300 });

/** The log's stream deleted and made again by another handle, holding c1 and then `instead` (a
 * commit of another event type) where c2 was: what a reader that read c2 sees of a cluster that dropped it. */
async function rewrite(log: JetStreamEventLog, names: { stream: string; subjectPrefix: string }, instead: string): Promise<void> {
  await log.jsm.streams.delete(log.streamName);
  const again = await openLog(names);
  try {
    await commit(again, 'c1', 1);
    await again.append('conductor', [makeEvent('RunFailed', 'r', { reason: 'another commit at the same sequence' })], { commitId: instead });
  } finally {
    await again.close();
  }
}

async function commit(log: JetStreamEventLog, id: string, round: number): Promise<void> {
  await log.append('conductor', [makeEvent('RoundStarted', 'r', { round, problemIds: [] }), makeEvent('RoundCompleted', 'r', { round })], { commitId: id });
}

describe('a log that drops messages a reader has read', () => {
  it('says which commit it holds at a position now, and none where a message was dropped', async () => {
    const log = await openLog();
    try {
      await commit(log, 'c1', 1);
      await commit(log, 'c2', 2);
      const read = [];
      for await (const e of log.read()) read.push(e);
      expect(await log.commitIdAt(read[2]!.position)).toBe('c2');
      await log.jsm.streams.deleteMessage(log.streamName, 2);
      expect(await log.commitIdAt(read[2]!.position)).toBeNull();
      expect(await log.commitIdAt(read[0]!.position)).toBe('c1');
    } finally {
      await log.close();
    }
  });

  it('the actor runtime stops with LogRewrittenError, naming the position and both commits, instead of folding on', async () => {
    const names = uniqueLogNames();
    const log = await openLog(names);
    try {
      await commit(log, 'c1', 1);
      const runtime = new ActorRuntime(log, 'r', null as never, [] as never);
      await runtime.start();
      await commit(log, 'c2', 2);
      await runtime.foldNew();
      await rewrite(log, names, 'c3');
      // Checked at most once a second.
      await sleep(1100);
      const err = await runtime.foldNew().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(LogRewrittenError);
      expect((err as LogRewrittenError).read).toBe('c2');
      expect((err as LogRewrittenError).now).toBe('c3');
      expect((err as Error).message).toMatch(/the log changed under this reader at position \d+: it read commit "c2" there, and the log now holds commit "c3"/);
    } finally {
      await log.close();
    }
  });

  it('read models rebuild from the start when the log no longer holds the last event they applied, and match the log again', async () => {
    const names = uniqueLogNames();
    const log = await openLog(names);
    const runner = await ProjectionRunner.open({ log, readModel: join(dir, 'rm.db'), projections: [eventCounts] });
    const counts = async () => {
      const rows = await runner.readModel.query<{ event_counts: EventCountRow }>().selectFrom('event_counts').selectAll().execute();
      return Object.fromEntries(rows.map((x) => [x.type, x.events]));
    };
    try {
      await commit(log, 'c1', 1);
      await commit(log, 'c2', 2);
      await runner.catchUp();
      expect(await counts()).toEqual({ RoundStarted: 2, RoundCompleted: 2 });
      await rewrite(log, names, 'c3');
      await commit(log, 'c4', 4);
      await runner.catchUp();
      // c2 is not the log: counted from the log as it is, c1, c3 and c4 (without the check, c4
      // alone was read after c2's position, c2 still counted and c3 never).
      expect(await counts()).toEqual({ RoundStarted: 2, RoundCompleted: 2, RunFailed: 1 });
      expect(runner.rebuiltAfterRewrite).toBe(1);
      await commit(log, 'c5', 5);
      await runner.catchUp();
      expect(await counts()).toEqual({ RoundStarted: 3, RoundCompleted: 3, RunFailed: 1 });
      expect(runner.rebuiltAfterRewrite).toBe(1);
    } finally {
      await runner.close();
      await log.close();
    }
  });
});
