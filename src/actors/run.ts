/**
 * One run on the embedded default: the SQLite log under runs/<run-id>/, every actor in this
 * process around one dispatcher. A run directory that already holds the same run is resumed
 * from its log: the actors refold it and carry on with the work not recorded yet.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { RunConfig } from '../config/schema.js';
import { isNatsLocation, openRunLog } from '../events/open-log.js';
import { ORIGIN, type EventLog } from '../events/log.js';
import type { EventData } from '../events/catalog.js';
import type { EventEnvelope } from '../events/envelope.js';
import { createSandbox, type CreateSandboxOptions } from '../sandbox/index.js';
import type { Sandbox } from '../sandbox/api.js';
import type { Problem } from '../core/problem.js';
import { ActorRuntime, type RestartReport } from './runtime.js';
import type { RetryPolicy } from './effect-failures.js';
import type { StepScheduler } from './step-scheduler.js';
import { SqliteSnapshotTable } from './snapshots.js';
import { RunEnv, type PolicyBackend } from './env.js';
import { conductor } from './conductor.js';
import { solver } from './solver.js';
import { adversary } from './adversary.js';
import { executor } from './executor.js';
import { judge } from './judge.js';
import { learner } from './learner.js';
import { WarmStartWatch, type WarmStartProgress } from './warm-start.js';
import { canonicalJson } from '../core/canonical-json.js';
import { prepareRun, type PreparedRun } from './sources.js';
import type { ServedBackend } from './served-backend.js';
import { roundRows, type RoundRow, type RoundTableState } from '../projections/round-table.js';
import { ProjectionRunner, ReadModelOfAnotherLogError, type Projection } from '../projections/runner.js';
import { KEPT_RUN_PROJECTIONS, RETIRED_RUN_PROJECTIONS } from '../projections/run-views.js';
import { readingDerived } from '../projections/damaged-file.js';
import { RunMismatchError } from './errors.js';

export { RunMismatchError };

export const CRUCIBLE_VERSION = '0.1.0';

/** The run's sandbox: verdicts that train a policy come from an isolated sandbox unless the
 * config opts out with `executor.isolation: none`. */
export function sandboxOptions(config: RunConfig): CreateSandboxOptions {
  return {
    pythonPath: config.executor.pythonPath,
    isolation: config.executor.isolation,
    workers: config.executor.workers,
    requireIsolation: config.executor.isolation !== 'none',
  };
}

export function configHash(config: RunConfig): string {
  return createHash('sha256').update(canonicalJson(config)).digest('hex');
}

/** The run id names the config, so one config and seed always write one log. */
export function runIdOf(config: RunConfig): string {
  return `${config.name}-s${config.seed}-${configHash(config).slice(0, 8)}`;
}

export interface RunProgress {
  /** The last round completed. */
  round: number;
  rounds: number;
  /** Events folded by this process. */
  events: number;
  /** The log position the run has reached. */
  position: number;
  /** Program-test pairs executed in the whole run (earlier processes' included). */
  executions: number;
  /** Before round 1 of a run with a warm start (learner.sft): its last recorded step. */
  warmStart?: WarmStartProgress | null;
}

/** What a process that resumes a recorded run starts from. */
export interface RunResume {
  /** The log's head when this process started. */
  position: number;
  /** The round it goes on with (the rounds before it are completed). */
  round: number;
  /** Whether the run had already finished (nothing is left to do). */
  finished: boolean;
}

export interface RunOptions {
  config: RunConfig;
  /** Run directory; default <config.dir>/<run-id>. */
  dir?: string;
  /** Where the log lives: a nats:// URL (JetStream), or by default the SQLite file in the run directory. */
  log?: string;
  /** Credentials for a JetStream log on a cluster with auth (a file `crucible nats up` wrote). */
  credsFile?: string;
  /** The sandbox to execute with; default a new one from the config (closed at the end). */
  sandbox?: Sandbox;
  /** Where built catalogs are cached; default <config.dir>/.cache, null for none. */
  cacheDir?: string | null;
  onProgress?(p: RunProgress): void;
  /** What the log says its operator must know (a server with a known fault), said at its opening. */
  onNotice?(line: string): void;
  /** Called once, when the run directory already holds this run: where it goes on from. */
  onResume?(r: RunResume): void;
  /** For crash tests: stop (as if killed) once this returns true. */
  stopWhen?(p: RunProgress): boolean;
  /** For restart tests: called after each dispatcher step, and when idle (return true to go on). */
  onStep?(runtime: ActorRuntime<RunEnv>, p: RunProgress): void | Promise<void>;
  onIdle?(runtime: ActorRuntime<RunEnv>): boolean | Promise<boolean>;
  /** Actor snapshots every this many folded events (default DEFAULT_SNAPSHOT_EVERY); 0: none
   * taken (existing ones are still used on a restart). */
  snapshotEvery?: number;
  /** For crash tests: every event of the trainer bridge (a served run's), with its client. */
  onBridgeEvent?: ServedBackend['onBridgeEvent'];
  /** Called for each actor built at start or restarted: from a snapshot or not, events folded. */
  onRestart?(report: RestartReport): void;
  /** How often a failing effect is tried before the run fails (default DEFAULT_RETRY). */
  retry?: RetryPolicy;
  /** Which pending effects each step runs and the order of their appends (see step-scheduler.ts). */
  scheduler?: StepScheduler;
  /** Fault-injection tests only: wraps the run's policy backend (e.g. a trainer that fails). */
  testOnlyWrapBackend?(backend: PolicyBackend): PolicyBackend;
  /** The problems and policy backend to run with, instead of those the config names (a
   * benchmark's generated problems and its stand-in policy). The config still names the run. */
  prepared?: PreparedRun;
}

export interface RunOutcome {
  runId: string;
  dir: string;
  finished: boolean;
  rows: RoundRow[];
  isolation: 'bwrap' | 'rlimits';
}

export const ACTOR_NAMES = ['conductor', 'solver', 'adversary', 'executor', 'judge', 'learner'] as const;

export const LOG_FILE = 'log.db';
export const VIEWS_FILE = 'views.db';
/** The checkpoint table naming each actor's latest snapshot (see snapshots.ts). */
export const SNAPSHOTS_FILE = 'snapshots.db';
/** Events folded between actor snapshots: a restart folds at most about this many per actor. */
export const DEFAULT_SNAPSHOT_EVERY = 20_000;
/** In a run directory whose log lives elsewhere (JetStream): where it is. */
export const LOG_POINTER_FILE = 'log.json';

async function firstEvent(log: EventLog, runId: string | undefined, type: string) {
  for await (const e of log.read({ limit: 1 }, runId ? { runId, types: [type] } : { types: [type] })) return e;
  return undefined;
}

/** The log's RunStarted, checked to be this run's (same id and config); null when the log holds
 * no run yet. */
export async function startedRun(log: EventLog, config: RunConfig, dir: string): Promise<EventData<'RunStarted'> | null> {
  const started = await firstEvent(log, undefined, 'RunStarted');
  if (!started) return null;
  const d = started.data as EventData<'RunStarted'>;
  if (started.runId !== runIdOf(config) || d.configHash !== configHash(config)) {
    throw new RunMismatchError(`${dir} holds run ${started.runId}, made with another config (hash ${d.configHash.slice(0, 12)}); use another --dir`);
  }
  return d;
}

/** Appends the run's RunStarted (its config, each problem as a blob, the catalog's blob) to a
 * log that holds no run yet (see startedRun). */
export async function recordRunStart(log: EventLog, config: RunConfig, problems: readonly Problem[], catalogHash: string | null): Promise<void> {
  const runId = runIdOf(config);
  const problemRefs = [];
  for (const p of problems) problemRefs.push({ problemId: p.id, problemHash: await log.blobs.put(RunEnv.problemBlob(p)) });
  await log.append(
    'conductor',
    [
      {
        type: 'RunStarted',
        runId,
        data: {
          method: config.method,
          config,
          configHash: configHash(config),
          seed: config.seed,
          crucibleVersion: CRUCIBLE_VERSION,
          problems: problemRefs,
          catalogHash,
        },
      },
    ],
    { commitId: `${runId}/run-started`, expectedPosition: ORIGIN },
  );
}

/** A resumed run: RunResumed records when the log was last written before (so that the round
 * under way does not count the time stopped), and `onResume` hears where the run goes on from. */
async function recordResume(
  log: EventLog,
  runId: string,
  runtime: ActorRuntime<RunEnv>,
  views: ProjectionRunner,
  rounds: number,
  onResume: RunOptions['onResume'],
): Promise<void> {
  const head = await log.head();
  const completed = roundRows(views.state<RoundTableState>('round-table')).at(-1)?.round ?? 0;
  const finished = (await firstEvent(log, runId, 'RunCompleted')) !== undefined;
  if (!finished) {
    // Keyed by the head it resumes at: the same resume retried is recorded once.
    await log.append('run', [{ type: 'RunResumed', runId, data: { stoppedAt: runtime.latestAt } }], { commitId: `${runId}/resumed@${head}` });
  }
  onResume?.({ position: Number(head), round: Math.min(completed + 1, rounds), finished });
}

/** The run directory's read models over `log`: those the run keeps as it goes (the default), or
 * every one (a reader's, RUN_PROJECTIONS: those built on demand are brought up to date by its
 * catch-up and kept). Read models of another log (the directory of this run on another backend:
 * the run id names only config and seed) are refused. */
export async function openRunViews(
  log: EventLog,
  dir: string,
  runId: string,
  projections: readonly Projection[] = KEPT_RUN_PROJECTIONS,
): Promise<ProjectionRunner> {
  try {
    return await ProjectionRunner.open({ log, readModel: path.join(dir, VIEWS_FILE), projections, retired: RETIRED_RUN_PROJECTIONS, runId });
  } catch (err) {
    if (!(err instanceof ReadModelOfAnotherLogError)) throw err;
    throw new RunMismatchError(
      `${dir} holds this run as it ran on another log (${err.builtFrom}: the read models in ${VIEWS_FILE}); ` +
        `a run on ${log.location} needs a directory of its own: give it another --dir`,
    );
  }
}

export async function runExperiment(opts: RunOptions): Promise<RunOutcome> {
  const { config } = opts;
  const runId = runIdOf(config);
  const dir = opts.dir ?? path.join(config.dir, runId);
  mkdirSync(dir, { recursive: true });
  const location = opts.log ?? path.join(dir, LOG_FILE);
  const log = await openRunLog(location, runId, {
    synchronous: config.log.synchronous,
    ...(opts.credsFile !== undefined ? { credsFile: opts.credsFile } : {}),
  });
  for (const line of log.notices ?? []) opts.onNotice?.(line);
  let views: ProjectionRunner | null = null;
  let snapshots: SqliteSnapshotTable | null = null;
  let backendToClose: PolicyBackend | null = null;
  let sandbox: Sandbox | null = null;
  try {
    // Before anything is written: a directory another log's run left is refused.
    views = await readingDerived(path.join(dir, VIEWS_FILE), dir, () => openRunViews(log, dir, runId));
    if (isNatsLocation(location)) writeFileSync(path.join(dir, LOG_POINTER_FILE), `${JSON.stringify({ location, runId })}\n`);
    sandbox = opts.sandbox ?? (await createSandbox(sandboxOptions(config)));
    const started = await startedRun(log, config, dir);
    // A run that recorded its catalog uses that one, read by hash from the blob store.
    const {
      problems,
      backend: prepared,
      catalogHash,
    } = opts.prepared ??
    (await prepareRun(
      config,
      opts.cacheDir === undefined ? path.join(config.dir, '.cache') : opts.cacheDir,
      sandbox,
      dir,
      { blobs: log.blobs, hash: started?.catalogHash ?? null },
      opts.onBridgeEvent,
    ));
    backendToClose = prepared;
    const backend = opts.testOnlyWrapBackend ? opts.testOnlyWrapBackend(prepared) : prepared;
    if (!started) await recordRunStart(log, config, problems, catalogHash);
    // The actors read the problems from the log's blobs (RunStarted), not from `problems`.
    const env = new RunEnv({ runId, config, blobs: log.blobs, sandbox, backend });
    snapshots = await readingDerived(path.join(dir, SNAPSHOTS_FILE), dir, () => new SqliteSnapshotTable(path.join(dir, SNAPSHOTS_FILE), runId));
    // Executions done, over the whole run: the progress shows them.
    let executions = 0;
    const executionsView = {
      types: ['ProgramExecuted'],
      observe: (e: EventEnvelope) => {
        executions += (e.data as EventData<'ProgramExecuted'>).pairs.length;
      },
    };
    const warmStart = new WarmStartWatch();
    const runtime = new ActorRuntime(log, runId, env, [conductor, solver, adversary, executor, judge, learner] as never, {
      views: [env.view, executionsView, warmStart],
      snapshots: { table: snapshots, every: opts.snapshotEvery ?? DEFAULT_SNAPSHOT_EVERY },
      ...(opts.onRestart ? { onRestart: opts.onRestart } : {}),
      ...(opts.retry ? { retry: opts.retry } : {}),
      ...(opts.scheduler ? { scheduler: opts.scheduler } : {}),
    });
    // A damaged snapshot file or views.db is named with its fix, not a stack trace.
    await readingDerived(path.join(dir, SNAPSHOTS_FILE), dir, () => runtime.start());
    // The live read models: brought up to date at every round's end and at the end of the run.
    const viewsFile = path.join(dir, VIEWS_FILE);
    const live = views;
    await readingDerived(viewsFile, dir, () => live.catchUp());
    let round = 0;
    if (started) await recordResume(log, runId, runtime, views, config.rounds, opts.onResume);
    const progress = (): RunProgress => ({
      round,
      rounds: config.rounds,
      events: runtime.eventsFolded,
      position: Number(runtime.position),
      executions,
      ...(warmStart.current ? { warmStart: warmStart.current } : {}),
    });
    let stopped = false;
    const finished = await runtime.run({
      onStep: async () => {
        const snap = runtime.snapshotOf('conductor');
        const completed = snap ? (snap.context as { completedRound: number }).completedRound : round;
        if (completed !== round) await views!.catchUp();
        round = completed;
        opts.onProgress?.(progress());
        await opts.onStep?.(runtime, progress());
      },
      onIdle: async () => (await opts.onIdle?.(runtime)) ?? false,
      shouldStop: () => (stopped = opts.stopWhen?.(progress()) ?? false),
    });
    const done = finished && !stopped && (await firstEvent(log, runId, 'RunCompleted')) !== undefined;
    if (finished && !stopped && !done) {
      const alive = ACTOR_NAMES.filter((n) => runtime.isAlive(n));
      if (alive.length === ACTOR_NAMES.length)
        throw new Error('the run stopped with no work left before its last round: an actor is waiting on an event that never came');
    }
    await views.catchUp();
    return { runId, dir, finished: done, rows: roundRows(views.state<RoundTableState>('round-table')), isolation: sandbox.isolation };
  } finally {
    snapshots?.close();
    await views?.close();
    await backendToClose?.close?.();
    if (!opts.sandbox) await sandbox?.close();
    await log.close();
  }
}
