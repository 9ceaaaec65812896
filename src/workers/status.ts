/**
 * `crucible status --log nats://... --run ID`: the live workers of a run (from their heartbeats
 * on the worker board), their roles and states, how far each lags the log, the lease holder of
 * each singleton role and the depth of each task queue (programs, solutions, suites).
 */
import { seqOf } from '../events/positions.js';
import { WorkerBoard, type Heartbeat } from '../events/jetstream/jetstream-board.js';
import { JetStreamTaskQueue, type TaskQueueDepth } from '../events/jetstream/jetstream-tasks.js';
import { JetStreamEventLog } from '../events/jetstream/jetstream-log.js';
import { LogNotFoundError } from '../events/errors.js';
import { openRunLog } from '../events/open-log.js';
import { RunNotFoundError, StatusUnavailableError, WorkerUsageError } from './errors.js';
import { leaseNameOf, PROGRAM_QUEUE, TASK_QUEUES } from './names.js';
import { MAX_JUDGE_SHARES, shareLeaseName } from '../core/judge-shares.js';
import { WORKER_ROLES, SHARED_ROLES, type WorkerRole } from './roles.js';

export interface WorkerRow extends Heartbeat {
  /** Log messages appended after the last one it folded. */
  lag: number;
  /** No heartbeat for `staleAfterMs`: the process is gone. */
  gone: boolean;
}

export interface RunStatus {
  runId: string;
  completed: boolean;
  /** Sequence of the log's last message. */
  head: number;
  programs: TaskQueueDepth | null;
  /** Every task queue by name (the program queue and the samplers' queues); null: not reached. */
  queues: Record<string, TaskQueueDepth | null>;
  /** Each singleton role's lease holder (null: free), and each held share of a split Judge
   * (`judge/s<i>`); a role in `unreachable` was not reached. */
  leases: Record<string, string | null>;
  workers: WorkerRow[];
  /** What did not answer within the status's time, and why: shown as such, never as empty. */
  unreachable: string[];
}

/** The status's whole time: the log is given at most STATUS_OPEN_MS of it, and the parts (asked
 * at once) what is left. With the command's start (~0.2 s) it answers within 2 s, saying what did
 * not answer, on a cluster in failover too. */
export const STATUS_BUDGET_MS = 1700;
export const STATUS_OPEN_MS = 1000;

/** `fn`'s value, or null with `what` and the reason added to `unreachable` when it fails or
 * does not answer within `ms` (a call still under way is left to end on its own). */
async function bounded<T>(what: string, ms: number, unreachable: string[], fn: () => Promise<T>): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      fn(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
      }),
    ]);
  } catch (err) {
    if (err instanceof RunNotFoundError || err instanceof LogNotFoundError) throw err;
    unreachable.push(`${what} (${(err as Error).message})`);
    return null;
  } finally {
    clearTimeout(timer);
  }
}

export async function runStatus(
  location: string,
  runId: string,
  opts: { credsFile?: string; staleAfterMs?: number; budgetMs?: number } = {},
): Promise<RunStatus> {
  const budgetMs = opts.budgetMs ?? STATUS_BUDGET_MS;
  const deadline = Date.now() + budgetMs;
  const openMs = Math.min(STATUS_OPEN_MS, budgetMs);
  let log;
  // Calls are retried for the status's time only, not the workers' minute; a connection that
  // does not come is given up just after the status has said so.
  const opening = openRunLog(location, runId, {
    create: false,
    jetstream: { retryForMs: openMs, connectTimeoutMs: openMs + 500 },
    ...(opts.credsFile !== undefined ? { credsFile: opts.credsFile } : {}),
  });
  try {
    const none: string[] = [];
    log = await bounded(`the log at ${location}`, openMs, none, () => opening);
    if (log === null) {
      // Closed once it opens after all.
      void opening.then((late) => late.close()).catch(() => undefined);
      throw new StatusUnavailableError(`could not reach ${none[0]}`);
    }
  } catch (err) {
    if (err instanceof LogNotFoundError) throw new RunNotFoundError(runId, location);
    throw err;
  }
  try {
    if (!(log instanceof JetStreamEventLog)) throw new WorkerUsageError(`--log ${location}: status reads a JetStream log (nats://host:port)`);
    const jlog = log;
    const unreachable: string[] = [];
    // What is left of the budget, and never less than a round trip's worth.
    const partMs = Math.max(200, deadline - Date.now());
    const part = <T>(what: string, fn: () => Promise<T>) => bounded(what, partMs, unreachable, fn);
    const board = part('the worker board', async () => {
      try {
        return await WorkerBoard.open(jlog);
      } catch (err) {
        // The first worker makes the board; a reader may not, so before that it is only absent.
        if (/STREAM\.CREATE/.test((err as Error).message)) throw new Error('no worker has made it yet');
        throw err;
      }
    });
    const [started, completed, head, queueDepths, leaseHolders, beats, shareHolders] = await Promise.all([
      part("the run's start", async () => {
        for await (const _e of jlog.read({ limit: 1 }, { runId, types: ['RunStarted'] })) return { found: true };
        return { found: false };
      }),
      part("the run's end", async () => {
        for await (const _e of jlog.read({ limit: 1 }, { runId, types: ['RunCompleted'] })) return true;
        return false;
      }),
      part("the log's head", async () => seqOf(await jlog.head())),
      Promise.all(TASK_QUEUES.map((name) => part(`queue ${name}`, () => JetStreamTaskQueue.depthOf(jlog, name)))),
      Promise.all(
        WORKER_ROLES.filter((role) => !SHARED_ROLES.has(role)).map(
          async (role) => [role, await part(`the ${role} lease`, async () => ({ holder: await (await board)!.holderOf(leaseNameOf(role)) }))] as const,
        ),
      ),
      part("the workers' heartbeats", async () => (await board)!.heartbeats()),
      part('the judge shares', async () => {
        const b = (await board)!;
        return Promise.all(Array.from({ length: MAX_JUDGE_SHARES }, async (_, i) => [`judge/s${i}`, await b.holderOf(shareLeaseName('judge', i))] as const));
      }),
    ]);
    if (started !== null && !started.found) throw new RunNotFoundError(runId, location);
    const queues: Record<string, TaskQueueDepth | null> = {};
    TASK_QUEUES.forEach((name, i) => (queues[name] = queueDepths[i] ?? null));
    const leases: Record<string, string | null> = {};
    for (const [role, found] of leaseHolders) if (found !== null) leases[role] = found.holder;
    // A Judge split in shares holds its shares' leases, not the role's: each held one is listed.
    for (const [share, holder] of shareHolders ?? []) if (holder !== null) leases[share] = holder;
    const now = Date.now();
    const stale = opts.staleAfterMs ?? 10_000;
    const order = (r: string) => WORKER_ROLES.indexOf(r as WorkerRole);
    const at = head ?? 0;
    const workers = (beats ?? [])
      .map((b) => ({ ...b, lag: Math.max(0, at - b.folded), gone: now - b.at > stale }))
      .sort((a, b) => order(a.role) - order(b.role) || a.startedAt - b.startedAt);
    return { runId, completed: completed === true, head: at, programs: queues[PROGRAM_QUEUE] ?? null, queues, leases, workers, unreachable };
  } finally {
    // Calls still under way end within their retry time; the connection is not waited on.
    void log.close().catch(() => undefined);
  }
}
