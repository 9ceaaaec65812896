/**
 * The verdicts a request stands for, rebuilt from the log: those it executed (its own
 * ExecutionCompleted events) and those it reused (pairs answered from an earlier recorded verdict
 * of the same problem, matched by program hash and test hash). This is the one place that knows
 * how verdicts are recorded; if the log records them another way (say one compact event per
 * program and request), only this module changes.
 *
 * Pure and immutable: `observeVerdicts` returns a new state and never touches the old one. The
 * by-pair memory is sharded by the test hash's first two hex digits so an update copies one
 * small shard rather than every verdict of the problem.
 */
import type { EventEnvelope } from '../events/envelope.js';
import type { EventData } from '../events/catalog.js';
import type { Verdict } from '../core/verdicts.js';

/** One verdict as its request names it. */
export interface RequestVerdict {
  programId: string;
  programHash: string;
  testId: string;
  testHash: string;
  verdict: Verdict;
  /** False when the request executed the pair, true when it reused a recorded verdict. */
  reused: boolean;
}

type Pair = EventData<'ExecutionRequested'>['pairs'][number];

interface OpenRequest {
  problemId: string;
  reused: Pair[];
  executed: RequestVerdict[];
}

export interface RecordedVerdicts {
  /** Every request seen: its problem (small: a few requests per problem-round). */
  problemOf: Record<string, string>;
  /** Requests whose verdicts are collected, until `forgetRequests`. */
  open: Record<string, OpenRequest>;
  /** problemId -> shard -> "programHash:testHash" -> the last recorded verdict that is not a
   * sandbox error (a sandbox error is the sandbox's failure: such a pair is executed again). */
  byPair: Record<string, Record<string, Record<string, Verdict>>>;
}

export const emptyRecordedVerdicts = (): RecordedVerdicts => ({ problemOf: {}, open: {}, byPair: {} });

/** The event types `observeVerdicts` reads. */
export const VERDICT_EVENT_TYPES = ['ExecutionRequested', 'ExecutionCompleted'] as const;

const shardOf = (testHash: string) => testHash.slice(0, 2);
const pairKey = (programHash: string, testHash: string) => `${programHash}:${testHash}`;

function lookup(state: RecordedVerdicts, problemId: string, programHash: string, testHash: string): Verdict | undefined {
  return state.byPair[problemId]?.[shardOf(testHash)]?.[pairKey(programHash, testHash)];
}

/**
 * Folds one event. `collect(purpose)` says which requests' verdicts to keep per request; every
 * verdict is remembered by pair whatever its request, since any later request may reuse it.
 */
export function observeVerdicts(state: RecordedVerdicts, event: EventEnvelope, collect: (purpose: string) => boolean): RecordedVerdicts {
  if (event.type === 'ExecutionRequested') {
    const d = event.data as EventData<'ExecutionRequested'>;
    const problemOf = { ...state.problemOf, [d.requestId]: d.problemId };
    if (!collect(d.purpose)) return { ...state, problemOf };
    return { ...state, problemOf, open: { ...state.open, [d.requestId]: { problemId: d.problemId, reused: d.reused, executed: [] } } };
  }
  if (event.type !== 'ExecutionCompleted') return state;
  const d = event.data as EventData<'ExecutionCompleted'>;
  const problemId = state.problemOf[d.requestId];
  // A verdict of a request this log never announced has no problem to be reused in.
  if (problemId === undefined) return state;
  let next = state;
  const req = state.open[d.requestId];
  if (req) {
    const v: RequestVerdict = { programId: d.programId, programHash: d.programHash, testId: d.testId, testHash: d.testHash, verdict: d.verdict, reused: false };
    next = { ...next, open: { ...next.open, [d.requestId]: { ...req, executed: [...req.executed, v] } } };
  }
  if (d.verdict !== 'sandbox_error') {
    const problem = next.byPair[problemId] ?? {};
    const shard = shardOf(d.testHash);
    next = {
      ...next,
      byPair: { ...next.byPair, [problemId]: { ...problem, [shard]: { ...(problem[shard] ?? {}), [pairKey(d.programHash, d.testHash)]: d.verdict } } },
    };
  }
  return next;
}

/** The verdicts of a collected request: those it executed, then those it reused (a reused pair
 * whose verdict is not recorded is left out, as the Judge leaves it out). */
export function verdictsOf(state: RecordedVerdicts, requestId: string): RequestVerdict[] {
  const req = state.open[requestId];
  if (!req) return [];
  const out = req.executed.slice();
  for (const p of req.reused) {
    const verdict = lookup(state, req.problemId, p.programHash, p.testHash);
    if (verdict !== undefined) out.push({ programId: p.programId, programHash: p.programHash, testId: p.testId, testHash: p.testHash, verdict, reused: true });
  }
  return out;
}

/** Drops the per-request lists once they are read (the by-pair memory stays). */
export function forgetRequests(state: RecordedVerdicts, requestIds: readonly string[]): RecordedVerdicts {
  if (!requestIds.some((id) => id in state.open)) return state;
  const open = { ...state.open };
  for (const id of requestIds) delete open[id];
  return { ...state, open };
}
