/**
 * One worker process: ONE role's actor over a run's JetStream log.
 *
 * Everything it needs comes from the log (the config in RunStarted, the problems by blob hash);
 * it folds the log (from its latest snapshot when given a snapshot file), is woken
 * by the log's subscription instead of exiting when idle, appends each effect's output as soon
 * as that effect finishes (a duplicate is success), beats on the worker board, and stops when
 * RunCompleted is in the log.
 */
import os from 'node:os';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { isNatsLocation, openRunLog } from '../events/open-log.js';
import { JetStreamEventLog, type PingOptions } from '../events/jetstream/jetstream-log.js';
import { WorkerBoard } from '../events/jetstream/jetstream-board.js';
import { JetStreamSnapshotStore } from '../events/jetstream/jetstream-snapshots.js';
import { readCredentials } from '../events/jetstream/nats-roles.js';
import { LogNotFoundError } from '../events/errors.js';
import { seqOf } from '../events/positions.js';
import type { EventLog } from '../events/log.js';
import { ActorRuntime, type ActorDefinition, type Effect } from '../actors/runtime.js';
import type { RunEnv, PolicyBackend } from '../actors/env.js';
import { conductor } from '../actors/conductor.js';
import { solver } from '../actors/solver.js';
import { adversary } from '../actors/adversary.js';
import { executor } from '../actors/executor.js';
import { judge } from '../actors/judge.js';
import { learner } from '../actors/learner.js';
import { DEFAULT_SNAPSHOT_EVERY, sandboxOptions } from '../actors/run.js';
import { SqliteSnapshotTable } from '../actors/snapshots.js';
import { createSandbox, defaultWorkers } from '../sandbox/index.js';
import type { Sandbox } from '../sandbox/api.js';
import type { AnyStateMachine } from 'xstate';
import { CompletionView, type LoopContext, type WorkerFigures } from './context.js';
import { RunNotFoundError, WorkerUsageError } from './errors.js';
import { loadRunFromLog, runStartedOf } from './run-source.js';
import { runSingleton } from './singleton.js';
import { ProgramWork, runExecutor } from './executor-tasks.js';
import { runSampler } from './sampler-tasks.js';
import { Wake } from './wake.js';
import { watchConnection } from './connection-watch.js';
import { ClusterSnapshots } from './cluster-snapshots.js';
import { isSamplerRole, type WorkerRole } from './roles.js';

const ACTORS: Record<WorkerRole, ActorDefinition<AnyStateMachine, Effect, RunEnv, unknown>> = {
  conductor,
  solver,
  adversary,
  executor,
  judge,
  learner,
} as never;

/** How long a claimed task waits for its process: the wait after an executor dies before its
 * program goes to another. A live process extends it every third of it while the program runs,
 * so it need not cover the longest program. 10 s: with 30 s a SIGKILLed executor cost the demo's
 * run 54 s, with 10 s 20 s (`bench recovery`, docs/measurements.md). */
export const DEFAULT_ACK_WAIT_MS = 10_000;

export interface WorkerOptions {
  role: WorkerRole;
  /** nats://host:port (several comma-separated for a cluster). */
  location: string;
  runId: string;
  /** Effects (singletons, samplers) or programs (executors) run at once. Default: 1 for
   * singletons (their outputs then reach the log in the order the actor lists its work); 2 for
   * samplers (the next effect is claimed while one is appended); for executors twice the
   * sandbox's workers, so that its pool has the next program queued while a claim and an append
   * are under way. */
  concurrency?: number;
  credsFile?: string;
  /** Where built catalogs are cached (default <config.dir>/.cache). */
  cacheDir?: string | null;
  /** How long a singleton's lease lasts unrenewed: a standby takes over about this long after
   * the live copy dies. Default 6000 ms. */
  leaseMs?: number;
  /** A judge's shares: the run's Judge split by problem among this many live judges (each
   * process started with the same number). Default 1: one live judge, the others standing by. */
  shares?: number;
  /** Heartbeats on the worker board every this many ms. Default 2000. */
  heartbeatMs?: number;
  /** A claimed program not acked (nor extended) within this many ms goes to another executor. Default DEFAULT_ACK_WAIT_MS. */
  ackWaitMs?: number;
  workerId?: string;
  /** How soon a server that stopped answering is given up for another (default: every 2 s, 2 unanswered). */
  ping?: PingOptions;
  /** Actor snapshots: the local checkpoint file (shared by the workers of one machine; default a
   * file of this process's own, removed at its end) and how many folded events apart they are
   * taken (0: only read; default DEFAULT_SNAPSHOT_EVERY). Each is also stored on the cluster
   * (cluster-snapshots.ts), from where a worker on any machine starts. */
  snapshots?: { file?: string; every?: number };
  /** Lines about the worker's state (taking over, standing by), without the trailing newline. */
  say?(line: string): void;
  /** Stops the worker (its effects in flight finish and are appended first). */
  signal?: AbortSignal;
}

export interface WorkerOutcome {
  workerId: string;
  /** RunCompleted is in the log. */
  completed: boolean;
  figures: WorkerFigures;
}

async function openWorkerLog(location: string, runId: string, credsFile: string | undefined, ping: PingOptions | undefined): Promise<JetStreamEventLog> {
  let log: EventLog;
  try {
    log = await openRunLog(location, runId, { create: false, ...(credsFile !== undefined ? { credsFile } : {}), ...(ping ? { jetstream: { ping } } : {}) });
  } catch (err) {
    if (err instanceof LogNotFoundError) throw new RunNotFoundError(runId, location);
    throw err;
  }
  if (!(log instanceof JetStreamEventLog)) {
    await log.close();
    throw new WorkerUsageError(`--log ${location}: workers share a JetStream log (nats://host:port)`);
  }
  return log;
}

/** Credentials made for another role (not the admin's, which may do every role's work) are
 * refused before anything is done: the server would refuse the worker's first append, mid-run
 * (or nothing, on a run already complete). A file that names the role and holds another role's
 * key is refused by the server at connection (nats-connect.ts, inboxRefusal). */
function checkDeclaredRole(role: WorkerRole, credsFile: string): void {
  const held = readCredentials(credsFile).role;
  if (held !== role && held !== 'admin') {
    throw new WorkerUsageError(
      `--creds ${credsFile}: credentials of role ${held}, not ${role}: a ${role} worker needs ${role}.creds.json (or admin.creds.json) from \`crucible nats up\``,
    );
  }
}

export async function runWorker(opts: WorkerOptions): Promise<WorkerOutcome> {
  if (!isNatsLocation(opts.location)) throw new WorkerUsageError(`--log ${opts.location}: workers share a JetStream log: expected nats://host:port`);
  if (opts.concurrency !== undefined && (!Number.isInteger(opts.concurrency) || opts.concurrency < 1))
    throw new WorkerUsageError(`--concurrency ${opts.concurrency}: expected a positive integer`);
  const say = opts.say ?? (() => {});
  // Recovery is measured from here: each step of a (replacement) worker's start says its time.
  const t0 = performance.now();
  const since = () => `${Math.round(performance.now() - t0)} ms`;
  const workerId = opts.workerId ?? `${opts.role}-${os.hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  if (opts.credsFile !== undefined) checkDeclaredRole(opts.role, opts.credsFile);
  const log = await openWorkerLog(opts.location, opts.runId, opts.credsFile, opts.ping);
  for (const line of log.notices) say(`warning: ${line}`);
  watchConnection(log.connection, say);
  let sandbox: Sandbox | null = null;
  let backend: PolicyBackend | null = null;
  const wake = new Wake();
  let beat: NodeJS.Timeout | null = null;
  let table: ClusterSnapshots | null = null;
  let ownSnapshotDir: string | null = null;
  const figures: WorkerFigures = { state: 'standby', running: 0, pending: 0, written: 0, duplicates: 0, fenced: 0 };
  try {
    const started = await runStartedOf(log, opts.runId);
    if (!started) throw new RunNotFoundError(opts.runId, opts.location);
    sandbox = await createSandbox(sandboxOptions(started.config));
    const run = await loadRunFromLog(log, opts.runId, sandbox, opts.cacheDir === undefined ? {} : { cacheDir: opts.cacheDir });
    backend = run.backend;
    const completion = new CompletionView();
    const work = opts.role === 'executor' ? new ProgramWork() : null;
    let file = opts.snapshots?.file;
    if (file === undefined) file = path.join((ownSnapshotDir = mkdtempSync(path.join(os.tmpdir(), 'crucible-worker-'))), 'snapshots.db');
    // A machine new to the run has no run directory yet.
    else mkdirSync(path.dirname(file), { recursive: true });
    table = new ClusterSnapshots(new SqliteSnapshotTable(file, opts.runId), await JetStreamSnapshotStore.open(log), say);
    for (const r of await table.restore([ACTORS[opts.role].name]))
      if (r.outcome === 'restored') say(`took the cluster's snapshot of ${r.actor} at log position ${seqOf(r.position!)} (at ${since()})`);
    const runtime = new ActorRuntime(log, opts.runId, run.env, [ACTORS[opts.role]], {
      views: [run.env.view, completion, ...(work ? [work] : [])],
      snapshots: { table, every: opts.snapshots?.every ?? DEFAULT_SNAPSHOT_EVERY },
      onRestart: (r) => {
        if (r.refused) say(r.refused.message);
        if (r.ignored) say(r.ignored);
        say(
          `${r.snapshot === 'used' ? `started from its snapshot at position ${r.from}` : 'started from the start of the log'}: ${r.eventsFolded} events folded`,
        );
      },
    });
    const loaded = since();
    await runtime.start();
    say(`started: run loaded at ${loaded}, actor folded to log position ${seqOf(runtime.position)} at ${since()}`);
    const board = await WorkerBoard.open(log);
    const startedAt = Date.now();
    const heartbeat = async () => {
      await board
        .beat({
          workerId,
          role: opts.role,
          pid: process.pid,
          host: os.hostname(),
          state: figures.state,
          folded: seqOf(runtime.position),
          running: figures.running,
          pending: Math.max(0, figures.pending),
          done: figures.written,
          startedAt,
          at: Date.now(),
        })
        .catch(() => undefined);
    };
    await heartbeat();
    beat = setInterval(() => void heartbeat(), opts.heartbeatMs ?? 2000);
    wake.listen(log, opts.runId, runtime.position);
    let folding: Promise<void> = Promise.resolve();
    const ctx: LoopContext = {
      role: opts.role,
      runId: opts.runId,
      workerId,
      log,
      board,
      runtime,
      env: run.env,
      wake,
      completion,
      concurrency: opts.concurrency ?? (opts.role === 'executor' ? 2 * (run.config.executor.workers ?? defaultWorkers()) : isSamplerRole(opts.role) ? 2 : 1),
      figures,
      fold: () =>
        (folding = folding.then(async () => {
          await runtime.foldNew();
        })),
      stopped: () => opts.signal?.aborted ?? false,
      say,
      since,
    };
    opts.signal?.addEventListener('abort', () => wake.signal());
    const ackWaitMs = opts.ackWaitMs ?? DEFAULT_ACK_WAIT_MS;
    if (opts.role === 'executor') await runExecutor(ctx, work!, { ackWaitMs });
    else if (isSamplerRole(ctx.role)) await runSampler({ ...ctx, role: ctx.role }, { ackWaitMs });
    else await runSingleton(ctx, opts.leaseMs ?? 6000, opts.role === 'judge' ? (opts.shares ?? 1) : 1);
    figures.state = 'stopping';
    await heartbeat();
    return { workerId, completed: completion.completed, figures };
  } finally {
    if (beat) clearInterval(beat);
    await wake.close();
    await backend?.close?.();
    await sandbox?.close();
    // What is queued for the cluster goes out before the connection closes.
    if (table && !(await table.flush())) say('snapshots still being stored on the cluster at exit were given up');
    table?.close();
    if (ownSnapshotDir !== null) rmSync(ownSnapshotDir, { recursive: true, force: true });
    await log.close();
  }
}
