/**
 * `crucible status --log nats://... --run ID`: the live workers of a run (from their heartbeats
 * on the worker board), their roles and states, how far each lags the log, the lease holder of
 * each singleton role and the depth of each task queue (programs, solutions, suites).
 */
import { seqOf } from '../events/positions.js';
import { WorkerBoard, type Heartbeat } from '../events/jetstream-board.js';
import { JetStreamTaskQueue, type TaskQueueDepth } from '../events/jetstream-tasks.js';
import { JetStreamEventLog } from '../events/jetstream-log.js';
import { LogNotFoundError } from '../events/errors.js';
import { openRunLog } from '../events/open-log.js';
import { RunNotFoundError, WorkerUsageError } from './errors.js';
import { runStartedOf } from './run-source.js';
import { leaseNameOf, PROGRAM_QUEUE, TASK_QUEUES } from './names.js';
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
  programs: TaskQueueDepth;
  /** Every task queue by name (the program queue and the samplers' queues). */
  queues: Record<string, TaskQueueDepth>;
  leases: Record<string, string | null>;
  workers: WorkerRow[];
}

export async function runStatus(location: string, runId: string, opts: { credsFile?: string; staleAfterMs?: number } = {}): Promise<RunStatus> {
  let log;
  try {
    log = await openRunLog(location, runId, { create: false, ...(opts.credsFile !== undefined ? { credsFile: opts.credsFile } : {}) });
  } catch (err) {
    if (err instanceof LogNotFoundError) throw new RunNotFoundError(runId, location);
    throw err;
  }
  try {
    if (!(log instanceof JetStreamEventLog)) throw new WorkerUsageError(`--log ${location}: status reads a JetStream log (nats://host:port)`);
    if (!(await runStartedOf(log, runId))) throw new RunNotFoundError(runId, location);
    let completed = false;
    for await (const _e of log.read({ limit: 1 }, { runId, types: ['RunCompleted'] })) completed = true;
    const head = seqOf(await log.head());
    const board = await WorkerBoard.open(log);
    const queues: Record<string, TaskQueueDepth> = {};
    for (const name of TASK_QUEUES) queues[name] = await JetStreamTaskQueue.depthOf(log, name);
    const programs = queues[PROGRAM_QUEUE]!;
    const leases: Record<string, string | null> = {};
    for (const role of WORKER_ROLES) if (!SHARED_ROLES.has(role)) leases[role] = await board.holderOf(leaseNameOf(role));
    const now = Date.now();
    const stale = opts.staleAfterMs ?? 10_000;
    const order = (r: string) => WORKER_ROLES.indexOf(r as WorkerRole);
    const workers = (await board.heartbeats())
      .map((b) => ({ ...b, lag: Math.max(0, head - b.folded), gone: now - b.at > stale }))
      .sort((a, b) => order(a.role) - order(b.role) || a.startedAt - b.startedAt);
    return { runId, completed, head, programs, queues, leases, workers };
  } finally {
    await log.close();
  }
}
