/**
 * Positions for backends that number whole commits (JetStream's message sequence, the memory
 * log's commit counter): event i of commit number s sits at s * 2^16 + i, and the head after
 * commit s is s * 2^16 + (2^16 - 1), after every event of s and before any of s + 1. Callers
 * see only opaque positions (see log.ts); 2^37 commits fit in a safe integer.
 */
import { MAX_COMMIT_EVENTS, ORIGIN, type Position } from './log.js';

const SPAN = MAX_COMMIT_EVENTS + 1; // 65 536

export function eventPosition(seq: number, index: number): Position {
  return (seq * SPAN + index) as Position;
}

export function headPosition(seq: number): Position {
  return seq === 0 ? ORIGIN : ((seq * SPAN + SPAN - 1) as Position);
}

/** The commit number a position belongs to (0 for ORIGIN). */
export function seqOf(position: Position): number {
  return Math.floor(position / SPAN);
}

/** Index of the event inside its commit. */
export function indexOf(position: Position): number {
  return position % SPAN;
}

/** The first commit number that can hold an event after `after`. */
export function firstSeqAfter(after: Position): number {
  if (after === ORIGIN) return 1;
  return indexOf(after) === MAX_COMMIT_EVENTS ? seqOf(after) + 1 : seqOf(after);
}
