/**
 * The verdicts a request stands for, rebuilt from the log: those it executed (its own
 * ProgramExecuted events, one per program hash, whose results name the request's pairs by
 * position; or, in older logs, one ExecutionCompleted per pair) and those it reused (pairs
 * answered from an earlier recorded verdict of the same problem, matched by program hash and
 * test hash). The compact event's format is the events' (`events/program-executed.ts`).
 *
 * Pure and immutable: `observeVerdicts` returns a new state and never touches the old one. The
 * by-pair memory is kept per program so a program's results copy that program's verdicts
 * rather than every verdict of the problem.
 */
import type { EventEnvelope } from '../events/envelope.js';
import { requestPairs, requestSize, reusedPairs, type EventData, type ExecutionPair } from '../events/catalog.js';
import type { Verdict } from '../core/verdicts.js';
import { mergeLoad, type ModuleLoad } from '../core/module-load.js';
import { expandResults, pairResultsOf, type PairResult } from '../events/program-executed.js';

type Pair = ExecutionPair;
type Executed = EventData<'ProgramExecuted'>;

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

interface OpenRequest {
  problemId: string;
  reused: Pair[];
  /** By the pair's position in the request. */
  executed: (RequestVerdict | null)[];
}

export interface RecordedVerdicts {
  /** Every request seen: its problem. Per-request maps are sharded by a hash of the request id
   * (see Sharded) so an update copies one small shard, not every request of the run. */
  problemOf: Sharded<string>;
  /** Requests whose executed results are still to come: their pairs (results name them by
   * position) and how many results are missing. */
  awaiting: Sharded<{ pairs: Pair[]; left: number }>;
  /** Requests whose verdicts are collected, until `forgetRequests`. */
  open: Sharded<OpenRequest>;
  /** problemId -> programHash -> testHash -> the last recorded verdict that is not a sandbox
   * error (a sandbox error is the sandbox's failure: such a pair is executed again). A
   * program's results (one ProgramExecuted) copy that program's verdicts only. */
  byPair: Record<string, Record<string, Record<string, Verdict>>>;
  /** problemId -> programHash -> what the recorded executions tell of the program's module body. */
  loads: Record<string, Record<string, ModuleLoad>>;
}

/** shard -> sub-shard -> requestId -> value: an update copies 16 + 16 keys and one small
 * sub-shard, however many requests the run has seen. */
export type Sharded<V> = Record<string, Record<string, Record<string, V>>>;

function shardOfId(id: string): number {
  let h = 0;
  for (let i = 0; i < id.length; i++) h = (h * 31 + id.charCodeAt(i)) & 0xff;
  return h;
}
const HEX = '0123456789abcdef';
const getIn = <V>(m: Sharded<V>, id: string): V | undefined => {
  const h = shardOfId(id);
  return m[HEX[h >> 4]!]?.[HEX[h & 15]!]?.[id];
};
function setIn<V>(m: Sharded<V>, id: string, value: V | undefined): Sharded<V> {
  const h = shardOfId(id);
  const hi = HEX[h >> 4]!;
  const lo = HEX[h & 15]!;
  const outer = { ...(m[hi] ?? {}) };
  const shard = { ...(outer[lo] ?? {}) };
  if (value === undefined) delete shard[id];
  else shard[id] = value;
  outer[lo] = shard;
  // Emptied shards go: maps of requests in flight stay as small as the work in flight.
  if (isEmpty(shard)) delete outer[lo];
  const next = { ...m, [hi]: outer };
  if (isEmpty(outer)) delete next[hi];
  return next;
}
function isEmpty(o: object): boolean {
  for (const _ in o) return false;
  return true;
}

export const emptyRecordedVerdicts = (): RecordedVerdicts => ({ problemOf: {}, awaiting: {}, open: {}, byPair: {}, loads: {} });

/** The event types `observeVerdicts` reads. */
export const VERDICT_EVENT_TYPES = ['ExecutionRequested', 'ProgramExecuted', 'ExecutionCompleted'] as const;

function lookup(state: RecordedVerdicts, problemId: string, programHash: string, testHash: string): Verdict | undefined {
  return state.byPair[problemId]?.[programHash]?.[testHash];
}

/**
 * Folds one event. `collect(purpose)` says which requests' verdicts to keep per request; every
 * verdict is remembered by pair whatever its request, since any later request may reuse it.
 */
export function observeVerdicts(state: RecordedVerdicts, event: EventEnvelope, collect: (purpose: string) => boolean): RecordedVerdicts {
  if (event.type === 'ExecutionRequested') {
    const d = event.data as EventData<'ExecutionRequested'>;
    const problemOf = setIn(state.problemOf, d.requestId, d.problemId);
    const awaiting = d.pairs.length > 0 ? setIn(state.awaiting, d.requestId, { pairs: requestPairs(d), left: requestSize(d) }) : state.awaiting;
    if (!collect(d.purpose)) return { ...state, problemOf, awaiting };
    return { ...state, problemOf, awaiting, open: setIn(state.open, d.requestId, { problemId: d.problemId, reused: reusedPairs(d), executed: [] }) };
  }
  if (event.type !== 'ExecutionCompleted' && event.type !== 'ProgramExecuted') return state;
  const requestId = (event.data as { requestId: string }).requestId;
  const problemId = getIn(state.problemOf, requestId);
  // A verdict of a request this log never announced has no problem to be reused in.
  if (problemId === undefined) return state;
  const results = pairResultsOf(event, (id) => getIn(state.awaiting, id)?.pairs);
  let next = state;
  if (event.type === 'ProgramExecuted') {
    const wait = getIn(state.awaiting, requestId);
    if (wait) {
      const left = wait.left - results.length;
      next = { ...next, awaiting: setIn(state.awaiting, requestId, left > 0 ? { ...wait, left } : undefined) };
    }
    const d = event.data as Executed;
    const known = next.loads[problemId]?.[d.programHash];
    const load = mergeLoad(known, d.load);
    if (load !== known) next = { ...next, loads: { ...next.loads, [problemId]: { ...(next.loads[problemId] ?? {}), [d.programHash]: load } } };
  }
  const req = getIn(state.open, requestId);
  if (req) {
    // Kept in request order: a compact result sits at its pair's position (programs' events
    // interleave there); older per-pair events came in request order already.
    const executed = req.executed.slice();
    const at = event.type === 'ProgramExecuted' ? (event.data as Executed).pairs : null;
    results.forEach((d, i) => {
      const v: RequestVerdict = {
        programId: d.programId,
        programHash: d.programHash,
        testId: d.testId,
        testHash: d.testHash,
        verdict: d.verdict,
        reused: false,
      };
      if (at) executed[at[i]!] = v;
      else executed.push(v);
    });
    next = { ...next, open: setIn(next.open, requestId, { ...req, executed }) };
  }
  const kept = results.filter((d) => d.verdict !== 'sandbox_error');
  if (kept.length > 0) {
    const problem = { ...(next.byPair[problemId] ?? {}) };
    const copied = new Set<string>();
    for (const d of kept) {
      if (!copied.has(d.programHash)) {
        problem[d.programHash] = { ...(problem[d.programHash] ?? {}) };
        copied.add(d.programHash);
      }
      problem[d.programHash]![d.testHash] = d.verdict;
    }
    next = { ...next, byPair: { ...next.byPair, [problemId]: problem } };
  }
  return next;
}

/** The verdicts of a collected request: those it executed, then those it reused (a reused pair
 * whose verdict is not recorded is left out, as the Judge leaves it out). */
export function verdictsOf(state: RecordedVerdicts, requestId: string): RequestVerdict[] {
  const req = getIn(state.open, requestId);
  if (!req) return [];
  // Positions not (yet) answered are holes, or null once the state went through JSON.
  const out = req.executed.filter((v): v is RequestVerdict => v !== null && v !== undefined);
  for (const p of req.reused) {
    const verdict = lookup(state, req.problemId, p.programHash, p.testHash);
    if (verdict !== undefined) out.push({ programId: p.programId, programHash: p.programHash, testId: p.testId, testHash: p.testHash, verdict, reused: true });
  }
  return out;
}

/** What the recorded executions of a program in a problem tell of its module body (as the
 * Judge's index answers it). */
export function loadOf(state: RecordedVerdicts, problemId: string, programHash: string): ModuleLoad {
  return state.loads[problemId]?.[programHash] ?? 'unknown';
}

/** Drops the per-request lists once they are read (the by-pair memory stays). */
export function forgetRequests(state: RecordedVerdicts, requestIds: readonly string[]): RecordedVerdicts {
  let open = state.open;
  for (const id of requestIds) if (getIn(open, id) !== undefined) open = setIn(open, id, undefined);
  return open === state.open ? state : { ...state, open };
}

/** Every per-pair result of a sequence of events in log order (both recorded shapes). */
export function allPairResults(events: Iterable<EventEnvelope>): PairResult[] {
  const pairs = new Map<string, Pair[]>();
  const out: PairResult[] = [];
  for (const e of events) {
    if (e.type === 'ExecutionRequested') {
      const d = e.data as EventData<'ExecutionRequested'>;
      pairs.set(d.requestId, requestPairs(d));
    } else out.push(...pairResultsOf(e, (id) => pairs.get(id)));
  }
  return out;
}
