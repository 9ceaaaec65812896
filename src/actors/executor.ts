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
import { compactResults, mergeLoad, resultAt, type ModuleLoad, type PairResult, type ResultFigures } from '../projections/recorded-verdicts.js';
import { VERDICT_CODES } from '../core/verdicts.js';

const SANDBOX_ERROR = VERDICT_CODES.sandbox_error;
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

/** One recorded ProgramExecuted (or an older per-pair ExecutionCompleted, as a record of one
 * result) with the test hash of each of its results: a result is read from it only when asked
 * for, so folding a result costs a map entry, not an object. */
interface Recorded {
  d: EventData<'ProgramExecuted'>;
  /** Result index by test hash (a later result of the same test in the record wins). */
  at: Map<string, number>;
}

/** Results already recorded, by (program, test), and each program's load outcome: the same
 * pair is never run twice in a run. Rebuilt by folding the log, so a restarted Executor has
 * the same cache. */
export class ExecutionCache {
  /** Program hash -> its records, oldest first: the newest result of a pair answers. */
  readonly #byProgram = new Map<string, Recorded[]>();
  readonly #load = new Map<string, ModuleLoad>();
  /** Requests whose results are still to come: their stored pair lists (results name pairs by
   * position) and how many results are missing. */
  readonly #awaiting = new Map<string, { request: Request; left: number }>();

  observe(envelope: EventEnvelope): void {
    if (envelope.type === 'ExecutionRequested') {
      const d = envelope.data as Request;
      if (d.pairs.length > 0) this.#awaiting.set(d.requestId, { request: d, left: requestSize(d) });
      return;
    }
    if (envelope.type === 'ExecutionCompleted') {
      const r = envelope.data as PairResult;
      this.#record(r.programHash, compactResults(r.requestId, r.programHash, [0], [r], 'unknown'), [r.testHash]);
      return;
    }
    if (envelope.type !== 'ProgramExecuted') return;
    const d = envelope.data as EventData<'ProgramExecuted'>;
    this.#load.set(d.programHash, mergeLoad(this.#load.get(d.programHash), d.load));
    const wait = this.#awaiting.get(d.requestId);
    // Results of a request this log never announced name no pairs: nothing to remember.
    if (!wait) return;
    const { tests, pairs } = wait.request;
    const testHashes = d.pairs.map((at) => tests[pairs[2 * at + 1]!]!.testHash);
    this.#record(d.programHash, d, testHashes);
    if ((wait.left -= d.pairs.length) <= 0) this.#awaiting.delete(d.requestId);
  }

  #record(programHash: string, d: EventData<'ProgramExecuted'>, testHashes: readonly string[]): void {
    const at = new Map<string, number>();
    // sandbox_error is the sandbox's failure, not the program's: worth running again.
    testHashes.forEach((h, i) => {
      if (d.verdicts[i] !== SANDBOX_ERROR) at.set(h, i);
    });
    if (at.size === 0) return;
    const list = this.#byProgram.get(programHash);
    if (list) list.push({ d, at });
    else this.#byProgram.set(programHash, [{ d, at }]);
  }

  get(programHash: string, testHash: string): ResultFigures | undefined {
    const list = this.#byProgram.get(programHash);
    if (!list) return undefined;
    for (let k = list.length - 1; k >= 0; k--) {
      const { d, at } = list[k]!;
      const i = at.get(testHash);
      if (i === undefined) continue;
      return resultAt(d, i);
    }
    return undefined;
  }
  /** What is known of the program's module body; unknown when nothing recorded told. */
  load(programHash: string): ModuleLoad {
    return this.#load.get(programHash) ?? 'unknown';
  }
  /** For actor snapshots: the recorded results (each record with its tests' hashes), load
   * outcomes and open requests, and a cache holding them. */
  serialize(): unknown {
    // Packed (lists as columns, see packed-json.ts).
    const records: { results: EventData<'ProgramExecuted'>; tests: string[] }[] = [];
    for (const list of this.#byProgram.values()) {
      for (const { d, at } of list) {
        const tests: string[] = new Array(d.pairs.length).fill('');
        for (const [h, i] of at) tests[i] = h;
        records.push({ results: d, tests });
      }
    }
    return packJson({
      records,
      load: [...this.#load],
      awaiting: [...this.#awaiting].map(([, v]) => ({ request: v.request, left: v.left })),
    } as unknown as Json);
  }
  static restore(data: unknown): ExecutionCache {
    const d = unpackJson(data as Json) as unknown as {
      records: { results: EventData<'ProgramExecuted'>; tests: string[] }[];
      load: [string, ModuleLoad][];
      awaiting: { request: Request; left: number }[];
    };
    const cache = new ExecutionCache();
    // Only results that were remembered have a test hash (sandbox errors were not).
    for (const { results, tests } of d.records) {
      const at = new Map<string, number>();
      tests.forEach((h, i) => {
        if (h !== '') at.set(h, i);
      });
      const list = cache.#byProgram.get(results.programHash);
      if (list) list.push({ d: results, at });
      else cache.#byProgram.set(results.programHash, [{ d: results, at }]);
    }
    for (const [k, v] of d.load) cache.#load.set(k, v);
    for (const { request, left } of d.awaiting) cache.#awaiting.set(request.requestId, { request, left });
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
  // 5: results kept as their recorded events.
  snapshotVersion: 5,
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
