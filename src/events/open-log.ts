/**
 * Opening a log by where it lives: a `nats://` URL (JetStream; one stream per run) or a SQLite
 * file. Callers decide by location, never by asking which backend they got.
 */
import { openJetStreamLog, type JetStreamLogOptions } from './jetstream/jetstream-log.js';
import type { EventLog } from './log.js';
import { readCredentials } from './jetstream/nats-roles.js';
import { LogCredentialsError } from './errors.js';
import { openSqliteLog, type SqliteLogOptions } from './sqlite/sqlite-log.js';

export function isNatsLocation(location: string): boolean {
  return /^nats:\/\//.test(location);
}

/** The servers of a location like "nats://a:4222,nats://b:4223" (or "nats://a:4222,b:4223"). */
export function natsServers(location: string): string[] {
  return location.split(',').map((s) => (s.startsWith('nats://') ? s : `nats://${s}`));
}

/** The JetStream stream and subject prefix holding one run's events (and `<stream>_BLOBS` its blobs). */
export function runStreamNames(runId: string): { stream: string; subjectPrefix: string } {
  const token = runId.replace(/[^A-Za-z0-9_-]/g, '_');
  return { stream: `CRUCIBLE_RUN_${token}`, subjectPrefix: `crucible.run.${token}` };
}

export interface OpenRunLogOptions {
  /** SQLite: durability of each commit. */
  synchronous?: SqliteLogOptions['synchronous'];
  /** Create the log when absent (default true). */
  create?: boolean;
  /** SQLite: open the file read-only (nothing written, no -wal or -shm left beside it). */
  readOnly?: boolean;
  /** JetStream: replicas of streams this call creates. */
  replicas?: number;
  jetstream?: Partial<JetStreamLogOptions>;
  /** JetStream: a role's credentials file written by `crucible nats up` (DIR/<role>.creds.json). */
  credsFile?: string;
}

/** The log of run `runId` at `location`: a nats:// URL, or the path of a SQLite log file. */
export async function openRunLog(location: string, runId: string, opts: OpenRunLogOptions = {}): Promise<EventLog> {
  if (isNatsLocation(location)) {
    return openJetStreamLog({
      servers: natsServers(location),
      ...runStreamNames(runId),
      ...(opts.replicas !== undefined ? { replicas: opts.replicas } : {}),
      ...(opts.create !== undefined ? { create: opts.create } : {}),
      ...(opts.credsFile !== undefined ? { credentials: readCredentials(opts.credsFile) } : {}),
      ...opts.jetstream,
    });
  }
  if (opts.credsFile !== undefined)
    throw new LogCredentialsError(opts.credsFile, `credentials are for a log on JetStream (nats://...), and ${location} is a SQLite file`);
  return openSqliteLog(location, {
    ...(opts.synchronous !== undefined ? { synchronous: opts.synchronous } : {}),
    ...(opts.create !== undefined ? { create: opts.create } : {}),
    ...(opts.readOnly !== undefined ? { readOnly: opts.readOnly } : {}),
  });
}
