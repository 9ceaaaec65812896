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
import type { SideReader, SideRows } from './snapshots.js';

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
  /** Its number among the cache's records, in fold order. */
  seq: number;
}

/** Side row keys: the newest result of a pair by program hash and test hash (a lookup is a
 * point read, however long the program's history: a problem's reference runs on every new test
 * of the run), a load outcome by program hash. A pair row holds the result as resultAt gives it. */
const PAIR_ROW = 'p';
const LOAD_ROW = 'l';
const pairPrefix = (programHash: string) => `${PAIR_ROW}${programHash}\u0000`;
/** A record's results as side rows, in record order (a later result of a test wins). */
function pairRows(programHash: string, { d, at }: Recorded, rows: [string, string][]): void {
  const prefix = pairPrefix(programHash);
  for (const [h, i] of at) rows.push([prefix + h, JSON.stringify(resultAt(d, i))]);
}
/** Results already recorded, by (program, test), and each program's load outcome: the same
 * pair is never run twice in a run. Rebuilt by folding the log, so a restarted Executor has
 * the same cache.
 *
 * The records and load outcomes grow with the whole run: a snapshot keeps them as side rows
 * (see SideRows), one per pair, and a cache restored from a snapshot reads the row of each pair
 * it is asked about; its own maps hold what it folded since the last save. The snapshot body
 * holds the requests in flight. */
export class ExecutionCache {
  /** Program hash -> its records folded here, oldest first: the newest result of a pair answers. */
  readonly #byProgram = new Map<string, Recorded[]>();
  readonly #load = new Map<string, ModuleLoad>();
  /** Requests whose results are still to come: their stored pair lists (results name pairs by
   * position) and how many results are missing. */
  readonly #awaiting = new Map<string, { request: Request; left: number }>();
  /** The side rows of the snapshot this cache was restored from (null: folded from the start). */
  #side: SideReader | null;
  /** Per program asked about since the last save: whether the side rows hold any result of it
   * (most programs asked about are a fresh sample's: their pairs cost no read each). */
  readonly #sideHas = new Map<string, boolean>();
  /** Number of the next record. */
  #seq = 0;
  /** Records and load outcomes changed since the last saved snapshot (kept once one is saved
   * or restored: until then a snapshot writes every row). */
  #unsaved: { programHash: string; record: Recorded }[] = [];
  #unsavedLoads: string[] = [];
  #replace: boolean;

  constructor(side: SideReader | null = null, seq = 0) {
    this.#side = side;
    this.#seq = seq;
    this.#replace = side === null;
  }

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
    const known = this.#load.get(d.programHash) ?? this.#sideLoad(d.programHash);
    const merged = mergeLoad(known, d.load);
    if (merged !== known) {
      this.#load.set(d.programHash, merged);
      if (!this.#replace) this.#unsavedLoads.push(d.programHash);
    }
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
    const record: Recorded = { d, at, seq: this.#seq++ };
    const list = this.#byProgram.get(programHash);
    if (list) list.push(record);
    else this.#byProgram.set(programHash, [record]);
    if (!this.#replace) this.#unsaved.push({ programHash, record });
  }

  #sideLoad(programHash: string): ModuleLoad | undefined {
    return this.#side?.get(LOAD_ROW + programHash) as ModuleLoad | undefined;
  }

  /** The newest result of a pair that the snapshot's side rows hold. */
  #sideOf(programHash: string, testHash: string): ResultFigures | undefined {
    if (this.#side === null) return undefined;
    const prefix = pairPrefix(programHash);
    let any = this.#sideHas.get(programHash);
    if (any === undefined) {
      any = false;
      for (const _ of this.#side.withPrefix(prefix)) {
        any = true;
        break;
      }
      this.#sideHas.set(programHash, any);
    }
    if (!any) return undefined;
    const text = this.#side.get(prefix + testHash);
    return text === undefined ? undefined : (JSON.parse(text) as ResultFigures);
  }

  get(programHash: string, testHash: string): ResultFigures | undefined {
    // Records folded here are newer than those of the snapshot.
    const list = this.#byProgram.get(programHash);
    if (list) {
      for (let k = list.length - 1; k >= 0; k--) {
        const { d, at } = list[k]!;
        const i = at.get(testHash);
        if (i !== undefined) return resultAt(d, i);
      }
    }
    return this.#sideOf(programHash, testHash);
  }
  /** What is known of the program's module body; unknown when nothing recorded told. */
  load(programHash: string): ModuleLoad {
    return this.#load.get(programHash) ?? this.#sideLoad(programHash) ?? 'unknown';
  }
  /** For actor snapshots: the requests in flight and the number of the next record (packed,
   * see packed-json.ts); the records and load outcomes go to side rows (sideRows). */
  serialize(): unknown {
    return packJson({
      seq: this.#seq,
      awaiting: [...this.#awaiting].map(([, v]) => ({ request: v.request, left: v.left })),
    } as unknown as Json);
  }
  static restore(data: unknown, side: SideReader): ExecutionCache {
    const d = unpackJson(data as Json) as unknown as { seq: number; awaiting: { request: Request; left: number }[] };
    const cache = new ExecutionCache(side, d.seq);
    for (const { request, left } of d.awaiting) cache.#awaiting.set(request.requestId, { request, left });
    return cache;
  }

  /** The records and load outcomes added since the last saved snapshot, as side rows. */
  sideRows(): SideRows {
    const rows: [string, string][] = [];
    if (this.#replace) {
      for (const [programHash, list] of this.#byProgram) for (const record of list) pairRows(programHash, record, rows);
    } else {
      for (const { programHash, record } of this.#unsaved) pairRows(programHash, record, rows);
    }
    for (const h of this.#replace ? this.#load.keys() : new Set(this.#unsavedLoads)) rows.push([LOAD_ROW + h, this.#load.get(h)!]);
    return { replace: this.#replace, rows };
  }
  /** Once saved, the records and load outcomes are read from `saved` when asked for, and dropped
   * here, so memory holds what was folded since the last snapshot, not every result of the run.
   * Without `saved` (a caller keeping no table) they stay. */
  sideSaved(saved?: SideReader): void {
    this.#unsaved = [];
    this.#unsavedLoads = [];
    this.#replace = false;
    if (saved === undefined) return;
    this.#side = saved;
    this.#sideHas.clear();
    this.#byProgram.clear();
    this.#load.clear();
  }

  /** Entries held in memory (results folded since the last save, load outcomes, programs whose
   * side rows were probed, requests in flight): bounded by what a snapshot interval folds or
   * asks about, not by the run (tests count them). */
  get heldEntries(): number {
    let results = 0;
    for (const list of this.#byProgram.values()) for (const record of list) results += record.at.size;
    return results + this.#load.size + this.#sideHas.size + this.#awaiting.size;
  }

  /** Every record and load outcome as side rows would hold them, in key order, whether folded or
   * read from a snapshot's rows (tests compare caches whole with it). */
  recorded(): [string, string][] {
    const rows = new Map<string, string>(this.#side ? [...this.#side.all()] : []);
    const folded: [string, string][] = [];
    for (const [programHash, list] of this.#byProgram) for (const record of list) pairRows(programHash, record, folded);
    for (const [k, v] of folded) rows.set(k, v);
    for (const [h, load] of this.#load) rows.set(LOAD_ROW + h, load);
    return [...rows].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
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
  // 5: results kept as their recorded events. 6: records and load outcomes in side rows, the
  // body holds the requests in flight. 7: a side row per pair, read by point lookups.
  snapshotVersion: 7,
  index: {
    create: () => new ExecutionCache(),
    observe: (cache, envelope) => cache.observe(envelope),
    types: ['ExecutionRequested', 'ProgramExecuted', 'ExecutionCompleted'],
    serialize: (cache) => cache.serialize(),
    restore: (data, side) => ExecutionCache.restore(data, side),
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
