/**
 * What the executor and sampler loops share: `concurrency` slots claim tasks from the role's
 * shared queue one at a time while a folding loop keeps this process's view of the log current
 * and publishes the tasks it finds. A task whose body this code did not write (another queue's
 * work, or another version's) is left in the queue, never acked: an ack would delete it; a failed run is given
 * back to be delivered again, and after MAX_TASK_FAILURES deliveries the worker stops with the error.
 *
 * A task can also go missing from the queue (a server that failed over lost it, or it was acked
 * by a process that then did not write its output): the work is still open in the log, but no
 * process would ever claim it. So when this process sees work open while the queue holds no task
 * at all, twice in a row `ackWaitMs` apart (longer than any claimed task goes without a
 * `working()`), it publishes the open tasks again under new ids (the old ones may still sit in
 * the queue's duplicate window).
 */
import type { z } from 'zod';
import type { JetStreamTaskQueue, Task } from '../events/jetstream/jetstream-tasks.js';
import type { LoopContext } from './context.js';
import { WorkerError } from './errors.js';
import { isTransient } from '../events/jetstream/jetstream-support.js';
import { RunFailedError } from '../actors/effect-failures.js';
import { ActorFailedError } from '../actors/effect-runner.js';
import { LogRewrittenError } from '../events/errors.js';

/** Deliveries of one task that fail before the worker gives up (and exits with the error). */
export const MAX_TASK_FAILURES = 5;

/** What to do with a claimed task: its output is in the log (`recorded`: ack), it was published
 * by a process further ahead in the log than this one (`behind`: give it back), or run it. */
export type TaskStep =
  | 'recorded'
  | 'behind'
  | {
      /** What the task is, in messages ("code effect round-1/p3"). */
      label: string;
      /** Runs the task and appends its output; a duplicate append is a success. */
      run: () => Promise<{ duplicate: boolean }>;
    };

export interface TaskLoop<B> {
  queue: JetStreamTaskQueue;
  body: z.ZodType<B>;
  /** The body's shape, named in the message when a body does not parse. */
  bodyShape: string;
  ackWaitMs: number;
  /** Decides on a claimed task (may fold the log first). */
  step(body: B): Promise<TaskStep>;
  /** After each fold: publish the tasks found and update the figures. */
  afterFold(): Promise<void>;
  /** The tasks of the work this process sees open in the log: id and body as published. */
  open(): { id: string; body: string }[];
}

/** Watches for open work that no task in the queue stands for (see the module comment). */
class LostTasks {
  #suspects = new Set<string>();
  #checkedAt = 0;
  #round = 0;

  constructor(
    private readonly loop: TaskLoop<unknown>,
    private readonly say: (line: string) => void,
    private readonly leftInQueue: () => number,
  ) {}

  /** Publishes again the tasks seen open with an empty queue at two checks in a row. */
  async check(now: number): Promise<void> {
    if (now - this.#checkedAt < this.loop.ackWaitMs) return;
    this.#checkedAt = now;
    const open = this.loop.open();
    if (open.length === 0) {
      this.#suspects.clear();
      return;
    }
    const depth = await this.loop.queue.depth();
    // Tasks left in the queue as not its own, or given back as behind, stand for no open work.
    if (depth.waiting + depth.claimed > this.leftInQueue()) {
      this.#suspects.clear();
      return;
    }
    const lost = open.filter((t) => this.#suspects.has(t.id));
    this.#suspects = new Set(open.map((t) => t.id));
    if (lost.length === 0) return;
    // New ids: the lost ones may be in the queue's duplicate window. A copy another process
    // publishes too is harmless: a task whose output is in the log is acked without running.
    const round = `again-${now}-${++this.#round}`;
    for (const t of lost) await this.loop.queue.publish(`${t.id}/${round}`, t.body);
    this.say(`published ${lost.length} task(s) of queue ${this.loop.queue.name} again: their work is open in the log, but the queue held no task`);
    this.#suspects.clear();
  }
}

function parseBody<B>(schema: z.ZodType<B>, text: string): B | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  const parsed = schema.safeParse(value);
  return parsed.success ? parsed.data : null;
}

/** What of a worker's context the loop uses. */
export type TaskLoopContext = Pick<LoopContext, 'role' | 'wake' | 'figures' | 'completion' | 'concurrency' | 'fold' | 'stopped' | 'say'> &
  Partial<Pick<LoopContext, 'since'>>;

export async function runTaskLoop<B>(ctx: TaskLoopContext, loop: TaskLoop<B>): Promise<void> {
  const { wake, figures, role } = ctx;
  let failure: unknown = null;
  const failures = new Map<string, number>();
  figures.state = 'live';

  /** Acks `task`; an ack the server did not answer (its consumer's leader moving) is not an
   * error: the task comes back after its ack deadline and is acked then as recorded. */
  const ack = async (task: Task, label: string) => {
    try {
      await task.ack();
    } catch (err) {
      if (!isTransient(err)) throw err;
      ctx.say(`${label}: the ack of its task was not answered (${(err as Error).message}); it will be delivered again and acked as recorded`);
    }
  };

  /** Tasks left in the queue as not its own, said once each. */
  const left = new Set<string>();
  /** Tasks this process was handed and gave back as `behind`, and when last: none stands for
   * work it sees open (that work's request is in what it folded). Tasks whose work a
   * failing-over cluster dropped from the log stay behind for good, and must not keep the
   * lost-task check from publishing the open work's tasks again. */
  const behind = new Map<string, number>();
  const notOpenWork = () => {
    const since = Date.now() - 3 * loop.ackWaitMs;
    for (const [id, at] of behind) if (at < since) behind.delete(id);
    return left.size + behind.size;
  };
  const leave = (task: Task, why: string) => {
    if (!left.has(task.id)) ctx.say(`left task ${task.id} in queue ${loop.queue.name}: ${why}; not acked, so it stays for whoever it is for`);
    left.add(task.id);
    // Back after an ack deadline, not at once: it would come straight back to this claimer.
    task.nak(loop.ackWaitMs);
  };

  const handle = async (task: Task) => {
    const body = parseBody(loop.body, task.body);
    if (body === null) return leave(task, `its body is not ${loop.bodyShape}`);
    const step = await loop.step(body);
    if (step === 'recorded') return ack(task, `task ${task.id}`);
    if (step === 'behind') {
      behind.set(task.id, Date.now());
      return task.nak(200);
    }
    behind.delete(task.id);
    figures.running++;
    const ticker = setInterval(() => task.working(), Math.max(100, Math.floor(loop.ackWaitMs / 3)));
    let ran: { duplicate: boolean };
    try {
      ran = await step.run();
    } catch (err) {
      // The effect failed on every try its policy allows (each recorded, RunFailed last): the
      // run has stopped, and so does this worker; or the log dropped what it had read: it
      // reads the log again in a new process. Other errors are the append's (the log): the
      // task goes back to the queue.
      if (err instanceof RunFailedError || err instanceof ActorFailedError || err instanceof LogRewrittenError) {
        failure ??= err;
        task.nak();
        return;
      }
      const n = (failures.get(task.id) ?? 0) + 1;
      failures.set(task.id, n);
      const why = (err as Error).message;
      ctx.say(`${step.label} failed (${n}/${MAX_TASK_FAILURES}): ${why}`);
      if (n >= MAX_TASK_FAILURES) failure ??= new WorkerError(`${role}: ${step.label} failed ${n} times: ${why}`);
      task.nak(500 * n);
      return;
    } finally {
      clearInterval(ticker);
      figures.running--;
      wake.signal();
    }
    if (ran.duplicate) figures.duplicates++;
    else if (figures.written++ === 0 && ctx.since) ctx.say(`first commit appended at ${ctx.since()}`);
    await ack(task, step.label);
  };

  const done = () => ctx.completion.completed || ctx.stopped() || failure !== null;
  const slots = Array.from({ length: ctx.concurrency }, async () => {
    while (!done()) {
      let tasks: Task[];
      try {
        tasks = await loop.queue.claim(1, 1000);
      } catch (err) {
        if (done()) return;
        throw err;
      }
      for (const t of tasks) await handle(t);
    }
  });
  const lost = new LostTasks(loop as TaskLoop<unknown>, (line) => ctx.say(line), notOpenWork);
  const folding = (async () => {
    let unanswered = 0;
    while (!done()) {
      await ctx.fold();
      // A queue that does not take tasks for a while (its stream's replicas catching up after a
      // server's restart) is waited for, fold after fold: the tasks not published yet stay with
      // afterFold for its next call. Dying would only hand the same wait to a replacement.
      try {
        await loop.afterFold();
        if (!done()) await lost.check(Date.now());
        if (unanswered > 0) ctx.say(`queue ${loop.queue.name} takes tasks again, after ${unanswered} unanswered attempt(s)`);
        unanswered = 0;
      } catch (err) {
        if (!isTransient(err)) throw err;
        if (unanswered++ === 0) ctx.say(`queue ${loop.queue.name} did not take a task (${(err as Error).message}); trying again after each fold`);
      }
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
