/**
 * The Judge turns executions into judgments, per problem and round, in three steps:
 *   1. when every suite of the problem is sampled: run the reference on each distinct
 *      well-formed test (oracle outputs and validity);
 *   2. with validity known: write TestsJudged and ask for the reward pairs (each program on its
 *      suites' valid tests and on the Mistake Book's top tests), the held-out evaluation, and
 *      the kill pairs (known-incorrect programs on the valid tests);
 *   3. with every verdict in: rewards for both roles, Mistake Book changes, evaluation figures.
 * Each step is an effect whose output is in the log before the next step is considered, so a
 * Judge killed anywhere resumes at the step it had not recorded yet.
 */
import { assign, setup } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import type { ActorDefinition, LogEvent } from './runtime.js';
import type { RunEnv } from './env.js';
import { configOf, dataOf } from './events.js';
import { requestBody, requestPairs, requestSize, reusedPairs, type EventData, type ExecutionPair } from '../events/catalog.js';
import type { EventEnvelope } from '../events/envelope.js';
import { packJson, unpackJson, type Json } from '../events/packed-json.js';
import { emptyMistakeBook, applyMistakeBookChanges, type MistakeBookState } from '../rewards/mistake-book.js';
import { judgementOf } from './methods/index.js';
import type { EvolvedState } from './methods/contract.js';
import { tcsBufferAfter } from './methods/tcs.js';
import type { TcsBufferedSuite } from '../rewards/tcs.js';
import type { ProblemRound } from './judge-state.js';
import { insertById } from './content-order.js';
import { mergeLoad, pairResultsOf, type ModuleLoad, type PairResult } from '../projections/recorded-verdicts.js';

export type { JudgePhase, ProblemRound, SolutionRef, SuiteRef } from './judge-state.js';

export interface JudgeContext {
  suitesPerProgram: number;
  open: Record<string, ProblemRound>;
  mistakeBooks: Record<string, MistakeBookState>;
  /** EvolveCoder: each problem's fixed candidates and evolving tests. */
  evolved: Record<string, EvolvedState>;
  /** TCS: the stage of each round, as the Conductor decided it. */
  stages: Record<number, 1 | 2>;
  /** TCS: each problem's rolling buffer of test-policy samples, folded from TestsJudged. */
  tcsBuffers: Record<string, TcsBufferedSuite[]>;
  /** The TCS buffer options (null: the run is not TCS and keeps no buffer). */
  tcs: { bufferSize: number; maxStaleness: number | null } | null;
  /** Per open request, the program hashes whose results are still to come: executors may
   * record a request's programs in one commit or in one commit each (separate processes). */
  awaiting: Record<string, string[]>;
}

const key = (round: number, problemId: string) => `${round}/${problemId}`;

function update(ctx: JudgeContext, k: string, f: (p: ProblemRound) => Partial<ProblemRound>): Partial<JudgeContext> {
  const p = ctx.open[k];
  if (!p) return {};
  return { open: { ...ctx.open, [k]: { ...p, ...f(p) } } };
}

/** A program's results arrived: the request is complete once every program it names has its
 * ProgramExecuted. A repeat (the same program recorded again) changes nothing. */
function programExecuted(ctx: JudgeContext, requestId: string, programHash: string): Partial<JudgeContext> {
  const left = ctx.awaiting[requestId];
  // Not awaited (issued by an older log without the list, or already complete): its first
  // result completes it, as when a request's results were always one commit.
  if (left === undefined) return completedRequest(ctx, requestId);
  if (!left.includes(programHash)) return {};
  const rest = left.filter((h) => h !== programHash);
  if (rest.length > 0) return { awaiting: { ...ctx.awaiting, [requestId]: rest } };
  const { [requestId]: _done, ...awaiting } = ctx.awaiting;
  return { ...completedRequest(ctx, requestId), awaiting };
}

/** requestId is "<round>/<problemId>/<purpose>". */
function completedRequest(ctx: JudgeContext, requestId: string): Partial<JudgeContext> {
  const k = requestId.slice(0, requestId.lastIndexOf('/'));
  if (ctx.open[k]?.completed.includes(requestId) ?? true) return {};
  return update(ctx, k, (p) => ({ completed: [...p.completed, requestId] }));
}

export const judgeMachine = setup({
  types: { context: {} as JudgeContext, events: {} as LogEvent },
}).createMachine({
  id: 'judge',
  context: { suitesPerProgram: 1, open: {}, mistakeBooks: {}, stages: {}, evolved: {}, tcsBuffers: {}, tcs: null, awaiting: {} },
  on: {
    RunStarted: {
      actions: assign(({ event }) => {
        const config = configOf(event.envelope);
        const tcs = config.method === 'tcs' ? { bufferSize: config.tcs.bufferSize, maxStaleness: config.tcs.maxStaleness } : null;
        return { suitesPerProgram: config.sampling.suitesPerProgram, tcs };
      }),
    },
    ProblemScheduled: {
      actions: assign(({ context, event }) => {
        const d = dataOf(event.envelope, 'ProblemScheduled');
        const k = key(d.round, d.problemId);
        const p: ProblemRound = {
          key: k,
          round: d.round,
          problemId: d.problemId,
          groupSize: d.groupSize,
          testVersion: d.testVersion,
          solutions: [],
          suites: [],
          phase: 'sampling',
          issued: [],
          completed: [],
          judgedTests: null,
        };
        return { open: { ...context.open, [k]: p } };
      }),
    },
    SolutionSampled: {
      actions: assign(({ context, event }) => {
        const d = dataOf(event.envelope, 'SolutionSampled');
        return update(context, key(d.round, d.problemId), (p) => ({
          // By id, not arrival: the order of solutions and suites sets reward groups and ties.
          solutions: insertById(p.solutions, { solutionId: d.solutionId, programHash: d.programHash, candidateId: d.sampling.candidateId }, (x) => x.solutionId),
        }));
      }),
    },
    TestsSampled: {
      actions: assign(({ context, event }) => {
        const d = dataOf(event.envelope, 'TestsSampled');
        return update(context, key(d.round, d.problemId), (p) => {
          const suites = insertById(
            p.suites,
            { suiteId: d.suiteId, targetSolutionId: d.targetSolutionId, nonprintableRatio: d.nonprintableRatio, candidateId: d.sampling.candidateId, tests: d.tests },
            (x) => x.suiteId,
          );
          const all = p.solutions.length === p.groupSize && suites.length === p.groupSize * context.suitesPerProgram;
          return { suites, phase: all ? 'oracle' : p.phase };
        });
      }),
    },
    ExecutionRequested: {
      actions: assign(({ context, event }) => {
        const d = dataOf(event.envelope, 'ExecutionRequested');
        // An empty request has nothing to wait for: it is complete when issued.
        const issued = update(context, key(d.round, d.problemId), (p) => ({
          issued: [...p.issued, d.requestId],
          completed: requestSize(d) === 0 ? [...p.completed, d.requestId] : p.completed,
        }));
        if (requestSize(d) === 0 || issued.open === undefined) return issued;
        // From the stored lists: expanding every pair into an object to find a few programs
        // cost more than the rest of the fold.
        const programs = new Set<string>();
        for (let i = 0; i < d.pairs.length; i += 2) programs.add(d.programs[d.pairs[i]!]!.programHash);
        return { ...issued, awaiting: { ...context.awaiting, [d.requestId]: [...programs] } };
      }),
    },
    ProgramExecuted: {
      actions: assign(({ context, event }) => {
        const d = dataOf(event.envelope, 'ProgramExecuted');
        return programExecuted(context, d.requestId, d.programHash);
      }),
    },
    ExecutionCompleted: {
      actions: assign(({ context, event }) => completedRequest(context, dataOf(event.envelope, 'ExecutionCompleted').requestId)),
    },
    TestsJudged: {
      actions: assign(({ context, event }) => {
        const d = dataOf(event.envelope, 'TestsJudged');
        const k = key(d.round, d.problemId);
        const open = update(context, k, () => ({ judgedTests: d.tests, phase: 'executing' }));
        const p = context.open[k];
        if (!context.tcs || !p) return open;
        const buffer = tcsBufferAfter(context.tcsBuffers[d.problemId] ?? [], p, d.tests, context.tcs);
        return { ...open, tcsBuffers: { ...context.tcsBuffers, [d.problemId]: buffer } };
      }),
    },
    MistakeBookUpdated: {
      actions: assign(({ context, event }) => {
        const d = dataOf(event.envelope, 'MistakeBookUpdated');
        const book = context.mistakeBooks[d.problemId] ?? emptyMistakeBook();
        return { mistakeBooks: { ...context.mistakeBooks, [d.problemId]: applyMistakeBookChanges(book, d.changes) } };
      }),
    },
    TestsEvolved: {
      actions: assign(({ context, event }) => {
        const d = dataOf(event.envelope, 'TestsEvolved');
        return { evolved: { ...context.evolved, [d.problemId]: { programs: d.programs, tests: d.tests } } };
      }),
    },
    StageDecided: {
      actions: assign(({ context, event }) => {
        const d = dataOf(event.envelope, 'StageDecided');
        return { stages: { ...context.stages, [d.round]: d.stage } };
      }),
    },
    ProblemEvaluated: {
      actions: assign(({ context, event }) => {
        const d = dataOf(event.envelope, 'ProblemEvaluated');
        const { [key(d.round, d.problemId)]: _closed, ...open } = context.open;
        return { open };
      }),
    },
  },
});

type Snapshot = SnapshotFrom<typeof judgeMachine>;

export type JudgeEffect =
  | { key: string; kind: 'oracle'; problem: ProblemRound }
  | { key: string; kind: 'plan'; problem: ProblemRound }
  | { key: string; kind: 'judge'; problem: ProblemRound };

export function judgePending(snapshot: Snapshot): JudgeEffect[] {
  const effects: JudgeEffect[] = [];
  for (const p of Object.values(snapshot.context.open)) {
    const oracleId = `${p.key}/oracle`;
    if (p.phase === 'oracle' && !p.issued.includes(oracleId)) {
      effects.push({ key: `${p.key}/oracle`, kind: 'oracle', problem: p });
    } else if (p.phase === 'oracle' && p.completed.includes(oracleId)) {
      effects.push({ key: `${p.key}/plan`, kind: 'plan', problem: p });
    } else if (p.phase === 'executing' && p.issued.every((id) => p.completed.includes(id))) {
      effects.push({ key: `${p.key}/judge`, kind: 'judge', problem: p });
    }
  }
  return effects;
}

type Pair = ExecutionPair;

/** A pair within a problem: plans reuse verdicts of their own problem only, whose earlier
 * rounds are finished, so a reused verdict is always recorded by the time it is judged. */
const pairKey = (problemId: string, programHash: string, testHash: string) => `${problemId}\u0000${programHash}\u0000${testHash}`;
const programKey = (problemId: string, programHash: string) => `${problemId}\u0000${programHash}`;

/** Verdicts by problem-round and request, rebuilt by folding; kept outside the machine so each
 * event costs O(its results). A problem-round's own lists are dropped once it is evaluated;
 * recorded verdicts by pair and load outcomes by program stay, so later plans can reuse them
 * instead of executing a pair again. */
export class VerdictIndex {
  readonly #byProblem = new Map<string, Map<string, PairResult[]>>();
  /** Reused pairs per request, answered from #byPair when the request is read. */
  readonly #reused = new Map<string, { problemId: string; pairs: Pair[] }>();
  readonly #byPair = new Map<string, PairResult>();
  readonly #load = new Map<string, ModuleLoad>();
  /** requestId -> problemId, for keying the pairs of its verdicts. */
  readonly #problemOf = new Map<string, string>();
  /** Pairs of requests whose results are still to come (results name pairs by position). */
  readonly #awaiting = new Map<string, { pairs: Pair[]; left: number }>();

  observe(envelope: EventEnvelope): void {
    if (envelope.type === 'ProblemEvaluated') {
      const d = envelope.data as EventData<'ProblemEvaluated'>;
      const k = key(d.round, d.problemId);
      for (const id of this.#byProblem.get(k)?.keys() ?? []) this.#problemOf.delete(id);
      for (const id of [...this.#reused.keys()]) if (id.startsWith(`${k}/`)) this.#reused.delete(id);
      this.#byProblem.delete(k);
      return;
    }
    if (envelope.type === 'ExecutionRequested') {
      const d = envelope.data as EventData<'ExecutionRequested'>;
      this.#problemOf.set(d.requestId, d.problemId);
      if (d.reused.length > 0) this.#reused.set(d.requestId, { problemId: d.problemId, pairs: reusedPairs(d) });
      if (d.pairs.length > 0) this.#awaiting.set(d.requestId, { pairs: requestPairs(d), left: requestSize(d) });
      return;
    }
    const results = pairResultsOf(envelope, (id) => this.#awaiting.get(id)?.pairs);
    if (results.length === 0) return;
    const requestId = results[0]!.requestId;
    const problemId = this.#problemOf.get(requestId);
    if (envelope.type === 'ProgramExecuted') {
      const d = envelope.data as EventData<'ProgramExecuted'>;
      const wait = this.#awaiting.get(requestId);
      if (wait && (wait.left -= results.length) <= 0) this.#awaiting.delete(requestId);
      if (problemId !== undefined) {
        const pk = programKey(problemId, d.programHash);
        this.#load.set(pk, mergeLoad(this.#load.get(pk), d.load));
      }
    }
    const k = requestId.slice(0, requestId.lastIndexOf('/'));
    let requests = this.#byProblem.get(k);
    if (!requests) this.#byProblem.set(k, (requests = new Map()));
    // In request order: a compact result sits at its pair's position.
    let list = requests.get(requestId);
    if (!list) requests.set(requestId, (list = []));
    const at = envelope.type === 'ProgramExecuted' ? (envelope.data as EventData<'ProgramExecuted'>).pairs : null;
    results.forEach((d, i) => {
      if (at) list[at[i]!] = d;
      else list.push(d);
    });
    if (problemId === undefined) return;
    // A sandbox error is the sandbox's failure, not a verdict: such a pair is executed again.
    for (const d of results) if (d.verdict !== 'sandbox_error') this.#byPair.set(pairKey(problemId, d.programHash, d.testHash), d);
  }

  /** For actor snapshots: the index as JSON data, and an index from that data. Packed (lists
   * of results as columns, see packed-json.ts): the recorded verdicts of a whole run are most of
   * a Judge snapshot. The pair keys are not stored: each is made again from its result. */
  serialize(): unknown {
    // A request's result that is also the recorded verdict of its pair (the same object, as
    // observe() stores it) is written once, in byPair, and named by its place there.
    const byPair = [...this.#byPair];
    const place = new Map<PairResult, number>();
    byPair.forEach(([, result], i) => place.set(result, i));
    const ref = (r: PairResult | undefined): PairResult | number | null => (r === undefined ? null : (place.get(r) ?? r));
    return packJson({
      byPair: byPair.map(([k, result]) => ({ problemId: k.slice(0, k.indexOf('\u0000')), result })),
      byProblem: [...this.#byProblem].map(([k, requests]) => [k, [...requests].map(([id, list]) => [id, Array.from(list, ref)])]),
      reused: [...this.#reused].map(([requestId, v]) => ({ requestId, problemId: v.problemId, pairs: v.pairs })),
      load: [...this.#load],
      problemOf: [...this.#problemOf],
      awaiting: [...this.#awaiting].map(([requestId, v]) => ({ requestId, left: v.left, pairs: v.pairs })),
    } as unknown as Json);
  }
  static restore(data: unknown): VerdictIndex {
    const d = unpackJson(data as Json) as unknown as {
      byPair: { problemId: string; result: PairResult }[];
      byProblem: [string, [string, (PairResult | number | null)[]][]][];
      reused: { requestId: string; problemId: string; pairs: Pair[] }[];
      load: [string, ModuleLoad][];
      problemOf: [string, string][];
      awaiting: { requestId: string; left: number; pairs: Pair[] }[];
    };
    const index = new VerdictIndex();
    for (const { problemId, result } of d.byPair) index.#byPair.set(pairKey(problemId, result.programHash, result.testHash), result);
    const deref = (r: PairResult | number | null): PairResult | null => (typeof r === 'number' ? d.byPair[r]!.result : r);
    for (const [k, requests] of d.byProblem) index.#byProblem.set(k, new Map(requests.map(([id, list]) => [id, holes(list.map(deref))])));
    for (const { requestId, problemId, pairs } of d.reused) index.#reused.set(requestId, { problemId, pairs });
    for (const [k, v] of d.load) index.#load.set(k, v);
    for (const [k, v] of d.problemOf) index.#problemOf.set(k, v);
    for (const { requestId, left, pairs } of d.awaiting) index.#awaiting.set(requestId, { pairs, left });
    return index;
  }

  /** Whether the pair has a recorded verdict in this problem. */
  has(problemId: string, programHash: string, testHash: string): boolean {
    return this.#byPair.has(pairKey(problemId, programHash, testHash));
  }

  /** What the recorded executions of a program in this problem tell of its module body. */
  load(problemId: string, programHash: string): ModuleLoad {
    return this.#load.get(programKey(problemId, programHash)) ?? 'unknown';
  }

  /** The verdicts of a request: those it executed, then those it reused, under its own ids. */
  of(requestId: string): PairResult[] {
    const k = requestId.slice(0, requestId.lastIndexOf('/'));
    const own = this.#byProblem.get(k)?.get(requestId) ?? [];
    const out = own.filter((v) => v !== undefined);
    const reused = this.#reused.get(requestId);
    if (!reused) return out;
    for (const p of reused.pairs) {
      const v = this.#byPair.get(pairKey(reused.problemId, p.programHash, p.testHash));
      if (v) out.push({ ...v, requestId, programId: p.programId, testId: p.testId, cached: true });
    }
    return out;
  }
}

/** Splits a plan's pairs into those to execute and those already recorded or already in an
 * earlier request of the same plan (`planned`, updated in place). */
export function splitReused(problemId: string, pairs: readonly Pair[], verdicts: VerdictIndex, planned: Set<string>): { pairs: Pair[]; reused: Pair[] } {
  const fresh: Pair[] = [];
  const reused: Pair[] = [];
  for (const p of pairs) {
    const k = pairKey(problemId, p.programHash, p.testHash);
    if (planned.has(k) || verdicts.has(problemId, p.programHash, p.testHash)) reused.push(p);
    else {
      planned.add(k);
      fresh.push(p);
    }
  }
  return { pairs: fresh, reused };
}

/** A list with null where a result is still to come, as the sparse list it was. */
function holes(list: readonly (PairResult | null)[]): PairResult[] {
  const out: PairResult[] = [];
  list.forEach((r, i) => {
    if (r !== null) out[i] = r;
  });
  out.length = list.length;
  return out;
}

export const judge: ActorDefinition<typeof judgeMachine, JudgeEffect, RunEnv, VerdictIndex> = {
  name: 'judge',
  machine: judgeMachine,
  pending: judgePending,
  // An old log's per-pair verdicts of a request are one commit; the machine reads only the
  // request id. ProgramExecuted is folded one by one: each names the program it completes.
  foldOncePerCommit: ['ExecutionCompleted'],
  // 2: the index holds compact results and load outcomes. 3: solutions and suites by id, load
  // outcomes merged by rank. 4: requests await each program. 5: packed.
  snapshotVersion: 5,
  index: {
    create: () => new VerdictIndex(),
    observe: (verdicts, envelope) => verdicts.observe(envelope),
    types: ['ExecutionRequested', 'ProgramExecuted', 'ExecutionCompleted', 'ProblemEvaluated'],
    serialize: (verdicts) => verdicts.serialize(),
    restore: (data) => VerdictIndex.restore(data),
  },
  async run(effect, env, snapshot, verdicts) {
    const p = effect.problem;
    const problem = await env.problem(p.problemId);
    const method = judgementOf(env.config.method);
    if (effect.kind === 'oracle') {
      const pairs = await method.oracle(env, problem, p);
      // With nothing to execute the request counts as complete at once.
      const split = splitReused(p.problemId, pairs, verdicts, new Set());
      return [env.event('ExecutionRequested', { round: p.round, problemId: p.problemId, requestId: `${p.key}/oracle`, purpose: 'oracle', ...requestBody(split.pairs, split.reused) })];
    }
    const book = snapshot.context.mistakeBooks[p.problemId] ?? emptyMistakeBook();
    if (effect.kind === 'plan') {
      const evolved = snapshot.context.evolved[p.problemId] ?? null;
      const tcsBuffer = snapshot.context.tcsBuffers[p.problemId] ?? [];
      return method.plan({ env, problem, round: p, oracle: verdicts.of(`${p.key}/oracle`), book, evolved, tcsBuffer, split: (pairs, planned) => splitReused(p.problemId, pairs, verdicts, planned) });
    }
    const stage = snapshot.context.stages[p.round] ?? 1;
    const evolved = snapshot.context.evolved[p.problemId] ?? null;
    const tcsBuffer = snapshot.context.tcsBuffers[p.problemId] ?? [];
    return method.judge({ env, problem, round: p, book, verdicts: (id) => verdicts.of(id), load: (programHash) => verdicts.load(p.problemId, programHash), stage, evolved, tcsBuffer });
  },
};
