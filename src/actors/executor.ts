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
import { compactResults, type PairResult, type ResultFigures } from '../events/program-executed.js';
import { mergeLoad, type ModuleLoad } from '../core/module-load.js';
import { VERDICT_CODES } from '../core/verdicts.js';
import type { SideReader, SideRows } from './snapshots.js';
import { ProgramHistory, type RecordedResults, resultsOf } from './program-history.js';
import { NO_LOG, type ReadAt } from '../events/read-at.js';
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

/** The Executor's side index (ExecutionCache) as its snapshot body holds it: the requests whose
 * results are still to come, each with its position in the log. */
export const ExecutionCacheData = z.strictObject({
  awaiting: z.array(z.strictObject({ request: catalog.specs.ExecutionRequested.schema, position: z.int().nonnegative(), left: z.int() })),
});
export type ExecutionCacheData = z.infer<typeof ExecutionCacheData>;

/** Results already recorded, by problem and (program, test), and each program's load outcome:
 * the same pair is never run twice in a problem. Rebuilt by folding the log, so a restarted
 * Executor has the same cache. The scope is the problem, as the Judge's, so that each problem's
 * programs are found through a directory of its own (see ProgramHistory): one scope for the run
 * made its directory the run's whole list of programs. A pair is the same in every problem, but
 * another problem's program and test almost never are.
 *
 * The results are the log's: the cache keeps where each program's results are (see
 * ProgramHistory) and a request reads the recorded results of its programs that have any from
 * the log (`resultsOf`). The snapshot body holds the requests in flight. */
export class ExecutionCache {
  readonly #history: ProgramHistory;
  readonly #read: ReadAt;
  /** Requests whose results are still to come: their stored pair lists (results name pairs by
   * position), their positions and how many results are missing. */
  readonly #awaiting = new Map<string, { request: Request; position: number; left: number }>();

  constructor(side: SideReader | null = null, read: ReadAt = NO_LOG) {
    this.#history = new ProgramHistory(side);
    this.#read = read;
  }

  observe(envelope: EventEnvelope): void {
    if (envelope.type === 'ExecutionRequested') {
      const d = envelope.data as Request;
      if (d.pairs.length > 0) this.#awaiting.set(d.requestId, { request: d, position: envelope.position, left: requestSize(d) });
      return;
    }
    if (envelope.type === 'ExecutionCompleted') {
      const r = envelope.data as PairResult;
      const problemId = this.#awaiting.get(r.requestId)?.request.problemId;
      // sandbox_error is the sandbox's failure, not the program's: worth running again.
      if (problemId !== undefined && r.verdict !== 'sandbox_error') this.#history.record(problemId, r.programHash, envelope.position, 0, [r.testHash]);
      return;
    }
    if (envelope.type !== 'ProgramExecuted') return;
    const d = envelope.data as EventData<'ProgramExecuted'>;
    const wait = this.#awaiting.get(d.requestId);
    // Results of a request this log never announced name no problem and no pairs: nothing to remember.
    if (!wait) return;
    const { problemId, tests, pairs } = wait.request;
    this.#history.recordLoad(problemId, d.programHash, envelope.position, d.load);
    const recorded = d.pairs.flatMap((at, i) => (d.verdicts[i] === SANDBOX_ERROR ? [] : [tests[pairs[2 * at + 1]!]!.testHash]));
    if (recorded.length > 0) this.#history.record(problemId, d.programHash, envelope.position, wait.position, recorded);
    if ((wait.left -= d.pairs.length) <= 0) this.#awaiting.delete(d.requestId);
  }

  /** The recorded results of `pairs` in the problem, read from the log where the index says they are. */
  resultsOf(problemId: string, pairs: Iterable<{ programHash: string; testHash: string }>): Promise<RecordedResults> {
    return resultsOf(this.#history, problemId, pairs, this.#read);
  }
  /** What is known of the program's module body in the problem; unknown when nothing recorded told. */
  load(problemId: string, programHash: string): ModuleLoad {
    return this.#history.load(problemId, programHash) ?? 'unknown';
  }
  /** For actor snapshots: the requests in flight (see ExecutionCacheData); where results are
   * goes to side rows (sideRows). */
  serialize(): ExecutionCacheData {
    return { awaiting: [...this.#awaiting].map(([, v]) => ({ request: v.request, position: v.position, left: v.left })) };
  }
  static restore(d: ExecutionCacheData, side: SideReader, read: ReadAt = NO_LOG): ExecutionCache {
    const cache = new ExecutionCache(side, read);
    for (const { request, position, left } of d.awaiting) cache.#awaiting.set(request.requestId, { request, position, left });
    return cache;
  }

  /** The index entries changed since the last saved snapshot, as side rows. */
  sideRows(): SideRows {
    return this.#history.sideRows();
  }
  /** See ProgramHistory.sideSaved: once saved, entries are read from `saved` and dropped here. */
  sideSaved(saved?: SideReader): void {
    this.#history.sideSaved(saved);
  }

  /** Entries held in memory (index entries read or changed since the last save, requests in
   * flight): bounded by what a snapshot interval folds or asks about, not by the run (tests
   * count them). */
  get heldEntries(): number {
    return this.#history.heldEntries + this.#awaiting.size;
  }

  /** Every index entry, whether held or read from a snapshot's rows, in key order (see
   * ProgramHistory.recorded; tests compare caches whole with it). */
  recorded(): [string, string][] {
    return this.#history.recorded();
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
    create: (read) => new ExecutionCache(null, read),
    observe: (cache, envelope) => cache.observe(envelope),
    types: ['ExecutionRequested', 'ProgramExecuted', 'ExecutionCompleted'],
    serialize: (cache) => cache.serialize(),
    schema: ExecutionCacheData,
    restore: (data: ExecutionCacheData, side, read) => ExecutionCache.restore(data, side, read),
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
  const recorded = await cache.resultsOf(request.problemId, only ? pairs.filter((p) => only.has(p.programHash)) : pairs);
  pairs.forEach((pair, i) => {
    if (only && !only.has(pair.programHash)) return;
    const all = byProgram.get(pair.programHash) ?? [];
    all.push(i);
    byProgram.set(pair.programHash, all);
    const hit = recorded.get(pair.programHash, pair.testHash);
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
    const known = cache.load(request.problemId, programHash);
    const load = fresh === undefined ? known : mergeLoad(known, fresh);
    return env.event('ProgramExecuted', compactResults(request.requestId, programHash, indexes, figures, load));
  });
}
