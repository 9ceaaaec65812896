/** Reading a finished run's log in tests. */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { openRunLog } from '../../src/events/open-log.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import { ProjectionRunner, type RowProjection } from '../../src/projections/runner.js';
import { answerSelectionFromVerdicts, answerSelectionProjection } from '../../src/projections/answer-selection-rows.js';

/** Every event of the log in the run directory `dir`, in log order. */
export async function recordedEvents(dir: string): Promise<EventEnvelope[]> {
  const log = await openSqliteLog(path.join(dir, 'log.db'), { create: false });
  try {
    const out: EventEnvelope[] = [];
    for await (const e of log.read()) out.push(e);
    return out;
  } finally {
    await log.close();
  }
}

/** Every event of run `runId` in the log at `location` (a SQLite file or nats:// URLs, with a
 * credentials file where the servers ask for one), in log order. */
export async function runEvents(location: string, runId: string, credsFile?: string): Promise<EventEnvelope[]> {
  const log = await openRunLog(location, runId, { create: false, ...(credsFile !== undefined ? { credsFile } : {}) });
  try {
    const out: EventEnvelope[] = [];
    for await (const e of log.read({}, { runId })) out.push(e);
    return out;
  } finally {
    await log.close();
  }
}

/** Timings are measurements, not decisions: the only data fields two runs of one config and
 * seed may differ in. */
export const TIMINGS = ['timeMs', 'memoryKb'] as const;

export interface Decision {
  type: string;
  stream: string;
  id: string;
  data: Record<string, unknown>;
}

/** An event as what it decided: type, stream, id and data without timings. */
export function decisionOf(e: EventEnvelope): Decision {
  const data = { ...(e.data as Record<string, unknown>) };
  for (const t of TIMINGS) delete data[t];
  return { type: e.type, stream: e.stream, id: e.id, data };
}

/** The log in run directory `dir` as decisions: equal lists mean the same run, apart from timings.
 * A RunResumed records when a run was stopped and resumed: a timing too, not a decision. */
export async function recordedDecisions(dir: string): Promise<Decision[]> {
  return (await recordedEvents(dir)).filter((e) => e.type !== 'RunResumed').map(decisionOf);
}

/** The blobs with the given hashes, as text, from the log in run directory `dir`. */
export async function recordedBlobs(dir: string, hashes: Iterable<string>): Promise<Map<string, string>> {
  const log = await openSqliteLog(path.join(dir, 'log.db'), { create: false });
  try {
    const out = new Map<string, string>();
    for (const h of hashes) if (!out.has(h)) out.set(h, await log.blobs.getText(h));
    return out;
  } finally {
    await log.close();
  }
}

/**
 * Answer selection of the run in `dir` built twice into fresh files: from the tallies its Judge
 * recorded with ProblemEvaluated, and counted from every request's verdicts (as a log written
 * before the tallies were recorded is). Gives both state hashes, where the first read its tallies
 * from, and the rows of the first.
 */
export async function answerSelectionBothWays(dir: string): Promise<{ recorded: string; fromVerdicts: string; source: string | undefined; scores: string[] }> {
  const log = await openSqliteLog(path.join(dir, 'log.db'), { create: false });
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'answer-selection-'));
  try {
    const build = async (projection: RowProjection, file: string) => {
      const runner = await ProjectionRunner.replayInto(path.join(scratch, file), { log, projections: [projection] });
      try {
        const db = runner.readModel.db;
        const source = (db.prepare('SELECT source FROM answer_selection_source').pluck().get() as string | undefined) ?? undefined;
        const scores = db.prepare('SELECT scores FROM answer_selection ORDER BY rowid').pluck().all() as string[];
        return { hash: await runner.stateHash(projection.name), source, scores };
      } finally {
        await runner.close();
      }
    };
    const recorded = await build(answerSelectionProjection, 'recorded.db');
    const fromVerdicts = await build(answerSelectionFromVerdicts, 'verdicts.db');
    return { recorded: recorded.hash, fromVerdicts: fromVerdicts.hash, source: recorded.source, scores: recorded.scores };
  } finally {
    await log.close();
    rmSync(scratch, { recursive: true, force: true });
  }
}
