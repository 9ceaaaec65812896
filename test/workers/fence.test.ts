/**
 * Fencing of singleton roles on a real nats-server: a lease has one holder, a lapsed lease is
 * taken over, and a holder that was paused past its lease can neither renew nor append; an
 * append that expects a stream position another writer has moved is refused; renewals one
 * holder makes at once do not fence each other. The program
 * queue: a task published twice is stored once, and a claimed task not acked goes to another
 * claimer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openJetStreamLog, type JetStreamEventLog } from '../../src/events/jetstream/jetstream-log.js';
import { WorkerBoard } from '../../src/events/jetstream/jetstream-board.js';
import { JetStreamTaskQueue } from '../../src/events/jetstream/jetstream-tasks.js';
import { FencedWriter } from '../../src/workers/fence.js';
import type { CommitRequest } from '../../src/events/log.js';
import { startTestNats, uniqueLogNames, type TestNats } from '../support/nats.js';
import { until } from '../support/until.js';
import { z } from 'zod';
import { runTaskLoop, type TaskLoop, type TaskLoopContext } from '../../src/workers/task-loop.js';
import { CompletionView } from '../../src/workers/context.js';
import { Wake } from '../../src/workers/wake.js';
import { LogRewrittenError } from '../../src/events/errors.js';

let nats: TestNats;
let log: JetStreamEventLog;
let board: WorkerBoard;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  nats = await startTestNats(1);
  log = await openJetStreamLog({ servers: nats.urls, ...uniqueLogNames() });
  board = await WorkerBoard.open(log);
}, 60_000);
afterAll(async () => {
  await log?.close();
  await nats?.stop();
});

const commit = (id: string): CommitRequest => ({
  stream: 'judge',
  events: [{ type: 'WorkAbandoned', runId: 'r', data: { queue: 'q', commitId: id, deliveries: 1, reason: 'test' } }],
  options: { commitId: `r/judge/${id}` },
});

async function judgeCommits(): Promise<string[]> {
  const out: string[] = [];
  for await (const e of log.read({}, { streams: ['judge'] })) out.push(e.commitId);
  return out;
}

/** A task loop's context that folds nothing: its role, when it stops, where its lines go. */
function loopContext(role: TaskLoopContext['role'], stopped: () => boolean, say: (line: string) => void): { ctx: TaskLoopContext; wake: Wake } {
  const wake = new Wake();
  const ctx: TaskLoopContext = {
    role,
    wake,
    completion: new CompletionView(),
    concurrency: 1,
    figures: { state: 'live', running: 0, pending: 0, written: 0, duplicates: 0, fenced: 0 },
    fold: async () => {},
    stopped,
    say,
  };
  return { ctx, wake };
}

/** A loop over `{key, at}` tasks that records each key it is handed as already recorded. */
function keyedLoop(queue: JetStreamTaskQueue, handled: string[], afterFold: () => Promise<void>): TaskLoop<{ key: string; at: number }> {
  return {
    queue,
    body: z.strictObject({ key: z.string(), at: z.int() }),
    bodyShape: '{key, at}',
    ackWaitMs: 1000,
    step: async ({ key }) => {
      handled.push(key);
      return 'recorded';
    },
    afterFold,
    open: () => [],
  };
}

describe('leases and fenced writes', () => {
  it('one holder at a time; a paused holder loses the lease and can no longer write', async () => {
    const a = await board.acquire('role-judge', 'A', 800);
    expect(a).not.toBeNull();
    expect(await board.acquire('role-judge', 'B', 800)).toBeNull();
    expect(await board.holderOf('role-judge')).toBe('A');
    const writerA = new FencedWriter(log, async () => a!.heldFor(100) || (await a!.renew()));
    expect(await writerA.append(commit('1'))).toBe('written');

    // A stops renewing (a paused process); once the lease lapses B takes it and writes.
    await sleep(900);
    const b = await board.acquire('role-judge', 'B', 5000);
    expect(b).not.toBeNull();
    expect(await board.holderOf('role-judge')).toBe('B');
    const writerB = new FencedWriter(log, async () => b!.heldFor(100) || (await b!.renew()));
    expect(await writerB.append(commit('2'))).toBe('written');

    // A resumes: its renewal fails, so its write is fenced.
    expect(await writerA.append(commit('3'))).toBe('fenced');
    expect(await a!.renew()).toBe(false);
    expect(await judgeCommits()).toEqual(['r/judge/1', 'r/judge/2']);

    // Released, the lease is free at once.
    await b!.release();
    expect(await board.holderOf('role-judge')).toBeNull();
    const c = await board.acquire('role-judge', 'C', 5000);
    expect(c).not.toBeNull();
    await c!.release();
  });

  it('renewals made at once by one holder (its timer and its writer) all succeed: the holder keeps its lease', async () => {
    const lease = await board.acquire('role-learner', 'A', 5000);
    expect(lease).not.toBeNull();
    // Each renewal is a compare-and-set on the lease's last sequence: made together, they would
    // all expect the same one, and every one but the first would read as a lease lost to another.
    expect(await Promise.all([lease!.renew(), lease!.renew(), lease!.renew()])).toEqual([true, true, true]);
    expect(lease!.heldFor(1000)).toBe(true);
    expect(await board.holderOf('role-learner')).toBe('A');
    expect(await board.acquire('role-learner', 'B', 5000)).toBeNull();
    // A release made while a renewal is under way still frees the lease.
    await Promise.all([lease!.renew(), lease!.release()]);
    expect(lease!.heldFor(0)).toBe(false);
    expect(await board.holderOf('role-learner')).toBeNull();
    const b = await board.acquire('role-learner', 'B', 5000);
    expect(b).not.toBeNull();
    await b!.release();
  });

  it('an append expecting a stream position another writer moved is fenced, and writes nothing', async () => {
    const stale = new FencedWriter(log, async () => true);
    const other = new FencedWriter(log, async () => true);
    expect(await stale.append(commit('4'))).toBe('written');
    expect(await other.append(commit('5'))).toBe('written');
    expect(await stale.append(commit('6'))).toBe('fenced');
    // The same commit again is a duplicate, not a second copy.
    expect(await other.append(commit('5'))).toBe('duplicate');
    expect((await judgeCommits()).slice(-2)).toEqual(['r/judge/4', 'r/judge/5']);
  });
});

describe('the program queue', () => {
  it('stores a task published twice once; an unacked claim is delivered again to another claimer', async () => {
    // `status` reads depths without opening a queue: one never opened is empty (and not made).
    expect(await JetStreamTaskQueue.depthOf(log, 'programs')).toEqual({ waiting: 0, claimed: 0 });
    const q1 = await JetStreamTaskQueue.open(log, { name: 'programs', ackWaitMs: 1000 });
    const q2 = await JetStreamTaskQueue.open(log, { name: 'programs', ackWaitMs: 1000 });
    expect(await q1.publish('req/1/p', '{"n":1}')).toBe(true);
    expect(await q2.publish('req/1/p', '{"n":1}')).toBe(false);
    expect(await q1.publish('req/1/q', '{"n":2}')).toBe(true);
    expect(await q1.depth()).toEqual({ waiting: 2, claimed: 0 });
    expect(await JetStreamTaskQueue.depthOf(log, 'programs')).toEqual({ waiting: 2, claimed: 0 });
    expect(await JetStreamTaskQueue.depthOf(log, 'suites')).toEqual({ waiting: 0, claimed: 0 });
    const [t1] = await q1.claim(1, 1000);
    const [t2] = await q2.claim(1, 1000);
    expect([t1!.body, t2!.body].sort()).toEqual(['{"n":1}', '{"n":2}']);
    await t2!.ack();
    // t1's claimer dies: after the ack deadline the task goes to the other claimer.
    const again = await q2.claim(1, 3000);
    expect(again.map((t) => [t.body, t.delivery])).toEqual([[t1!.body, 2]]);
    await again[0]!.ack();
    expect(await q1.depth()).toEqual({ waiting: 0, claimed: 0 });
  });
});

describe('task queues kept apart', () => {
  it("each queue is a stream of its own holding its one subject: no consumer can be handed another queue's task", async () => {
    const programs = await JetStreamTaskQueue.open(log, { name: 'programs', ackWaitMs: 1000 });
    const solutions = await JetStreamTaskQueue.open(log, { name: 'solutions', ackWaitMs: 1000 });
    const subjectsOf = async (name: string) => {
      const found: string[][] = [];
      for await (const s of log.jsm.streams.list())
        if ((s.config.subjects ?? []).some((x) => x.startsWith(`${log.prefix}-tasks.`))) found.push(s.config.subjects ?? []);
      return found.filter((subjects) => subjects.some((x) => x === `${log.prefix}-tasks.${name}` || x.endsWith('>')));
    };
    expect(await subjectsOf('programs')).toEqual([[`${log.prefix}-tasks.programs`]]);
    expect(await subjectsOf('solutions')).toEqual([[`${log.prefix}-tasks.solutions`]]);
    await programs.publish('req/2/p', '{"requestId":"req/2","program":"p"}');
    expect(await solutions.claim(1, 1000)).toEqual([]);
    const [t] = await programs.claim(1, 1000);
    expect(t!.body).toBe('{"requestId":"req/2","program":"p"}');
    await t!.ack();
  });

  it('a queue that does not take tasks for a while is waited for, fold after fold, not died of', async () => {
    const queue = await JetStreamTaskQueue.open(log, { name: 'waited', ackWaitMs: 1000 });
    const said: string[] = [];
    const handled: string[] = [];
    let stop = false;
    let calls = 0;
    const { ctx, wake } = loopContext(
      'executor',
      () => stop,
      (line: string) => said.push(line),
    );
    // The first three publishes time out, as a queue's stream that cannot commit answers.
    const loop = runTaskLoop(
      ctx,
      keyedLoop(queue, handled, async () => {
        calls++;
        if (calls <= 3) throw Object.assign(new Error('TIMEOUT'), { name: 'TimeoutError' });
        if (calls === 4) await queue.publish('run/executor/w1', '{"key":"w1","at":1}');
      }),
    );
    try {
      await until('the task published late is handled', 30_000, async () => handled.length === 1);
    } finally {
      stop = true;
      await loop;
      await wake.close();
    }
    expect(handled).toEqual(['w1']);
    expect(said).toEqual([
      'queue waited did not take a task (TIMEOUT); trying again after each fold',
      'queue waited takes tasks again, after 3 unanswered attempt(s)',
    ]);
  });

  it('an error of afterFold that waiting does not mend stops the loop with it', async () => {
    const queue = await JetStreamTaskQueue.open(log, { name: 'broken', ackWaitMs: 1000 });
    const { ctx, wake } = loopContext(
      'executor',
      () => false,
      () => {},
    );
    const loop = runTaskLoop(
      ctx,
      keyedLoop(queue, [], async () => {
        throw new Error('permissions violation for publish');
      }),
    );
    await expect(loop).rejects.toThrow('permissions violation for publish');
    await wake.close();
  });

  it('a task whose append finds the log dropped what the loop read stops the loop to read the log again: the task stays queued, not counted failed', async () => {
    const queue = await JetStreamTaskQueue.open(log, { name: 'rewritten', ackWaitMs: 1000 });
    await queue.publish('run/executor/r1', '{"key":"r1","at":1}');
    const said: string[] = [];
    const { ctx, wake } = loopContext(
      'executor',
      () => false,
      (line: string) => said.push(line),
    );
    const loop = runTaskLoop(ctx, {
      ...keyedLoop(queue, [], async () => {}),
      step: async ({ key }) => ({
        label: `task ${key}`,
        run: async () => {
          throw new LogRewrittenError(5, 'r/judge/read', 'r/judge/other');
        },
      }),
    });
    await expect(loop).rejects.toBeInstanceOf(LogRewrittenError);
    await wake.close();
    expect(said.filter((l) => l.includes('failed'))).toEqual([]);
    // Not acked: still in the queue, for this process's replacement.
    const depth = await queue.depth();
    expect(depth.waiting + depth.claimed).toBe(1);
  });

  it('a task given back as behind for good (its request dropped from the log) does not keep open work from having its task published again', async () => {
    const queue = await JetStreamTaskQueue.open(log, { name: 'orphans', ackWaitMs: 1000 });
    // A task for work the log no longer holds: this process never folds its request.
    await queue.publish('run/executor/orphan', '{"key":"orphan","at":1}');
    const said: string[] = [];
    const handled: string[] = [];
    let stop = false;
    const { ctx, wake } = loopContext(
      'executor',
      () => stop,
      (line: string) => said.push(line),
    );
    const loop = runTaskLoop(ctx, {
      ...keyedLoop(queue, handled, async () => {}),
      step: async ({ key }) => {
        if (key === 'orphan') return 'behind';
        handled.push(key);
        return 'recorded';
      },
      // Work open in the log whose task the queue does not hold (published in its duplicate window).
      open: () => (handled.includes('w') ? [] : [{ id: 'run/executor/w', body: '{"key":"w","at":1}' }]),
    });
    try {
      await until('the open work handled', 30_000, async () => handled.includes('w'));
    } finally {
      stop = true;
      await loop;
      await wake.close();
    }
    expect(said).toContain('published 1 task(s) of queue orphans again: their work is open in the log, but the queue held no task');
  });

  it("a task whose body is not its queue's is left in the queue, said once, never acked away", async () => {
    const queue = await JetStreamTaskQueue.open(log, { name: 'suites', ackWaitMs: 1000 });
    // A program task's body on the suites queue, beside one of its own.
    await queue.publish('req/3/p', '{"requestId":"req/3","program":"p"}');
    await queue.publish('run/adversary/s1', '{"key":"s1","at":1}');
    const said: string[] = [];
    const handled: string[] = [];
    let stop = false;
    const { ctx, wake } = loopContext(
      'adversary',
      () => stop,
      (line: string) => said.push(line),
    );
    const loop = runTaskLoop(
      ctx,
      keyedLoop(queue, handled, async () => {}),
    );
    try {
      await until(
        'both tasks handled',
        30_000,
        async () => handled.length === 1 && said.length >= 1 && (await queue.depth()).waiting + (await queue.depth()).claimed === 1,
      );
    } finally {
      stop = true;
      await loop;
      await wake.close();
    }
    expect(handled).toEqual(['s1']);
    expect(said).toEqual(['left task req/3/p in queue suites: its body is not {key, at}; not acked, so it stays for whoever it is for']);
    // Still there: the next claimer gets it.
    const again = await queue.claim(1, 5000);
    expect(again.map((t) => t.id)).toEqual(['req/3/p']);
    expect(again[0]!.delivery).toBeGreaterThan(1);
    again[0]!.nak();
  });
});
