/**
 * The format of ProgramExecuted, the compact record of one program's results in a request:
 * `compactResults` writes it from per-pair results, `expandResults` and `resultAt` read it back,
 * `pairResultsOf` reads any execution event (older logs: one ExecutionCompleted per pair).
 */
import type { EventEnvelope } from './envelope.js';
import type { EventData, ExecutionPair } from './catalog.js';
import { VERDICT_CODES, verdictOfCode } from '../core/verdicts.js';

type Pair = ExecutionPair;
type Executed = EventData<'ProgramExecuted'>;
/** One executed pair with everything recorded about it (the shape older logs stored per event). */
export type PairResult = EventData<'ExecutionCompleted'>;
/** What the sandbox tells of one pair, before it is named by a request. */
export type ResultFigures = Pick<PairResult, 'verdict' | 'timeMs' | 'memoryKb' | 'outputHash' | 'exceptionType' | 'isolated' | 'cached'>;

/** The compact record of one program's results in a request: `positions[i]` is the request's
 * pair of `results[i]`. */
export function compactResults(
  requestId: string,
  programHash: string,
  positions: readonly number[],
  results: readonly ResultFigures[],
  load: Executed['load'],
): Executed {
  if (positions.length !== results.length || positions.length === 0)
    throw new Error(`compactResults: ${positions.length} positions for ${results.length} results of ${requestId}`);
  const outputs: Record<string, string> = {};
  const exceptions: Record<string, string> = {};
  const cached: number[] = [];
  let verdicts = '';
  results.forEach((r, i) => {
    verdicts += VERDICT_CODES[r.verdict];
    if (r.outputHash !== null) outputs[i] = r.outputHash;
    if (r.exceptionType !== null && r.exceptionType !== '') exceptions[i] = r.exceptionType;
    if (r.cached) cached.push(i);
  });
  return {
    requestId,
    programHash,
    pairs: positions.slice(),
    verdicts,
    timeMs: results.map((r) => r.timeMs),
    memoryKb: results.map((r) => r.memoryKb),
    outputs,
    exceptions,
    cached,
    isolated: results.every((r) => r.isolated),
    load,
  };
}

/** The per-pair results of a compact record, named by its request's pairs. */
export function expandResults(pairs: readonly Pair[], d: Executed): PairResult[] {
  return d.pairs.map((at, i) => {
    const pair = pairs[at];
    if (!pair) throw new Error(`ProgramExecuted of ${d.requestId} names pair ${at}, but the request has ${pairs.length}`);
    return {
      requestId: d.requestId,
      programId: pair.programId,
      programHash: pair.programHash,
      testId: pair.testId,
      testHash: pair.testHash,
      ...resultAt(d, i),
    };
  });
}

/** The figures of a ProgramExecuted's `i`-th result, as its columns hold them. */
export function resultAt(d: Executed, i: number): ResultFigures {
  return {
    verdict: verdictOfCode(d.verdicts[i]!),
    timeMs: d.timeMs[i]!,
    memoryKb: d.memoryKb[i]!,
    outputHash: d.outputs[i] ?? null,
    exceptionType: d.exceptions[i] ?? null,
    isolated: d.isolated,
    cached: d.cached.includes(i),
  };
}

/**
 * Per-pair results of any execution event: a ProgramExecuted (named by `pairsOf(requestId)`,
 * the pairs of its ExecutionRequested) or an older ExecutionCompleted; [] for other events and
 * for a request this log never announced.
 */
export function pairResultsOf(event: EventEnvelope, pairsOf: (requestId: string) => readonly Pair[] | undefined): PairResult[] {
  if (event.type === 'ExecutionCompleted') return [event.data as PairResult];
  if (event.type !== 'ProgramExecuted') return [];
  const d = event.data as Executed;
  const pairs = pairsOf(d.requestId);
  return pairs ? expandResults(pairs, d) : [];
}
