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
import { JetStreamTaskQueue } from '../events/jetstream/jetstream-tasks.js';
import type { JetStreamEventLog } from '../events/jetstream/jetstream-log.js';
import type { LoopContext } from './context.js';
import { PROGRAM_QUEUE } from './names.js';
import { runTaskLoop, type TaskStep } from './task-loop.js';

type Request = EventData<'ExecutionRequested'>;

const TaskBody = z.strictObject({ requestId: z.string().min(1), programHash: z.string().regex(/^[0-9a-f]{64}$/) });

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

  /** Every program still waited for, by request. */
  *openPairs(): IterableIterator<{ requestId: string; programHash: string }> {
    for (const [requestId, o] of this.#open) for (const programHash of o.left) yield { requestId, programHash };
  }

  get openPrograms(): number {
    let n = 0;
    for (const o of this.#open.values()) n += o.left.size;
    return n;
  }
}

export async function runExecutor(ctx: LoopContext, work: ProgramWork, opts: { ackWaitMs: number }): Promise<void> {
  const { runtime, figures, runId } = ctx;
  const queue = await JetStreamTaskQueue.open(ctx.log as JetStreamEventLog, { name: PROGRAM_QUEUE, ackWaitMs: opts.ackWaitMs });
  const cache = () => runtime.indexOf('executor') as ExecutionCache;

  const task = (requestId: string, programHash: string) => ({ id: `${runId}/${requestId}/${programHash}`, body: JSON.stringify({ requestId, programHash }) });
  /** Tasks found and not yet taken by the queue: a publish that fails leaves them for the next
   * call (see runTaskLoop), in order. */
  let unpublished: { id: string; body: string }[] = [];
  const publishFresh = async () => {
    figures.pending = work.openPrograms;
    for (const { requestId, programs } of work.takeFresh()) for (const programHash of programs) unpublished.push(task(requestId, programHash));
    let i = 0;
    try {
      for (; i < unpublished.length; i++) await queue.publish(unpublished[i]!.id, unpublished[i]!.body);
    } finally {
      unpublished = unpublished.slice(i);
    }
  };
  const open = () => Array.from(work.openPairs(), ({ requestId, programHash }) => task(requestId, programHash));

  const step = async ({ requestId, programHash }: z.infer<typeof TaskBody>): Promise<TaskStep> => {
    if (!work.seen(requestId)) await ctx.fold();
    if (!work.seen(requestId)) return 'behind';
    const request = work.waiting(requestId, programHash);
    if (!request) return 'recorded';
    return {
      label: `program ${programHash.slice(0, 12)} of ${requestId}`,
      run: async () => {
        const commit = await runtime.runWorkOf('executor', `${requestId}/${programHash}`, () =>
          executePrograms(request, ctx.env, cache(), new Set([programHash])),
        );
        // Only while the log still holds the request (a failing-over cluster may have dropped it).
        await runtime.verifyLastRead();
        return ctx.log.append(commit.stream, commit.events, commit.options);
      },
    };
  };

  await runTaskLoop(ctx, { queue, body: TaskBody, bodyShape: '{requestId, programHash}', ackWaitMs: opts.ackWaitMs, step, afterFold: publishFresh, open });
}
