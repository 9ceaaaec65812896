/**
 * Where a run's log is, from what a user typed: a run directory (its log.db, or the log.json a
 * JetStream run leaves there) or a nats:// URL with a run id.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { LOG_FILE, LOG_POINTER_FILE } from '../actors/run.js';
import { isNatsLocation, openRunLog } from '../events/open-log.js';
import { EventLogError } from '../events/errors.js';
import type { EventLog, Position } from '../events/log.js';
import { positionAfterRound } from '../projections/round-position.js';
import { UserError } from './errors.js';

export interface RunLocation {
  /** A SQLite file path or a nats:// URL. */
  location: string;
  /** Known when the place names it (a log.json, or --run). */
  runId: string | null;
  /** The run directory, when given one. */
  dir: string | null;
}

const Pointer = z.strictObject({ location: z.string().min(1), runId: z.string().min(1) });

export function resolveRunLocation(where: string, runId?: string): RunLocation {
  if (isNatsLocation(where)) {
    if (!runId) throw new UserError(`${where}: a JetStream location holds many runs; name one with --run ID`);
    return { location: where, runId, dir: null };
  }
  const file = path.join(where, LOG_FILE);
  if (existsSync(file)) return { location: file, runId: runId ?? null, dir: where };
  const pointer = path.join(where, LOG_POINTER_FILE);
  if (existsSync(pointer)) {
    const parsed = Pointer.safeParse(JSON.parse(readFileSync(pointer, 'utf8')));
    if (!parsed.success) throw new UserError(`${pointer}: not a log pointer (${parsed.error.issues[0]?.message})`);
    return { location: parsed.data.location, runId: runId ?? parsed.data.runId, dir: where };
  }
  throw new UserError(`${where}: no ${LOG_FILE} or ${LOG_POINTER_FILE} here: not a crucible run directory`);
}

/** Opens the recorded log of a run that must exist, read-only (a SQLite file is never written
 * by a command that reads it); a log that cannot be opened is the user's error (a wrong place,
 * a file that is not a log), printed as one line. */
export async function openRecordedLog(where: RunLocation, credsFile?: string): Promise<EventLog> {
  try {
    return await openRunLog(where.location, where.runId ?? '', { create: false, readOnly: true, ...(credsFile !== undefined ? { credsFile } : {}) });
  } catch (err) {
    if (err instanceof EventLogError) throw new UserError(err.message);
    throw err;
  }
}

/** The log position just after round `round` of the run completed (`--round k`). */
export async function roundEnd(log: EventLog, runId: string | undefined, round: number): Promise<Position> {
  const at = await positionAfterRound(log, runId, round);
  if (at === null) throw new UserError(`round ${round} was not completed in this run`);
  return at;
}
