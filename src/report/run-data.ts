/**
 * What `crucible runs`, `compare` and `report` show of a run directory, read from its log
 * (runs/<id>/log.db) and its read models (views.db). A run that ended (finished or failed) has
 * its views.db brought up to date in place, the read models built on demand (answer selection)
 * included, which the next reader then only brings up to date; a run that may still be going is
 * replayed into a scratch read model instead, so nothing writes beside its live process.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { EventData } from '../events/catalog.js';
import { openSqliteLog, type SqliteEventLog } from '../events/sqlite/sqlite-log.js';
import { ProjectionRunner, ReadModelOfAnotherLogError } from '../projections/runner.js';
import { RETIRED_RUN_PROJECTIONS, RUN_PROJECTIONS, type RunViewsDb } from '../projections/run-views.js';
import { all, queryBuilder } from '../projections/typed-sql.js';
import { roundRows, type RoundRow, type RoundTableState } from '../projections/round-table.js';
import { roundSelections, type ProblemSelection, type RoundSelection } from '../projections/answer-selection.js';
import { readProblemSelections } from '../projections/answer-selection-rows.js';
import { collectMatrices, type ProblemMatrix, type ReplayedTest } from './matrix.js';
import { VERDICT_EVENT_TYPES } from '../projections/recorded-verdicts.js';
import { readingDerived } from '../projections/damaged-file.js';
import { NotARunError } from './errors.js';

export { NotARunError };

export const LOG_FILE = 'log.db';
export const VIEWS_FILE = 'views.db';

export type RunStatus = 'finished' | 'failed' | 'unfinished';

export interface RunSummary {
  dir: string;
  runId: string;
  /** The config's name. */
  name: string;
  method: string;
  seed: number;
  status: RunStatus;
  /** The reason, for a failed run. */
  failure: string | null;
  /** Rounds the config asks for (null when the recorded config does not say). */
  plannedRounds: number | null;
  rows: RoundRow[];
  selection: RoundSelection[];
  config: unknown;
}

/** The run's read models, typed from their table specs (queries are compiled, run by better-sqlite3). */
const views = queryBuilder<RunViewsDb>();

export interface RewardSample {
  round: number;
  role: string;
  sampleId: string;
  reward: number;
  advantage: number;
}

/** One recorded training step (TrainingStepCompleted) with the samples of its batch (TrainingBatchFormed). */
export interface TrainingStep {
  round: number;
  role: string;
  batchId: string;
  fromVersion: number;
  toVersion: number;
  /** What the trainer reported, as recorded (the catalog policy's and gpu-bridge's keys differ). */
  metrics: Record<string, number>;
  /** The batch's sample ids (empty when no TrainingBatchFormed names the batch: a warm-start step). */
  sampleIds: string[];
  control: 'none' | 'frozen' | 'shuffled';
}

/** TCS: the stage of a round (StageDecided). */
export interface StageRow {
  round: number;
  stage: 1 | 2;
  switched: boolean;
  validityRate: number | null;
}

export interface MistakeBookEntry {
  problemId: string;
  testKey: string;
  testHash: string;
  count: number;
}

export interface RunDetail extends RunSummary {
  problems: ProblemSelection[];
  rewards: RewardSample[];
  mistakeBook: MistakeBookEntry[];
  /** The execution matrix of every problem-round, by problem then round. */
  matrices: ProblemMatrix[];
  steps: TrainingStep[];
  stages: StageRow[];
  /** Mistake Book tests by the number of problem-rounds that replayed them, most first. */
  replayed: ReplayedTest[];
  /** Blob text by hash, for the tests and programs the report shows. */
  texts: Record<string, string>;
}

async function firstOf<T extends 'RunStarted' | 'RunCompleted' | 'RunFailed'>(log: SqliteEventLog, type: T, runId?: string) {
  for await (const e of log.read({ limit: 1 }, runId ? { runId, types: [type] } : { types: [type] })) return e as typeof e & { data: EventData<T> };
  return undefined;
}

/** Opens a run directory read-only (its read models brought up to date, or rebuilt in a scratch
 * file for a run that may still be going) for `f`, and closes it after. */
export async function withRun<T>(dir: string, f: (log: SqliteEventLog, runner: ProjectionRunner, summary: RunSummary) => Promise<T>): Promise<T> {
  const logPath = path.join(dir, LOG_FILE);
  if (!existsSync(logPath)) throw new NotARunError(dir, `no ${LOG_FILE} here: not a crucible run directory`);
  const log = await openSqliteLog(logPath, { create: false, readOnly: true });
  let scratch: string | null = null;
  let runner: ProjectionRunner | null = null;
  try {
    const started = await firstOf(log, 'RunStarted');
    if (!started) throw new NotARunError(dir, 'the log has no RunStarted event: not a crucible run');
    const runId = started.runId;
    const completed = await firstOf(log, 'RunCompleted', runId);
    const failed = completed ? undefined : await firstOf(log, 'RunFailed', runId);
    const status: RunStatus = completed ? 'finished' : failed ? 'failed' : 'unfinished';
    const inScratch = () => path.join((scratch = mkdtempSync(path.join(os.tmpdir(), 'crucible-views-'))), VIEWS_FILE);
    // A damaged views.db is named with its fix (it is rebuilt from the log), not a stack trace.
    const openAt = (file: string) =>
      readingDerived(file, dir, () => ProjectionRunner.open({ log, readModel: file, projections: RUN_PROJECTIONS, retired: RETIRED_RUN_PROJECTIONS, runId }));
    let views = status === 'unfinished' ? inScratch() : path.join(dir, VIEWS_FILE);
    try {
      runner = await openAt(views);
    } catch (err) {
      // Read models the run kept of another log (it ran on JetStream, and its log was exported
      // here): built again from this log, beside them.
      if (!(err instanceof ReadModelOfAnotherLogError) || scratch !== null) throw err;
      views = inScratch();
      runner = await openAt(views);
    }
    const open = runner;
    await readingDerived(views, dir, () => open.catchUp());
    const config = started.data.config as { name?: unknown; rounds?: unknown } | null;
    const problems = readProblemSelections(runner.readModel.db);
    const summary: RunSummary = {
      dir,
      runId,
      name: typeof config?.name === 'string' ? config.name : runId,
      method: started.data.method,
      seed: started.data.seed,
      status,
      failure: failed?.data.reason ?? null,
      plannedRounds: typeof config?.rounds === 'number' ? config.rounds : null,
      rows: roundRows(runner.state<RoundTableState>('round-table')),
      selection: roundSelections(problems),
      config: started.data.config,
    };
    return await f(log, runner, summary);
  } finally {
    await runner?.close();
    await log.close();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  }
}

/** The headline figures of a run (its round table and answer selection per round). */
export function loadRunSummary(dir: string): Promise<RunSummary> {
  return withRun(dir, async (_log, _runner, summary) => summary);
}

/** Everything the HTML report shows. `topTests` bounds the Mistake Book tests listed. */
export function loadRunDetail(dir: string, opts: { topTests?: number } = {}): Promise<RunDetail> {
  return withRun(dir, async (log, runner, summary) => {
    const db = runner.readModel.db;
    const rewards: RewardSample[] = all(
      db,
      views.selectFrom('rewards').select(['round', 'role', 'sample_id', 'reward', 'advantage']).orderBy('round').orderBy('role').orderBy('sample_id'),
    ).map((r) => ({ round: r.round, role: r.role, sampleId: r.sample_id, reward: r.reward, advantage: r.advantage }));
    const { steps, stages } = await readTraining(log, summary.runId);
    const mistakeBook = all(
      db,
      views
        .selectFrom('mistake_book')
        .select(['problem_id', 'test_key', 'test_hash', 'count'])
        .where('blacklisted', '=', 0)
        .orderBy('problem_id')
        .orderBy('test_key'),
    ).map((r) => ({ problemId: r.problem_id, testKey: r.test_key, testHash: r.test_hash, count: r.count }));
    const { matrices, replayed } = await collectMatrices(
      log.read({}, { runId: summary.runId, types: ['SolutionSampled', 'TestsJudged', ...VERDICT_EVENT_TYPES, 'ProblemEvaluated'] }),
    );
    const top = replayed.slice(0, opts.topTests ?? 10);
    const texts: Record<string, string> = {};
    for (const t of top) {
      for (const h of [t.testHash, ...t.failing.map((f) => f.programHash)]) {
        if (!(h in texts)) texts[h] = await log.blobs.getText(h);
      }
    }
    return {
      ...summary,
      problems: readProblemSelections(runner.readModel.db),
      rewards,
      mistakeBook,
      matrices,
      steps,
      stages,
      replayed: top,
      texts,
    };
  });
}

/** The run's training steps, each with its batch, and TCS's stage decisions, from the log. */
async function readTraining(log: SqliteEventLog, runId: string): Promise<{ steps: TrainingStep[]; stages: StageRow[] }> {
  const batches = new Map<string, EventData<'TrainingBatchFormed'>>();
  const steps: TrainingStep[] = [];
  const stages: StageRow[] = [];
  for await (const e of log.read({}, { runId, types: ['TrainingBatchFormed', 'TrainingStepCompleted', 'StageDecided'] })) {
    if (e.type === 'TrainingBatchFormed') {
      const d = e.data as EventData<'TrainingBatchFormed'>;
      batches.set(d.batchId, d);
    } else if (e.type === 'TrainingStepCompleted') {
      const d = e.data as EventData<'TrainingStepCompleted'>;
      const b = batches.get(d.batchId);
      steps.push({
        round: d.round,
        role: d.role,
        batchId: d.batchId,
        fromVersion: d.fromVersion,
        toVersion: d.toVersion,
        metrics: d.metrics,
        sampleIds: b?.sampleIds ?? [],
        control: b?.control ?? 'none',
      });
    } else {
      const d = e.data as EventData<'StageDecided'>;
      stages.push({ round: d.round, stage: d.stage, switched: d.switched, validityRate: d.validityRate });
    }
  }
  return { steps, stages };
}
