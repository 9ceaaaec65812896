/**
 * Projects one variant's events into its own SQLite file with the read models a variant can
 * change. Written under a temporary name, then renamed: a stored variant file is always whole.
 * Read models that several variants build from the same events (answer selection and the
 * Mistake Book, see ./ablate.ts) are projected once into a base file (projectShared), which each of them copies
 * before projecting the rest on top. Runs in the calling thread or on a piscina thread
 * (./project.worker.mjs): its input and output are plain data.
 */
import { copyFileSync, renameSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import Database from 'better-sqlite3';
import type { EventEnvelope } from '../events/envelope.js';
import { MemoryBlobStore } from '../events/blobs.js';
import type { Position } from '../events/log.js';
import { ProjectionRunner } from '../projections/runner.js';
import { ReadModel } from '../projections/readmodel.js';
import { RUN_PROJECTIONS } from '../projections/run-views.js';
import { roundRows, type RoundRow, type RoundTableState } from '../projections/round-table.js';
import { answerSelectionBeside, answerSelectionProjection, readSelectionBasis } from '../projections/answer-selection-rows.js';
import { VariantLog } from './variant-log.js';

/** The read models a variant can change. The policy versions are the run's own (a variant
 * passes those events through untouched), so they are not projected again. */
export const VARIANT_PROJECTIONS = RUN_PROJECTIONS.filter((p) => p.name !== 'policy-versions');

/** The read models variants may share: answer selection and the Mistake Book (which settings
 * reach them: ./ablate.ts). */
export const SHARED_PROJECTIONS = VARIANT_PROJECTIONS.filter((p) => p.name === 'answer-selection' || p.name === 'mistake-book');

export interface ProjectionJob {
  kind: 'variant';
  name: string;
  runId: string;
  file: string;
  events: readonly EventEnvelope[];
  /** Where the variant's log ends (variantHead of the events read: the same for every variant). */
  head: Position;
  /** Whether to compute the read models' state hashes (a pass over every row). */
  hashes: boolean;
  /** A file holding SHARED_PROJECTIONS built at `head` from events equal to this variant's
   * (projectShared): copied, and only the other read models projected (null: all of them). */
  base: string | null;
  /** A file holding SHARED_PROJECTIONS built from events that differ from this variant's only in
   * the Mistake Book pairs of reward requests (see ./ablate.ts): this variant's answer selection
   * takes their generated and held-out tallies (answerSelectionBeside), null: projected whole. */
  answerBasis: string | null;
}

/** The shared read models of a group of variants, built from one of them's events. */
export interface SharedJob {
  kind: 'shared';
  name: string;
  runId: string;
  file: string;
  events: readonly EventEnvelope[];
  head: Position;
}

export interface Projected {
  rows: RoundRow[];
  /** sha256 of each read model (null when not asked for). */
  hashes: Record<string, string> | null;
}

/** Round rows and (when asked) state hashes of an open runner's variant read models. */
export async function summarize(runner: ProjectionRunner, withHashes: boolean): Promise<Projected> {
  let hashes: Record<string, string> | null = null;
  if (withHashes) {
    hashes = {};
    for (const p of VARIANT_PROJECTIONS) hashes[p.name] = await runner.stateHash(p.name);
  }
  return { rows: roundRows(runner.state<RoundTableState>('round-table')), hashes };
}

const removeDb = (file: string) => {
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${file}${suffix}`, { force: true });
};

// Projections fold events only; they read no blob.
const logOf = (job: ProjectionJob | SharedJob) =>
  new VariantLog(`variant:${job.name}`, job.events, new MemoryBlobStore(), job.head, `variants of run ${job.runId}`);

/**
 * Opens a runner on a file being built and catches it up. The file is renamed (or copied) only
 * once closed whole, so while it is built nothing needs to reach the disk: it is written
 * unsynced and synced once when closed (closeBuilt).
 */
async function build(file: string, job: ProjectionJob | SharedJob, projections: typeof VARIANT_PROJECTIONS): Promise<ProjectionRunner> {
  const readModel = ReadModel.open(file, { synchronous: 'off' });
  let runner: ProjectionRunner;
  try {
    runner = await ProjectionRunner.open({ log: logOf(job), readModel, projections, runId: job.runId });
  } catch (err) {
    await readModel.close();
    throw err;
  }
  try {
    // Nor does it need a write-ahead log, which writes every page twice (log, then file at the
    // checkpoint on close): a journal in memory still rolls back a failed batch. The file is
    // in WAL mode again once opened as a read model (ReadModel.open).
    readModel.db.pragma('journal_mode = MEMORY');
    await runner.catchUp();
    return runner;
  } catch (err) {
    await closeRunner(runner);
    throw err;
  }
}

/** Closes a runner and the read model build opened for it. */
async function closeRunner(runner: ProjectionRunner): Promise<void> {
  try {
    await runner.close();
  } finally {
    await runner.readModel.close();
  }
}

/** Closes a built file's runner, in WAL mode as a read model is kept (so opening it later
 * changes nothing in it). */
async function closeBuilt(runner: ProjectionRunner): Promise<void> {
  runner.readModel.db.pragma('journal_mode = WAL');
  await closeRunner(runner);
}

/** Puts a closed file's pages on disk (on the thread pool: the calling thread goes on). */
async function syncFile(file: string): Promise<void> {
  const handle = await open(file, 'r+');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** VARIANT_PROJECTIONS with answer selection counting only the Mistake Book tallies again
 * beside the scores of the file `basis`. */
function besideBasis(basis: string): typeof VARIANT_PROJECTIONS {
  const db = new Database(basis, { readonly: true });
  let scores: Map<string, string>;
  try {
    scores = readSelectionBasis(db);
  } finally {
    db.close();
  }
  return VARIANT_PROJECTIONS.map((p) => (p === answerSelectionProjection ? answerSelectionBeside(scores) : p));
}

/** Builds SHARED_PROJECTIONS into `job.file` (a new file, closed whole: copies of it are read
 * models). Not synced: it is only copied, and each copy is synced once built. Closed in WAL
 * mode, as its copies are opened: a copy in another journal mode would be switched to WAL
 * with the file synced twice. */
export async function projectShared(job: SharedJob): Promise<void> {
  removeDb(job.file);
  try {
    await closeBuilt(await build(job.file, job, SHARED_PROJECTIONS));
  } catch (err) {
    removeDb(job.file);
    throw err;
  }
}

/** A variant's projection whose read models are built and summarized; `stored` settles once
 * the file is on disk under its name (synced, then renamed: a stored variant file is whole). */
export interface Built {
  out: Projected;
  stored: Promise<void>;
}

/** Builds a variant's file; syncing and renaming it go on while the caller builds the next. */
export async function buildVariant(job: ProjectionJob): Promise<Built> {
  const tmp = `${job.file}.tmp-${process.pid}-${job.name}`;
  removeDb(tmp);
  try {
    // The shared read models stand at the head already: catching up projects only the others.
    if (job.base !== null) copyFileSync(job.base, tmp);
    const runner = await build(tmp, job, job.answerBasis === null ? VARIANT_PROJECTIONS : besideBasis(job.answerBasis));
    let out: Projected;
    try {
      out = await summarize(runner, job.hashes);
    } catch (err) {
      await closeRunner(runner);
      throw err;
    }
    await closeBuilt(runner);
    for (const suffix of ['-wal', '-shm']) rmSync(`${tmp}${suffix}`, { force: true });
    const stored = syncFile(tmp).then(
      () => renameSync(tmp, job.file),
      (err: unknown) => {
        removeDb(tmp);
        throw err;
      },
    );
    // Awaited by the caller once every variant is built; handled now so that a failure while
    // it builds the next is not reported as unhandled.
    stored.catch(() => undefined);
    return { out, stored };
  } catch (err) {
    removeDb(tmp);
    throw err;
  }
}

export async function projectVariant(job: ProjectionJob): Promise<Projected> {
  const { out, stored } = await buildVariant(job);
  await stored;
  return out;
}

/** A job of either kind (the piscina worker's entry). */
export function runJob(job: ProjectionJob | SharedJob): Promise<Projected | void> {
  return job.kind === 'shared' ? projectShared(job) : projectVariant(job);
}
