/**
 * `crucible run CONFIG --log nats://... --workers executor=2,...`: records the run's start in
 * the log, starts every role as worker processes, and follows the log for the progress bar and
 * the round table until RunCompleted.
 */
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { RunConfig } from '../config/schema.js';
import { openRunLog } from '../events/open-log.js';
import { roleCredentialsFile } from '../events/jetstream/nats-roles.js';
import {
  LOG_POINTER_FILE,
  SNAPSHOTS_FILE,
  openRunViews,
  recordRunStart,
  startedRun,
  runIdOf,
  sandboxOptions,
  type RunOutcome,
  type RunProgress,
} from '../actors/run.js';
import { prepareRun } from '../actors/sources.js';
import { createSandbox } from '../sandbox/index.js';
import type { Sandbox } from '../sandbox/api.js';
import type { ProjectionRunner } from '../projections/runner.js';
import { checkedRoundRows } from './checked-rows.js';
import { WorkerSupervisor, type WorkerChild, type WorkerLauncher } from './supervisor.js';
import type { WorkerRole } from './roles.js';

export interface WorkersRunOptions {
  config: RunConfig;
  dir?: string;
  location: string;
  counts: Record<WorkerRole, number>;
  /** Extra arguments for every worker (lease and heartbeat settings, credentials). */
  workerArgs?: readonly string[];
  cacheDir?: string | null;
  /** A cluster with auth: `crucible nats up`'s credentials directory (each worker gets its role's
   * file, this process the admin's) or one file for every process. */
  credsFile?: string;
  onProgress?(p: RunProgress): void;
  /** Called once the workers are started, with a way to list them (tests kill some). */
  onStarted?(children: () => WorkerChild[]): void;
  say?(line: string): void;
  /** How each worker is started (default: a child process here). */
  launch?: WorkerLauncher;
  /** Aborting it stops the workers and rejects the run with its reason (a caller giving up on
   * the run must not leave a supervisor restarting workers behind it). */
  signal?: AbortSignal;
}

export async function runWithWorkers(opts: WorkersRunOptions): Promise<RunOutcome> {
  const { config } = opts;
  const runId = runIdOf(config);
  const dir = opts.dir ?? path.join(config.dir, runId);
  mkdirSync(dir, { recursive: true });
  const cacheDir = opts.cacheDir === undefined ? path.join(config.dir, '.cache') : opts.cacheDir;
  const log = await openRunLog(opts.location, runId, opts.credsFile !== undefined ? { credsFile: roleCredentialsFile(opts.credsFile, 'admin') } : {});
  for (const line of log.notices ?? []) opts.say?.(`warning: ${line}`);
  let sandbox: Sandbox | null = null;
  let views: ProjectionRunner | null = null;
  let supervisor: WorkerSupervisor | null = null;
  try {
    // Before anything is written: a directory another log's run left is refused.
    views = await openRunViews(log, dir, runId);
    writeFileSync(path.join(dir, LOG_POINTER_FILE), `${JSON.stringify({ location: opts.location, runId })}\n`);
    sandbox = await createSandbox(sandboxOptions(config));
    // Built here once (and cached), so that every worker reads the catalog instead of building it.
    const started = await startedRun(log, config, dir);
    const prepared = await prepareRun(config, cacheDir, sandbox, dir, { blobs: log.blobs, hash: started?.catalogHash ?? null });
    await prepared.backend.close?.();
    if (!started) await recordRunStart(log, config, prepared.problems, prepared.catalogHash);
    await views.catchUp();
    supervisor = new WorkerSupervisor({
      location: opts.location,
      runId,
      counts: opts.counts,
      // The workers of this machine share the run directory's snapshot file.
      args: [...(cacheDir === null ? [] : ['--cache-dir', cacheDir]), '--snapshots', path.join(dir, SNAPSHOTS_FILE), ...(opts.workerArgs ?? [])],
      logFile: path.join(dir, 'workers.log'),
      ...(opts.credsFile !== undefined ? { credsFile: opts.credsFile } : {}),
      ...(opts.say ? { say: opts.say } : {}),
      ...(opts.launch ? { launch: opts.launch } : {}),
    });
    supervisor.start();
    const sup = supervisor;
    opts.onStarted?.(() => sup.children);
    let round = 0;
    let events = 0;
    let completed = false;
    const sub = log.subscribe({ filter: { runId } });
    const follow = (async () => {
      let executions = 0;
      for await (const item of sub) {
        if (item.kind !== 'event') continue;
        events++;
        const e = item.event;
        if (e.type === 'RoundCompleted') {
          round = (e.data as { round: number }).round;
          await views!.catchUp();
        }
        if (e.type === 'ProgramExecuted') executions += (e.data as { pairs: readonly unknown[] }).pairs.length;
        opts.onProgress?.({ round, rounds: config.rounds, events, position: Number(e.position), executions });
        if (e.type === 'RunCompleted') {
          completed = true;
          break;
        }
      }
    })();
    const aborted = new Promise<never>((_, reject) => {
      const signal = opts.signal;
      if (!signal) return;
      if (signal.aborted) reject(signal.reason);
      signal.addEventListener('abort', () => reject(signal.reason), { once: true });
    });
    try {
      await Promise.race([follow, sup.failed(), aborted]);
    } finally {
      await sub.close();
    }
    await sup.finish(30_000);
    await views.catchUp();
    // The read models were caught up piecewise while servers failed: the table the run reports
    // is checked against one read of the log now that the run is over.
    const rows = await checkedRoundRows(views, log, runId, (line) =>
      appendFileSync(path.join(dir, 'workers.log'), `${new Date().toISOString()} crucible run: ${line}\n`),
    );
    if (views.rebuiltAfterRewrite > 0)
      appendFileSync(
        path.join(dir, 'workers.log'),
        `${new Date().toISOString()} crucible run: the log no longer held events the read models had read (a server failing over dropped them); rebuilt from the log ${views.rebuiltAfterRewrite} time(s)\n`,
      );
    return { runId, dir, finished: completed, rows, isolation: sandbox.isolation };
  } finally {
    await supervisor?.stop();
    await views?.close();
    await sandbox?.close();
    await log.close();
  }
}
