/**
 * The Executor runs (program, test) pairs in the sandbox and records, per request and program
 * hash, one compact ProgramExecuted event. It groups a request's pairs by program so that the
 * sandbox runs many tests per program in one call; the tests it receives already carry the
 * oracle outputs the Judge chose. The program's load outcome (did its module body run?) comes
 * from the failure phases the sandbox reports, so no separate probe runs.
 */
import { assign, setup } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import { withoutKey, type ActorDefinition, type LogEvent } from './runtime.js';
import type { RunEnv } from './env.js';
import { dataOf } from './events.js';
import type { TestCase } from '../core/problem.js';
import { sha256Hex } from '../events/blobs.js';
import { requestPairs, requestSize, type EventData, type ExecutionPair } from '../events/catalog.js';
import type { EventEnvelope, NewEvent } from '../events/envelope.js';
import { packJson, unpackJson, type Json } from '../events/packed-json.js';
import { compactResults, mergeLoad, pairResultsOf, type ModuleLoad, type PairResult, type ResultFigures } from '../projections/recorded-verdicts.js';
import { moduleLoadOfResults } from '../rewards/code-a1.js';

type Request = EventData<'ExecutionRequested'>;
type Pair = ExecutionPair;

export interface ExecutorContext {
  requests: (Request & { key: string })[];
}

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

/** Results already recorded, by (program, test), and each program's load outcome: the same
 * pair is never run twice in a run. Rebuilt by folding the log, so a restarted Executor has
 * the same cache. */
export class ExecutionCache {
  readonly #byPair = new Map<string, PairResult>();
  readonly #load = new Map<string, ModuleLoad>();
  /** Pairs of requests whose results are still to come (results name pairs by position). */
  readonly #awaiting = new Map<string, { pairs: Pair[]; left: number }>();
  static key(programHash: string, testHash: string): string {
    return `${programHash}:${testHash}`;
  }
  observe(envelope: EventEnvelope): void {
    if (envelope.type === 'ExecutionRequested') {
      const d = envelope.data as Request;
      if (d.pairs.length > 0) this.#awaiting.set(d.requestId, { pairs: requestPairs(d), left: requestSize(d) });
      return;
    }
    const results = pairResultsOf(envelope, (id) => this.#awaiting.get(id)?.pairs);
    if (envelope.type === 'ProgramExecuted') {
      const d = envelope.data as EventData<'ProgramExecuted'>;
      this.#load.set(d.programHash, mergeLoad(this.#load.get(d.programHash), d.load));
      const wait = this.#awaiting.get(d.requestId);
      if (wait && (wait.left -= results.length) <= 0) this.#awaiting.delete(d.requestId);
    }
    // sandbox_error is the sandbox's failure, not the program's: worth running again.
    for (const r of results) if (r.verdict !== 'sandbox_error') this.#byPair.set(ExecutionCache.key(r.programHash, r.testHash), r);
  }
  get(programHash: string, testHash: string): PairResult | undefined {
    return this.#byPair.get(ExecutionCache.key(programHash, testHash));
  }
  /** What is known of the program's module body; unknown when nothing recorded told. */
  load(programHash: string): ModuleLoad {
    return this.#load.get(programHash) ?? 'unknown';
  }
  /** For actor snapshots: the recorded results, load outcomes and open requests, and a cache
   * holding them. */
  serialize(): unknown {
    // Packed (results as columns, see packed-json.ts); keys are made again from the results.
    return packJson({
      byPair: [...this.#byPair.values()],
      load: [...this.#load],
      awaiting: [...this.#awaiting].map(([requestId, v]) => ({ requestId, left: v.left, pairs: v.pairs })),
    } as unknown as Json);
  }
  static restore(data: unknown): ExecutionCache {
    const d = unpackJson(data as Json) as unknown as { byPair: PairResult[]; load: [string, ModuleLoad][]; awaiting: { requestId: string; left: number; pairs: Pair[] }[] };
    const cache = new ExecutionCache();
    for (const r of d.byPair) cache.#byPair.set(ExecutionCache.key(r.programHash, r.testHash), r);
    for (const [k, v] of d.load) cache.#load.set(k, v);
    for (const { requestId, left, pairs } of d.awaiting) cache.#awaiting.set(requestId, { pairs, left });
    return cache;
  }
}

/** Through the run's parsed-test cache: the Judge has just read most of these tests. */
async function loadTest(env: RunEnv, hash: string): Promise<TestCase> {
  return env.test(hash);
}

export const executor: ActorDefinition<typeof executorMachine, ExecutorEffect, RunEnv, ExecutionCache> = {
  name: 'executor',
  machine: executorMachine,
  pending: (snapshot: SnapshotFrom<typeof executorMachine>) => snapshot.context.requests,
  // All verdicts of a request are one commit; the machine reads only the request id.
  foldOncePerCommit: ['ProgramExecuted', 'ExecutionCompleted'],
  // 2: the index holds compact results and load outcomes. 3: load outcomes merged by rank. 4: packed.
  snapshotVersion: 4,
  index: {
    create: () => new ExecutionCache(),
    observe: (cache, envelope) => cache.observe(envelope),
    types: ['ExecutionRequested', 'ProgramExecuted', 'ExecutionCompleted'],
    serialize: (cache) => cache.serialize(),
    restore: (data) => ExecutionCache.restore(data),
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
  // text, whose outputs become generated tests' expected values; a candidate's output is read
  // by nothing, and naming it would double the log's size.
  const reference = problem.solutions[0] === undefined ? null : sha256Hex(problem.solutions[0]);
  const keepsOutput = (programHash: string) => programHash === reference;
  const results = new Array<ResultFigures | undefined>(pairs.length);
  // Every pair by its program hash, in request order; the cached ones answered now.
  // Each distinct test is read and parsed once per request, not once per program running it.
  const testsByHash = new Map<string, Promise<TestCase>>();
  const testOf = (hash: string) => testsByHash.get(hash) ?? testsByHash.set(hash, loadTest(env, hash)).get(hash)!;
  const byProgram = new Map<string, number[]>();
  const toRun = new Map<string, number[]>();
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
