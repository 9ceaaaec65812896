/**
 * The loop of a sampler process (Solver, Adversary). Every process of the role folds the log;
 * for each effect its actor lists as pending it publishes one task named by the effect's key
 * (the copies other processes publish are dropped as duplicates). `concurrency` slots claim
 * tasks from the role's shared queue, run that effect, append its output under the commit id the
 * in-process run uses and ack: two solver processes split the problems of a round, two adversary
 * processes the solutions. What an effect writes depends only on the effect (its seed is derived
 * from the run seed and the effect's round and problem or solution, see solver.ts and
 * adversary.ts), never on which process ran it, so the commits are those of the in-process run.
 *
 * A task carries the log position at which its publisher saw the effect pending: a process that
 * has folded that far and does not list the effect knows its output is in the log (acked without
 * running); one that has not folded that far folds first, and gives the task back if still behind.
 */
import { z } from 'zod';
import type { Effect } from '../actors/runtime.js';
import { seqOf } from '../events/positions.js';
import { JetStreamTaskQueue } from '../events/jetstream/jetstream-tasks.js';
import type { JetStreamEventLog } from '../events/jetstream/jetstream-log.js';
import type { LoopContext } from './context.js';
import { sampleQueueOf, type SamplerRole } from './names.js';
import { runTaskLoop, type TaskStep } from './task-loop.js';

const TaskBody = z.strictObject({
  key: z.string().min(1),
  /** The commit number of the log up to which the publisher had folded when it saw the effect pending. */
  at: z.int().nonnegative(),
});

/** The task id of an effect: the same in every process, so the queue stores it once. */
export const samplerTaskId = (runId: string, role: SamplerRole, key: string): string => `${runId}/${role}/${key}`;

export async function runSampler(ctx: LoopContext & { role: SamplerRole }, opts: { ackWaitMs: number }): Promise<void> {
  const { runtime, figures, runId, role } = ctx;
  const queue = await JetStreamTaskQueue.open(ctx.log as JetStreamEventLog, { name: sampleQueueOf(role), ackWaitMs: opts.ackWaitMs });

  const pendingEffect = (key: string): Effect | undefined => runtime.pendingOf(role).find((e) => e.key === key);
  const folded = () => seqOf(runtime.position);

  /** The task of each effect published, as published (its body names the position then). */
  const published = new Map<string, { id: string; body: string }>();
  const publishPending = async () => {
    const pending = runtime.pendingOf(role);
    const keys = new Set(pending.map((e) => e.key));
    for (const k of published.keys()) if (!keys.has(k)) published.delete(k);
    figures.pending = pending.length;
    const at = folded();
    for (const effect of pending) {
      if (published.has(effect.key)) continue;
      const t = { id: samplerTaskId(runId, role, effect.key), body: JSON.stringify({ key: effect.key, at }) };
      await queue.publish(t.id, t.body);
      published.set(effect.key, t);
    }
  };

  const step = async ({ key, at }: z.infer<typeof TaskBody>): Promise<TaskStep> => {
    let effect = pendingEffect(key);
    if (!effect || folded() < at) {
      await ctx.fold();
      effect = pendingEffect(key);
    }
    // Folded as far as the publisher and not pending: its output is in the log. Not folded that
    // far: published by a process further ahead in the log than this one's last read.
    if (!effect) return folded() >= at ? 'recorded' : 'behind';
    const found = effect;
    return {
      label: `${role} effect ${key}`,
      run: async () => {
        const commit = await runtime.runEffect(role, found);
        // The commit id names the effect: a copy another process appended first is a success.
        // Only while the log still holds the events it was derived from.
        await runtime.verifyLastRead();
        return ctx.log.append(commit.stream, commit.events, commit.options);
      },
    };
  };

  await runTaskLoop(ctx, {
    queue,
    body: TaskBody,
    bodyShape: '{key, at}',
    ackWaitMs: opts.ackWaitMs,
    step,
    afterFold: publishPending,
    open: () => [...published.values()],
  });
}
