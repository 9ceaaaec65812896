/**
 * The envelope every stored event wears, and what a writer hands to `EventLog.append`.
 * Both are zod-validated at the log's edges (on append and on read).
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { Position } from './log.js';

const NonEmpty = z.string().min(1);

/** A stored event. `data` has been upcast to the current version `v` of its type. */
// z.compile: a generated fast path (same results; failures re-run the normal parser for its issues).
export const EventEnvelope = z.compile(
  z.strictObject({
    /** Unique across the log. */
    id: NonEmpty,
    type: NonEmpty,
    /** Schema version of `data`. */
    v: z.int().positive(),
    runId: NonEmpty,
    /** The actor instance or aggregate that wrote it, e.g. "judge/0", "problem/p3". */
    stream: NonEmpty,
    /** Place in the global order (opaque: compare, never add to it). */
    position: z.int().positive(),
    /** The idempotency key of the commit that wrote it. */
    commitId: NonEmpty,
    /** Id of the event that caused this one. */
    causationId: NonEmpty.nullable(),
    /** Id shared by every event of one piece of work (e.g. one problem in one round). */
    correlationId: NonEmpty.nullable(),
    /** Wall time of the append. Informational only: no logic may depend on it. */
    at: NonEmpty,
    data: z.unknown(),
  }),
);
export interface EventEnvelope<T extends string = string, D = unknown> {
  id: string;
  type: T;
  v: number;
  runId: string;
  stream: string;
  position: Position;
  commitId: string;
  causationId: string | null;
  correlationId: string | null;
  at: string;
  data: D;
}

/** What a writer supplies; the log fills in stream, position, commitId, v and the defaults. */
export const NewEvent = z.compile(
  z.strictObject({
    /** Omit to derive a deterministic id from the commit id and the event's index in it. */
    id: NonEmpty.optional(),
    type: NonEmpty,
    runId: NonEmpty,
    causationId: NonEmpty.nullable().optional(),
    correlationId: NonEmpty.nullable().optional(),
    /** ISO wall time; the log uses the current time when omitted. */
    at: z.iso.datetime({ offset: true }).optional(),
    data: z.unknown(),
  }),
);
export interface NewEvent<T extends string = string, D = unknown> {
  id?: string;
  type: T;
  runId: string;
  causationId?: string | null;
  correlationId?: string | null;
  at?: string;
  data: D;
}

/** Deterministic event id for the `index`-th event of a commit: a retried commit gets the
 * same ids, so a consumer that dedups by id stays correct on any backend. Unique with their
 * commit: the SQLite log indexes only the ids appenders give (sqlite-file.ts, format 5). */
export function deriveEventId(commitId: string, index: number): string {
  return `${eventIdPrefix(commitId)}-${index}`;
}

export function eventIdPrefix(commitId: string): string {
  return createHash('sha256').update(commitId).digest('hex').slice(0, 24);
}
