/**
 * The Executor runs (program, test) pairs in the sandbox and records, per request and program
 * hash, one compact ProgramExecuted event. It groups a request's pairs by program so that the
 * sandbox runs many tests per program in one call; the tests it receives already carry the
 * oracle outputs the Judge chose. The program's load outcome (did its module body run?) comes
 * from the failure phases the sandbox reports, so no separate probe runs.
 */
import { assign, setup } from 'xstate';
import { z } from 'zod';
import type { SnapshotFrom } from 'xstate';
import { withoutKey, type ActorDefinition, type LogEvent } from './runtime.js';
import type { RunEnv } from './env.js';
import { dataOf } from './events.js';
import type { TestCase } from '../core/problem.js';
import { sha256Hex } from '../events/blobs.js';
import { catalog, requestPairs, requestSize, type EventData, type ExecutionPair } from '../events/catalog.js';
import type { EventEnvelope, NewEvent } from '../events/envelope.js';
import { compactResults, resultAt, type PairResult, type ResultFigures } from '../events/program-executed.js';
import { mergeLoad, type ModuleLoad } from '../core/module-load.js';
import { VERDICT_CODES } from '../core/verdicts.js';
import type { SideReader, SideRows } from './snapshots.js';
import { PairRows } from './pair-rows.js';
import { referenceProbeProgram } from './reference-probe.js';
import { moduleLoadOfResults } from '../core/module-load.js';

const SANDBOX_ERROR = VERDICT_CODES.sandbox_error;

type Request = EventData<'ExecutionRequested'>;
type Pair = ExecutionPair;

/** Its machine context, which a snapshot stores (see snapshot-schema.ts): the requests in
 * flight, as their events hold them, each keyed by its request id. */
export const ExecutorContext = z.strictObject({
  requests: z.array(catalog.specs.ExecutionRequested.schema.safeExtend({ key: z.string() })),
});
export type ExecutorContext = z.infer<typeof ExecutorContext>;

export const executorMachine = setup({
  types: { context: {} as ExecutorContext, events: {} as LogEvent },
}).createMachine({
  id: 'executor',
  context: { requests: [] },
  on: {
    ExecutionRequested: {
      actions: assign(({ context, event }) => {
        const d = dataOf(event.envelope, 'ExecutionRequested');
        if (requestSize(d) === 0) return {};
        return { requests: [...context.requests, { ...d, key: d.requestId }] };
      }),
    },
    // A request's results are one commit: its first result event closes it.
    ProgramExecuted: {
      actions: assign(({ context, event }) => ({ requests: withoutKey(context.requests, dataOf(event.envelope, 'ProgramExecuted').requestId) })),
    },
    ExecutionCompleted: {
      actions: assign(({ context, event }) => ({ requests: withoutKey(context.requests, dataOf(event.envelope, 'ExecutionCompleted').requestId) })),
    },
  },
});

export type ExecutorEffect = ExecutorContext['requests'][number];

/** The Executor's side index (ExecutionCache) as its snapshot body holds it: the number of its
 * next record and the requests whose results are still to come. */
export const ExecutionCacheData = z.strictObject({
  seq: z.int().nonnegative(),
  awaiting: z.array(z.strictObject({ request: catalog.specs.ExecutionRequested.schema, left: z.int() })),
});
export type ExecutionCacheData = z.infer<typeof ExecutionCacheData>;

/** One recorded ProgramExecuted (or an older per-pair ExecutionCompleted, as a record of one
 * result) with the test hash of each of its results: a result is read from it only when asked
 * for, so folding a result costs a map entry, not an object. */
interface Recorded {
  d: EventData<'ProgramExecuted'>;
  /** Result index by test hash (a later result of the same test in the record wins). */
  at: Map<string, number>;
  /** Its number among the cache's records, in fold order. */
  seq: number;
}

/** The Executor's results have no scope: a (program, test) pair's result is the same for every problem. */
const ANY = '';
const figuresOf = ({ d, at }: Recorded, testHash: string) => resultAt(d, at.get(testHash)!);

/** Results already recorded, by (program, test), and each program's load outcome: the same
 * pair is never run twice in a run. Rebuilt by folding the log, so a restarted Executor has
 * the same cache.
 *
 * The results and load outcomes grow with the whole run: a snapshot keeps them as side rows, a
 * row per pair (see PairRows), and a cache restored from a snapshot reads the row of each pair it
 * is asked about; it holds what it folded since the last save. The snapshot body holds the
 * requests in flight. */
export class ExecutionCache {
  readonly #results: PairRows<Recorded>;
  /** Requests whose results are still to come: their stored pair lists (results name pairs by
   * position) and how many results are missing. */
  readonly #awaiting = new Map<string, { request: Request; left: number }>();
  /** Number of the next record. */
  #seq = 0;

  constructor(side: SideReader | null = null, seq = 0) {
    this.#results = new PairRows(side, figuresOf);
    this.#seq = seq;
  }

  observe(envelope: EventEnvelope): void {
    if (envelope.type === 'ExecutionRequested') {
      const d = envelope.data as Request;
      if (d.pairs.length > 0) this.#awaiting.set(d.requestId, { request: d, left: requestSize(d) });
      return;
    }
    if (envelope.type === 'ExecutionCompleted') {
      const r = envelope.data as PairResult;
      this.#record(envelope.position, r.programHash, compactResults(r.requestId, r.programHash, [0], [r], 'unknown'), [r.testHash]);
      return;
    }
    if (envelope.type !== 'ProgramExecuted') return;
    const d = envelope.data as EventData<'ProgramExecuted'>;
    this.#results.recordLoad(envelope.position, ANY, d.programHash, d.load);
    const wait = this.#awaiting.get(d.requestId);
    // Results of a request this log never announced name no pairs: nothing to remember.
    if (!wait) return;
    const { tests, pairs } = wait.request;
    const testHashes = d.pairs.map((at) => tests[pairs[2 * at + 1]!]!.testHash);
    this.#record(envelope.position, d.programHash, d, testHashes);
    if ((wait.left -= d.pairs.length) <= 0) this.#awaiting.delete(d.requestId);
  }

  #record(position: number, programHash: string, d: EventData<'ProgramExecuted'>, testHashes: readonly string[]): void {
    const at = new Map<string, number>();
    // sandbox_error is the sandbox's failure, not the program's: worth running again.
    testHashes.forEach((h, i) => {
      if (d.verdicts[i] !== SANDBOX_ERROR) at.set(h, i);
    });
    if (at.size === 0) return;
    const record: Recorded = { d, at, seq: this.#seq++ };
    for (const h of at.keys()) this.#results.record(position, ANY, programHash, h, record);
  }

  /** The newest result of a pair: folded here, else as the snapshot's side rows hold it. */
  get(programHash: string, testHash: string): ResultFigures | undefined {
    return this.#results.get(ANY, programHash, testHash);
  }
  /** Reads the results of these pairs in one batch, for the `get` calls that follow (see
   * PairRows.prefetch). */
  prefetch(pairs: readonly { programHash: string; testHash: string }[]): void {
    this.#results.prefetch(ANY, pairs);
  }
  /** What is known of the program's module body; unknown when nothing recorded told. */
  load(programHash: string): ModuleLoad {
    return this.#results.load(ANY, programHash) ?? 'unknown';
  }
  /** For actor snapshots: the requests in flight and the number of the next record (see
   * ExecutionCacheData); the results and load outcomes go to side rows (sideRows). */
  serialize(): ExecutionCacheData {
    return {
      seq: this.#seq,
      awaiting: [...this.#awaiting].map(([, v]) => ({ request: v.request, left: v.left })),
    };
  }
  static restore(d: ExecutionCacheData, side: SideReader): ExecutionCache {
    const cache = new ExecutionCache(side, d.seq);
    for (const { request, left } of d.awaiting) cache.#awaiting.set(request.requestId, { request, left });
    return cache;
  }

  /** The results and load outcomes added since the last saved snapshot, as side rows. */
  sideRows(): SideRows {
    return this.#results.sideRows();
  }
  /** See PairRows.sideSaved: once saved, results are read from `saved` and dropped here. */
  sideSaved(saved?: SideReader): void {
    this.#results.sideSaved(saved);
  }

  /** Entries held in memory (results folded since the last save, load outcomes, programs whose
   * numbers were looked up or first events noted (see PairRows), requests in flight): bounded by what a snapshot interval folds or
   * asks about, not by the run (tests count them). */
  get heldEntries(): number {
    return this.#results.heldEntries + this.#awaiting.size;
  }

  /** Every result and load outcome, whether folded or read from a snapshot's rows, in key order
   * (see PairRows.recorded; tests compare caches whole with it). */
  recorded(): [string, string][] {
    return this.#results.recorded();
  }
}

/** Through the run's parsed-test cache: the Judge has just read most of these tests. */
async function loadTest(env: RunEnv, hash: string): Promise<TestCase> {
  return env.test(hash);
}

export const executor: ActorDefinition<typeof executorMachine, ExecutorEffect, RunEnv, ExecutionCache> = {
  name: 'executor',
  machine: executorMachine,
  context: ExecutorContext,
  pending: (snapshot: SnapshotFrom<typeof executorMachine>) => snapshot.context.requests,
  // All verdicts of a request are one commit; the machine reads only the request id.
  foldOncePerCommit: ['ProgramExecuted', 'ExecutionCompleted'],
  // No request in flight: the body holds no tests to run.
  atRest: (snapshot) => snapshot.context.requests.length === 0,
  index: {
    create: () => new ExecutionCache(),
    observe: (cache, envelope) => cache.observe(envelope),
    types: ['ExecutionRequested', 'ProgramExecuted', 'ExecutionCompleted'],
    serialize: (cache) => cache.serialize(),
    schema: ExecutionCacheData,
    restore: (data: ExecutionCacheData, side) => ExecutionCache.restore(data, side),
    sideRows: (cache) => cache.sideRows(),
    sideSaved: (cache, saved) => cache.sideSaved(saved),
  },
  run: (request, env, _snapshot, cache) => executePrograms(request, env, cache),
};

/**
 * Runs a request's pairs (or only those of the programs in `only`) and returns one
 * ProgramExecuted per program, in request order. Executor processes sharing a request's work
 * call it per program and record each program's event as its own commit.
 */
export async function executePrograms(request: Request, env: RunEnv, cache: ExecutionCache, only?: ReadonlySet<string>): Promise<NewEvent[]> {
  const problem = await env.problem(request.problemId);
  const pairs = requestPairs(request);
  // Outputs are kept (as blobs named in the event) only for runs of the problem's reference
  // text and of its probe (./reference-probe.ts), whose outputs become generated tests' expected
  // values; a candidate's output is read by nothing, and naming it would double the log's size.
  const reference = problem.solutions[0] === undefined ? null : sha256Hex(problem.solutions[0]);
  const probe = problem.solutions[0] === undefined ? null : sha256Hex(referenceProbeProgram(problem.solutions[0]));
  const keepsOutput = (programHash: string) => programHash === reference || programHash === probe;
  const results = new Array<ResultFigures | undefined>(pairs.length);
  // Every pair by its program hash, in request order; the cached ones answered now.
  // Each distinct test is read and parsed once per request, not once per program running it.
  const testsByHash = new Map<string, Promise<TestCase>>();
  const testOf = (hash: string) => testsByHash.get(hash) ?? testsByHash.set(hash, loadTest(env, hash)).get(hash)!;
  const byProgram = new Map<string, number[]>();
  const toRun = new Map<string, number[]>();
  cache.prefetch(only ? pairs.filter((p) => only.has(p.programHash)) : pairs);
  pairs.forEach((pair, i) => {
    if (only && !only.has(pair.programHash)) return;
    const all = byProgram.get(pair.programHash) ?? [];
    all.push(i);
    byProgram.set(pair.programHash, all);
    const hit = cache.get(pair.programHash, pair.testHash);
    // A result recorded without its output (the same text run as another problem's
    // candidate) does not answer a pair whose output is kept.
    if (hit && !(keepsOutput(pair.programHash) && hit.outputHash === null && (hit.verdict === 'accepted' || hit.verdict === 'wrong_answer'))) {
      results[i] = { ...hit, cached: true };
      return;
    }
    const list = toRun.get(pair.programHash) ?? [];
    list.push(i);
    toRun.set(pair.programHash, list);
  });
  const loads = new Map<string, ModuleLoad>();
  await Promise.all(
    [...toRun].map(async ([programHash, indexes]) => {
      const program = await env.blobs.getText(programHash);
      // A test listed twice for one program (two samples of one candidate) runs once.
      const unique = [...new Set(indexes.map((i) => pairs[i]!.testHash))];
      const verdicts = await env.sandbox.run({
        program,
        // The reference (oracle outputs) runs on a pool of its own, never beside candidates.
        role: indexes.some((i) => pairs[i]!.programId === 'reference') ? 'reference' : 'candidate',
        tests: await Promise.all(unique.map(testOf)),
        entryPoint: problem.entryPoint,
        limits: problem.limits,
        comparison: problem.comparison,
        checker: problem.checker,
      });
      loads.set(programHash, moduleLoadOfResults(verdicts));
      const byTest = new Map<string, (typeof verdicts)[number]>();
      for (const v of verdicts) byTest.set(unique[v.test]!, v);
      for (const i of indexes) {
        const v = byTest.get(pairs[i]!.testHash);
        if (!v) continue;
        results[i] = {
          verdict: v.verdict,
          timeMs: v.timeMs,
          memoryKb: v.memoryKb,
          outputHash: v.output === undefined || !keepsOutput(programHash) ? null : await env.blobs.put(v.output),
          exceptionType: v.exceptionType ?? null,
          isolated: v.isolated,
          cached: false,
        };
      }
    }),
  );
  return [...byProgram].map(([programHash, indexes]) => {
    const figures = indexes.map((i) => {
      const r = results[i];
      if (!r) throw new Error(`sandbox returned no result for pair ${i} of ${request.requestId}`);
      return r;
    });
    const fresh = loads.get(programHash);
    const load = fresh === undefined ? cache.load(programHash) : mergeLoad(cache.load(programHash), fresh);
    return env.event('ProgramExecuted', compactResults(request.requestId, programHash, indexes, figures, load));
  });
}
