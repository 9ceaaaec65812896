/** Reading a finished run's log in tests. */
import path from 'node:path';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { openRunLog } from '../../src/events/open-log.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';

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
