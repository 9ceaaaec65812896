/**
 * The loop of an executor process. Every executor folds the log; for each ExecutionRequested it
 * publishes one task per program of the request (the task id names request and program, so the
 * copies other executors publish are dropped as duplicates). `concurrency` slots claim tasks
 * from the shared queue, run that program's pairs, append its ProgramExecuted as a commit of
 * its own and ack: two executor processes split one request's programs. A process that dies
 * holding a task leaves it unacked; it is delivered again to another. A program whose result is
 * already in the log is acked without running (a task delivered again after its append).
 */
import { z } from 'zod';
import type { EventEnvelope } from '../events/envelope.js';
import type { RuntimeView } from '../actors/runtime.js';
import { requestPairs, requestSize, type EventData } from '../events/catalog.js';
import { executePrograms, type ExecutionCache } from '../actors/executor.js';
import { JetStreamTaskQueue, type Task } from '../events/jetstream-tasks.js';
import type { JetStreamEventLog } from '../events/jetstream-log.js';
import type { LoopContext } from './context.js';
import { PROGRAM_QUEUE } from './names.js';
import { WorkerError } from './errors.js';

type Request = EventData<'ExecutionRequested'>;

const TaskBody = z.strictObject({ requestId: z.string().min(1), programHash: z.string().regex(/^[0-9a-f]{64}$/) });

/** Deliveries of one task that fail before the worker gives up (and exits with the error). */
const MAX_TASK_FAILURES = 5;

/** Open requests and the programs each still waits for, folded from the log. */
export class ProgramWork implements RuntimeView {
  readonly types = ['ExecutionRequested', 'ProgramExecuted', 'ExecutionCompleted'] as const;
  readonly #open = new Map<string, { request: Request; left: Set<string> }>();
  readonly #seen = new Set<string>();
  #fresh: string[] = [];

  observe(envelope: EventEnvelope): void {
    if (envelope.type === 'ExecutionRequested') {
      const d = envelope.data as Request;
      this.#seen.add(d.requestId);
      if (requestSize(d) === 0) return;
      this.#open.set(d.requestId, { request: d, left: new Set(requestPairs(d).map((p) => p.programHash)) });
      this.#fresh.push(d.requestId);
      return;
    }
    const d = envelope.data as { requestId: string; programHash?: string };
    const open = this.#open.get(d.requestId);
    if (!open) return;
    // An older log's per-pair ExecutionCompleted: the request's results are one commit.
    if (envelope.type === 'ExecutionCompleted' || d.programHash === undefined) open.left.clear();
    else open.left.delete(d.programHash);
    if (open.left.size === 0) this.#open.delete(d.requestId);
  }

  /** Requests seen since the last call, with the programs they still wait for. */
  takeFresh(): { requestId: string; programs: string[] }[] {
    const out = this.#fresh.flatMap((id) => {
      const open = this.#open.get(id);
      return open ? [{ requestId: id, programs: [...open.left] }] : [];
    });
    this.#fresh = [];
    return out;
  }

  seen(requestId: string): boolean {
    return this.#seen.has(requestId);
  }

  /** The request when the program's result is still to come; null when it is recorded. */
  waiting(requestId: string, programHash: string): Request | null {
    const open = this.#open.get(requestId);
    return open && open.left.has(programHash) ? open.request : null;
  }

  get openPrograms(): number {
    let n = 0;
    for (const o of this.#open.values()) n += o.left.size;
    return n;
  }
}

export async function runExecutor(ctx: LoopContext, work: ProgramWork, opts: { ackWaitMs: number }): Promise<void> {
  const { runtime, wake, figures, runId } = ctx;
  const queue = await JetStreamTaskQueue.open(ctx.log as JetStreamEventLog, { name: PROGRAM_QUEUE, ackWaitMs: opts.ackWaitMs });
  const cache = () => runtime.indexOf('executor') as ExecutionCache;
  let failure: unknown = null;
  const failures = new Map<string, number>();
  figures.state = 'live';

  const publishFresh = async () => {
    for (const { requestId, programs } of work.takeFresh()) {
      for (const programHash of programs) await queue.publish(`${runId}/${requestId}/${programHash}`, JSON.stringify({ requestId, programHash }));
    }
  };

  const handle = async (task: Task) => {
    const parsed = TaskBody.safeParse((() => {
      try {
        return JSON.parse(task.body);
      } catch {
        return null;
      }
    })());
    if (!parsed.success) {
      // Not a task this code wrote: dropping it loses nothing (tasks are derived from the log).
      ctx.say(`dropped task ${task.id}: its body is not {requestId, programHash}`);
      await task.ack();
      return;
    }
    const { requestId, programHash } = parsed.data;
    if (!work.seen(requestId)) await ctx.fold();
    if (!work.seen(requestId)) {
      // Published by a process further ahead in the log than this one's last read.
      task.nak(200);
      return;
    }
    const request = work.waiting(requestId, programHash);
    if (!request) {
      await task.ack();
      return;
    }
    figures.running++;
    const ticker = setInterval(() => task.working(), Math.max(100, Math.floor(opts.ackWaitMs / 3)));
    try {
      const events = await executePrograms(request, ctx.env, cache(), new Set([programHash]));
      const r = await ctx.log.append('executor', events, { commitId: runtime.commitIdOf('executor', `${requestId}/${programHash}`) });
      if (r.duplicate) figures.duplicates++;
      else figures.written++;
      await task.ack();
    } catch (err) {
      const n = (failures.get(task.id) ?? 0) + 1;
      failures.set(task.id, n);
      ctx.say(`program ${programHash.slice(0, 12)} of ${requestId} failed (${n}/${MAX_TASK_FAILURES}): ${(err as Error).message}`);
      if (n >= MAX_TASK_FAILURES) failure ??= new WorkerError(`executor: program ${programHash} of ${requestId} failed ${n} times: ${(err as Error).message}`);
      task.nak(500 * n);
    } finally {
      clearInterval(ticker);
      figures.running--;
      wake.signal();
    }
  };

  const done = () => ctx.completion.completed || ctx.stopped() || failure !== null;
  const slots = Array.from({ length: ctx.concurrency }, async () => {
    while (!done()) {
      let tasks: Task[];
      try {
        tasks = await queue.claim(1, 1000);
      } catch (err) {
        if (done()) return;
        throw err;
      }
      for (const t of tasks) await handle(t);
    }
  });
  const folding = (async () => {
    while (!done()) {
      await ctx.fold();
      figures.pending = work.openPrograms;
      await publishFresh();
      await wake.wait(1000);
    }
  })();
  try {
    await Promise.all([folding, ...slots]);
  } finally {
    figures.state = 'stopping';
  }
  if (failure) throw failure;
}
