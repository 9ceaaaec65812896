/**
 * What every backend does to a commit before storing it, and to a stored event when reading it:
 * validate and encode (ids derived from the commit id, size limits checked before anything is
 * sent), then decode (upcast, validate) with the event's position named in any error.
 */
import { crc32 } from 'node:zlib';
import { EventEnvelope, NewEvent, eventIdPrefix } from './envelope.js';
import { CommitTooLargeError, DuplicateEventIdError, EmptyCommitError, MalformedEventError, summarizeIssues } from './errors.js';
import type { Position, ReadFilter } from './log.js';
import type { EventCodec } from './registry.js';

/** One event as stored: `data` is its JSON text at version `v`. */
export interface StoredEvent {
  id: string;
  type: string;
  v: number;
  runId: string;
  causationId: string | null;
  correlationId: string | null;
  at: string;
  data: string;
}

export interface EncodedCommit {
  commitId: string;
  stream: string;
  events: StoredEvent[];
  /** Bytes of the events' encoded text (what the limit is checked against). */
  bytes: number;
  /** Per event, whether its id is the one derived from the commit id (not given by the appender). */
  derivedIds: boolean[];
}

export interface CommitLimits {
  maxCommitBytes: number;
  maxCommitEvents: number;
}

/** Rough per-event overhead of the stored form beyond the data (ids, type, times). */
function sizeOf(e: StoredEvent): number {
  return (
    Buffer.byteLength(e.data) + e.id.length + e.type.length + e.runId.length + e.at.length + (e.causationId?.length ?? 0) + (e.correlationId?.length ?? 0) + 96
  );
}

/** The form of deriveEventId's ids (envelope.ts): 24 hex digits of the commit id's hash, the index. */
const DERIVED_ID = /^[0-9a-f]{24}-(0|[1-9][0-9]*)$/;

export function encodeCommit(registry: EventCodec, stream: string, events: readonly NewEvent[], commitId: string, limits: CommitLimits): EncodedCommit {
  if (!Array.isArray(events) || events.length === 0) throw new EmptyCommitError(commitId);
  if (events.length > limits.maxCommitEvents) {
    throw new CommitTooLargeError(commitId, stream, events.length, limits.maxCommitEvents, 'events');
  }
  const now = new Date().toISOString();
  const prefix = eventIdPrefix(commitId);
  const out: StoredEvent[] = new Array(events.length);
  const seen = new Set<string>();
  const derivedIds: boolean[] = new Array(events.length);
  let bytes = 0;
  for (let index = 0; index < events.length; index++) {
    const e = events[index]!;
    const loc = { index, stream, commitId };
    const parsed = NewEvent.safeParse(e);
    if (!parsed.success) {
      const type = typeof (e as { type?: unknown } | null)?.type === 'string' ? (e as { type: string }).type : undefined;
      throw new MalformedEventError(type, undefined, summarizeIssues(parsed.error.issues, ''), loc);
    }
    const ev = parsed.data;
    const { v, data } = registry.encode(ev.type, ev.data, loc);
    let json: string | undefined;
    try {
      json = JSON.stringify(registry.toStored ? registry.toStored(ev.type, data) : data);
    } catch (err) {
      throw new MalformedEventError(ev.type, v, [{ path: 'data', message: `not JSON-serializable (${(err as Error).message})` }], loc);
    }
    if (json === undefined) throw new MalformedEventError(ev.type, v, [{ path: 'data', message: 'not JSON-serializable' }], loc);
    const derived = `${prefix}-${index}`;
    if (ev.id !== undefined && ev.id !== derived && DERIVED_ID.test(ev.id)) {
      throw new MalformedEventError(
        ev.type,
        v,
        [
          {
            path: 'id',
            message: `has the form of the ids derived from a commit's id (${derived} here), but is not this event's: ids of that form are the log's`,
          },
        ],
        loc,
      );
    }
    const stored: StoredEvent = {
      id: ev.id ?? derived,
      type: ev.type,
      v,
      runId: ev.runId,
      causationId: ev.causationId ?? null,
      correlationId: ev.correlationId ?? null,
      at: ev.at ?? now,
      data: json,
    };
    derivedIds[index] = stored.id === derived;
    if (seen.has(stored.id)) throw new DuplicateEventIdError(stored.id, loc);
    seen.add(stored.id);
    bytes += sizeOf(stored);
    out[index] = stored;
  }
  if (bytes > limits.maxCommitBytes) throw new CommitTooLargeError(commitId, stream, bytes, limits.maxCommitBytes, 'bytes');
  return { commitId, stream, events: out, bytes, derivedIds };
}

/**
 * A checksum of a stored row as this code wrote it (every column but the position): CRC-32 (zlib,
 * native) over the envelope's fields joined by a separator no field holds, then over the data.
 * It is not a defence against anyone; it tells a row this code validated on append from one
 * changed since (a disk, a hand edit, another program), so that reads may skip validating the
 * former.
 */
export function rowChecksum(e: StoredEvent, stream: string, commitId: string, dataBytes?: Uint8Array): number {
  const envelope = `${e.id}\u001f${commitId}\u001f${stream}\u001f${e.type}\u001f${e.v}\u001f${e.runId}\u001f${e.causationId ?? '\u0000'}\u001f${e.correlationId ?? '\u0000'}\u001f${e.at}`;
  // The data's UTF-8 bytes, when the reader has them, spare converting the text back to bytes.
  return crc32(dataBytes ?? e.data, crc32(envelope));
}

const MARK_UNIT = 2 ** 32;

/** What a row stores: its schema's mark (0 when there is none) above its 32-bit checksum. */
export function storedSum(registry: EventCodec, e: StoredEvent, stream: string, commitId: string): number {
  return (registry.schemaMark?.(e.type) ?? 0) * MARK_UNIT + rowChecksum(e, stream, commitId);
}

/**
 * Decodes a stored row that carries a checksum. A row whose checksum matches, stored at its
 * type's current version under the same schema mark as this reader's registry, was validated
 * against this very schema when it was appended: its data is parsed and trusted (the hot path
 * of replays). Any other row takes the full path (upcast, validate); a row whose checksum does
 * not match is reported with its position even when it would validate. `dataBytes`: the UTF-8
 * bytes of `e.data`, when the reader has them.
 */
export function decodeChecked(
  registry: EventCodec,
  e: StoredEvent,
  sum: number | null,
  position: Position,
  stream: string,
  commitId: string,
  dataBytes?: Uint8Array,
): EventEnvelope {
  if (sum === null) return decodeStored(registry, e, position, stream, commitId);
  if (rowChecksum(e, stream, commitId, dataBytes) !== sum % MARK_UNIT) {
    // The full path first: its error (bad JSON, a bad field) says more than the checksum's.
    decodeStored(registry, e, position, stream, commitId);
    throw new MalformedEventError(e.type, e.v, [{ path: '', message: 'the stored row does not match its checksum (changed after it was written)' }], {
      position,
    });
  }
  const mark = Math.floor(sum / MARK_UNIT);
  if (mark === 0 || mark !== registry.schemaMark?.(e.type) || registry.currentVersion(e.type) !== e.v) {
    return decodeStored(registry, e, position, stream, commitId);
  }
  let data: unknown;
  try {
    data = JSON.parse(e.data);
  } catch {
    throw new MalformedEventError(e.type, e.v, [{ path: 'data', message: 'stored data is not valid JSON' }], { position });
  }
  if (registry.fromStored) data = registry.fromStored(e.type, data, { position });
  return {
    id: e.id,
    type: e.type,
    v: e.v,
    runId: e.runId,
    stream,
    position,
    commitId,
    causationId: e.causationId,
    correlationId: e.correlationId,
    at: e.at,
    data,
  };
}

/** Decodes a stored event at `position`: upcast to the current version and validated. */
export function decodeStored(registry: EventCodec, e: StoredEvent, position: Position, stream: string, commitId: string): EventEnvelope {
  let raw: unknown;
  try {
    raw = JSON.parse(e.data);
  } catch {
    throw new MalformedEventError(e.type, e.v, [{ path: 'data', message: 'stored data is not valid JSON' }], { position });
  }
  return decodeParsed(registry, e, raw, position, stream, commitId);
}

/** The same, for a backend that stores the data already parsed (inside a commit's JSON). */
export function decodeParsed(
  registry: EventCodec,
  e: Omit<StoredEvent, 'data'>,
  raw: unknown,
  position: Position,
  stream: string,
  commitId: string,
): EventEnvelope {
  const loc = { position };
  const { v, data } = registry.decode(e.type, e.v, raw, loc);
  const envelope: EventEnvelope = {
    id: e.id,
    type: e.type,
    v,
    runId: e.runId,
    stream,
    position,
    commitId,
    causationId: e.causationId,
    correlationId: e.correlationId,
    at: e.at,
    data,
  };
  const checked = EventEnvelope.safeParse(envelope);
  if (!checked.success) throw new MalformedEventError(e.type, e.v, summarizeIssues(checked.error.issues, ''), loc);
  return envelope;
}

/** Whether a stored event of `stream` passes a read filter (the same rule on every backend). */
export function matchesFilter(filter: ReadFilter, stream: string, type: string, runId: string): boolean {
  if (filter.runId !== undefined && filter.runId !== runId) return false;
  if (filter.types !== undefined && !filter.types.includes(type)) return false;
  if (filter.streams !== undefined && !filter.streams.includes(stream)) return false;
  if (filter.streamPrefix !== undefined && !stream.startsWith(filter.streamPrefix)) return false;
  return true;
}
