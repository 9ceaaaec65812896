/**
 * Typed failures of the event layer. Each names what is wrong and where (position of a stored
 * event, or index of an event in a commit being appended), so a bad record is found, not guessed.
 */
import type { z } from 'zod';

/** Where an event sits: a stored event has a position; one being appended has an index in its commit. */
export interface EventLocation {
  position?: number;
  /** Index in the commit being appended. */
  index?: number;
  stream?: string;
  commitId?: string;
}

function where(loc: EventLocation): string {
  if (loc.position !== undefined) return `event at position ${loc.position}`;
  if (loc.index !== undefined) {
    const commit = loc.commitId !== undefined ? ` of commit "${loc.commitId}"` : '';
    const stream = loc.stream !== undefined ? ` on stream "${loc.stream}"` : '';
    return `event #${loc.index}${commit}${stream}`;
  }
  return 'event';
}

export class EventLogError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** The stream's last position was not what the writer expected: someone else wrote first. */
export class ConcurrencyError extends EventLogError {
  constructor(
    readonly stream: string,
    readonly expected: number,
    readonly actual: number,
  ) {
    super(`concurrency conflict on stream "${stream}": expected last position ${expected}, actual ${actual}`);
  }
}

export class UnknownEventTypeError extends EventLogError {
  constructor(
    readonly type: string,
    readonly version: number | undefined,
    readonly location: EventLocation,
  ) {
    super(`${where(location)}: unknown event type "${type}"${version !== undefined ? ` (v${version})` : ''}`);
  }
  get position(): number | undefined {
    return this.location.position;
  }
}

/** Stored version is not one the code knows: older than any upcaster, or newer than the code. */
export class UnsupportedEventVersionError extends EventLogError {
  constructor(
    readonly type: string,
    readonly version: number,
    readonly currentVersion: number,
    readonly location: EventLocation,
  ) {
    const why = version > currentVersion ? 'newer than this code knows' : 'has no upcaster';
    super(`${where(location)}: ${type} v${version} is not supported (${why}; current v${currentVersion})`);
  }
  get position(): number | undefined {
    return this.location.position;
  }
}

export interface IssueSummary {
  /** Dotted path inside the event, e.g. "data.sampling.seed". */
  path: string;
  message: string;
}

export function summarizeIssues(issues: readonly z.core.$ZodIssue[], prefix: string): IssueSummary[] {
  return issues.map((i) => ({
    path: [prefix, ...i.path.map((p) => (typeof p === 'number' ? `[${p}]` : String(p)))]
      .filter((s) => s !== '')
      .join('.')
      .replace(/\.\[/g, '['),
    message: i.message,
  }));
}

/** The envelope or the data failed its schema, or a stored row cannot be decoded. */
export class MalformedEventError extends EventLogError {
  constructor(
    readonly type: string | undefined,
    readonly version: number | undefined,
    readonly issues: readonly IssueSummary[],
    readonly location: EventLocation,
  ) {
    const what = type !== undefined ? ` (${type}${version !== undefined ? ` v${version}` : ''})` : '';
    const detail = issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; ');
    super(`${where(location)}${what} is malformed: ${detail}`);
  }
  get position(): number | undefined {
    return this.location.position;
  }
}

/** An explicit event id that the log already holds (from another commit). */
export class DuplicateEventIdError extends EventLogError {
  constructor(
    readonly id: string,
    readonly location: EventLocation,
  ) {
    super(`${where(location)}: event id "${id}" is already in the log`);
  }
}

export class EmptyCommitError extends EventLogError {
  constructor(readonly commitId: string) {
    super(`commit "${commitId}" has no events: a commit must hold at least one`);
  }
}

export class BlobNotFoundError extends EventLogError {
  constructor(readonly hash: string) {
    super(`blob ${hash} is not in the blob store`);
  }
}

export class BlobCorruptError extends EventLogError {
  constructor(readonly hash: string) {
    super(`blob ${hash} is corrupt: its bytes no longer hash to its key`);
  }
}

export class BlobNotTextError extends EventLogError {
  constructor(readonly hash: string) {
    super(`blob ${hash} is not UTF-8 text`);
  }
}

export class InvalidBlobHashError extends EventLogError {
  constructor(readonly hash: string) {
    super(`"${hash}" is not a blob hash (expected 64 lowercase hex characters of sha256)`);
  }
}

/** The file is not a crucible log (not SQLite, another application's database, a read model...). */
export class NotACrucibleLogError extends EventLogError {
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super(`${path} is not a crucible event log: ${reason}`);
  }
}

/** The log was written by a newer crucible; this code will not touch it. */
export class NewerLogFormatError extends EventLogError {
  constructor(
    readonly path: string,
    readonly found: number,
    readonly supported: number,
  ) {
    super(`${path} has log format ${found}, newer than this crucible supports (${supported}); upgrade crucible`);
  }
}

export class LogClosedError extends EventLogError {
  constructor() {
    super('the event log is closed');
  }
}

/** A bad argument to a log call (range, filter, options), named by its path. */
export class InvalidLogArgumentError extends EventLogError {
  constructor(
    readonly call: string,
    readonly issues: readonly IssueSummary[],
  ) {
    super(`${call}: ${issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; ')}`);
  }
}

/** A commit larger than the log accepts: refused before anything is sent or written. */
export class CommitTooLargeError extends EventLogError {
  constructor(
    readonly commitId: string,
    readonly stream: string,
    readonly size: number,
    readonly limit: number,
    readonly unit: 'bytes' | 'events',
  ) {
    super(
      `commit "${commitId}" on stream "${stream}" is ${size} ${unit}, over the log's limit of ${limit} ${unit}: ` +
        (unit === 'bytes' ? 'move large payloads to the blob store (events carry their hash) or split the commit' : 'split the commit'),
    );
  }
}

/** A message the log's stream holds by its sequences is not there: a replica behind answered
 * (it is retried), or someone deleted it. A reader never skips it: a worker that folded past a
 * missing event would wait forever for what it said. */
/** What a reader read at `position` is no longer the log: the message there now is another
 * commit, or none. A cluster that failed over can show a reader messages it then drops (seen
 * with nats-server 2.9 under server kills and partitions); a reader that folded them must read
 * again from a point before them, or it holds events the log does not and misses those it does. */
export class LogRewrittenError extends EventLogError {
  constructor(
    readonly position: number,
    readonly read: string,
    readonly now: string | null,
  ) {
    super(
      `the log changed under this reader at position ${position}: it read commit "${read}" there, and the log now holds ${now === null ? 'no message there' : `commit "${now}"`} (a server that failed over showed messages it then dropped); read it again from the start`,
    );
  }
}

export class MissingLogMessageError extends EventLogError {
  constructor(
    readonly stream: string,
    readonly seq: number,
    readonly lastSeq: number,
  ) {
    super(
      `message ${seq} of the log's stream "${stream}" is missing, though the stream holds messages up to ${lastSeq}: deleted from the stream, or a server behind answered for longer than the log retries`,
    );
  }
}

/** The server that answered holds the log's stream only up to `lastSeq`, short of a position
 * the reader saw (`to`, from the head it was told): after a healed partition the old leader of
 * the stream can answer first for a moment. Retried; never read as "the log ends here", which
 * would move a reader's checkpoint past events it never applied. */
export class LogBehindError extends EventLogError {
  constructor(
    readonly stream: string,
    readonly lastSeq: number,
    readonly wantSeq: number,
  ) {
    super(
      `the server that answered holds the log's stream "${stream}" up to message ${lastSeq}, short of message ${wantSeq} the read was asked to reach: a server behind answered for longer than the log retries, or the position is not of this log`,
    );
  }
}

/** The log's server cannot be reached (down, wrong address). */
export class LogUnavailableError extends EventLogError {
  constructor(
    readonly location: string,
    reason: string,
  ) {
    super(`cannot reach the event log at ${location}: ${reason}`);
  }
}

/** A credentials file for the log that cannot be used: missing, readable by others, malformed. */
export class LogCredentialsError extends EventLogError {
  constructor(
    readonly file: string,
    reason: string,
  ) {
    super(`credentials ${file}: ${reason}`);
  }
}

/** The server refused the connection (no or wrong credentials, or a certificate it does not trust). */
export class LogAuthenticationError extends EventLogError {
  constructor(
    readonly location: string,
    reason: string,
  ) {
    super(`the event log at ${location} refused the connection: ${reason}`);
  }
}

/** The server refused an operation this user's role may not do (publish to another role's stream). */
export class LogPermissionError extends EventLogError {
  constructor(
    readonly role: string,
    readonly operation: string,
    readonly subject: string,
    detail: string,
  ) {
    super(`role ${role} may not ${operation}: the server refused ${subject} (${detail})`);
  }
}

/** The JetStream stream exists but was made by another crucible version or another application. */
export class IncompatibleStreamError extends EventLogError {
  constructor(
    readonly stream: string,
    readonly reason: string,
  ) {
    super(`JetStream stream "${stream}" is not a crucible log this version can use: ${reason}`);
  }
}

/** The server lacks something this backend needs. */
export class UnsupportedServerError extends EventLogError {
  constructor(
    readonly version: string,
    readonly reason: string,
  ) {
    super(`nats-server ${version}: ${reason}`);
  }
}

/** Opening an existing log that is not there (a run id with no stream, a file that does not exist). */
export class LogNotFoundError extends EventLogError {
  constructor(
    readonly location: string,
    readonly what: string,
  ) {
    super(`${location}: ${what} does not exist`);
  }
}
