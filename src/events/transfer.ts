/**
 * Copying a run from one log to another (JetStream <-> SQLite), blobs included: blobs first
 * (stored before the events that name them), then every commit of the run in order under its
 * own commit id, with its events' ids, causation and times. Copying again is harmless: each
 * commit comes back as a duplicate (within the target's dedup window).
 */
import { copyBlobs, runBlobHashes } from './blobs.js';
import type { EventEnvelope, NewEvent } from './envelope.js';
import type { EventLog } from './log.js';

export interface CopyReport {
  runId: string;
  commits: number;
  /** Commits the target already held. */
  duplicates: number;
  events: number;
  blobs: number;
}

/** The run a log holds (the first RunStarted's run), or null when it holds none. */
export async function runIdOfLog(log: EventLog): Promise<string | null> {
  for await (const e of log.read({ limit: 1 }, { types: ['RunStarted'] })) return e.runId;
  return null;
}

function asNew(e: EventEnvelope): NewEvent {
  return { id: e.id, type: e.type, runId: e.runId, causationId: e.causationId, correlationId: e.correlationId, at: e.at, data: e.data };
}

export async function copyRun(from: EventLog, to: EventLog, runId: string): Promise<CopyReport> {
  const report: CopyReport = { runId, commits: 0, duplicates: 0, events: 0, blobs: 0 };
  const hashes = await runBlobHashes(from.read({}, { runId }), from.blobs);
  report.blobs = await copyBlobs(from.blobs, to.blobs, hashes);
  let pending: EventEnvelope[] = [];
  const flush = async () => {
    if (pending.length === 0) return;
    const first = pending[0]!;
    const r = await to.append(first.stream, pending.map(asNew), { commitId: first.commitId });
    report.commits++;
    if (r.duplicate) report.duplicates++;
    report.events += pending.length;
    pending = [];
  };
  // A commit's events are contiguous in every backend's order.
  for await (const e of from.read({}, { runId })) {
    if (pending.length > 0 && pending[0]!.commitId !== e.commitId) await flush();
    pending.push(e);
  }
  await flush();
  return report;
}
