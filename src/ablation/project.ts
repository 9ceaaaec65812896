/**
 * Projects one variant's events into its own SQLite file with the read models a variant can
 * change. Written under a temporary name, then renamed: a stored variant file is always whole.
 * Runs in the calling thread or on a piscina thread (./project.worker.mjs): its input and output
 * are plain data.
 */
import { renameSync, rmSync } from 'node:fs';
import type { EventEnvelope } from '../events/envelope.js';
import { MemoryBlobStore } from '../events/blobs.js';
import { ProjectionRunner } from '../projections/runner.js';
import { RUN_PROJECTIONS } from '../projections/run-views.js';
import { roundRows, type RoundRow, type RoundTableState } from '../projections/round-table.js';
import { VariantLog } from './variant-log.js';

/** The read models a variant can change. The executions and the policy versions are the run's
 * own (a variant passes those events through untouched), so they are not projected again. */
export const VARIANT_PROJECTIONS = RUN_PROJECTIONS.filter((p) => p.name !== 'executions' && p.name !== 'policy-versions');

export interface ProjectionJob {
  name: string;
  runId: string;
  file: string;
  events: readonly EventEnvelope[];
  /** Whether to compute the read models' state hashes (a pass over every row). */
  hashes: boolean;
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

export async function projectVariant(job: ProjectionJob): Promise<Projected> {
  const tmp = `${job.file}.tmp-${process.pid}-${job.name}`;
  rmSync(tmp, { force: true });
  // Projections fold events only; they read no blob.
  const log = new VariantLog(`variant:${job.name}`, job.events, new MemoryBlobStore());
  const runner = await ProjectionRunner.replayInto(tmp, { log, projections: VARIANT_PROJECTIONS, runId: job.runId });
  try {
    const out = await summarize(runner, job.hashes);
    await runner.close();
    for (const suffix of ['-wal', '-shm']) rmSync(`${tmp}${suffix}`, { force: true });
    renameSync(tmp, job.file);
    return out;
  } catch (err) {
    await runner.close();
    rmSync(tmp, { force: true });
    throw err;
  }
}
