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
import { emptyMistakeBook, applyMistakeBookChanges } from '../rewards/mistake-book.js';
import { judgementOf } from './methods/index.js';
import { tcsBufferAfter } from './methods/tcs.js';
import { JudgeContext, VerdictIndexData, type ProblemRound } from './judge-state.js';
import type { SideReader, SideRows } from './snapshots.js';
import { PairRows } from './pair-rows.js';
import { insertById } from './content-order.js';
import { pairResultsOf, type PairResult } from '../events/program-executed.js';
import type { ModuleLoad } from '../core/module-load.js';

export type { EvolvedState, JudgePhase, ProblemRound, SolutionRef, SuiteRef } from './judge-state.js';

export { JudgeContext };

/** The shard of a request in `awaiting`: a program's results copy one shard (a few requests)
 * and the list of shards, not the entry of every request in flight (a thousand in a step of
 * Code-A1's size, copied once per program's results). */
function shardOf(requestId: string): string {
  let h = 0;
  for (let i = 0; i < requestId.length; i++) h = (h * 31 + requestId.charCodeAt(i)) & 63;
  return String(h);
}

function withAwaiting(awaiting: JudgeContext['awaiting'], requestId: string, programs: string[] | null): JudgeContext['awaiting'] {
  const s = shardOf(requestId);
  const shard = { ...(awaiting[s] ?? {}) };
  if (programs) shard[requestId] = programs;
  else delete shard[requestId];
  const next = { ...awaiting, [s]: shard };
  // Emptied shards go: the context holds the work in flight only.
  if (Object.keys(shard).length === 0) delete next[s];
  return next;
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
  const left = ctx.awaiting[shardOf(requestId)]?.[requestId];
  // Not awaited (issued by an older log without the list, or already complete): its first
  // result completes it, as when a request's results were always one commit.
  if (left === undefined) return completedRequest(ctx, requestId);
  if (!left.includes(programHash)) return {};
  const rest = left.filter((h) => h !== programHash);
  if (rest.length > 0) return { awaiting: withAwaiting(ctx.awaiting, requestId, rest) };
  return { ...completedRequest(ctx, requestId), awaiting: withAwaiting(ctx.awaiting, requestId, null) };
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
        return { suitesPerProgram: config.sampling.suitesPerProgram, tcs, keepsTokens: config.method === 'cure' };
      }),
    },
    ModelSampled: {
      actions: assign(({ context, event }) => {
        if (!context.keepsTokens) return {};
        const d = dataOf(event.envelope, 'ModelSampled');
        // Sample ids are `<round>/<problemId>/s<i>` (programs) and `<that>/t<j>` (suites).
        const k = d.sampleId.replace(/\/s\d+(\/t\d+)?$/, '');
        return update(context, k, (p) => ({ responseTokens: { ...(p.responseTokens ?? {}), [d.sampleId]: d.tokensHash } }));
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
          solutions: insertById(
            p.solutions,
            { solutionId: d.solutionId, programHash: d.programHash, candidateId: d.sampling.candidateId },
            (x) => x.solutionId,
          ),
        }));
      }),
    },
    TestsSampled: {
      actions: assign(({ context, event }) => {
        const d = dataOf(event.envelope, 'TestsSampled');
        return update(context, key(d.round, d.problemId), (p) => {
          const suites = insertById(
            p.suites,
            {
              suiteId: d.suiteId,
              targetSolutionId: d.targetSolutionId,
              nonprintableRatio: d.nonprintableRatio,
              candidateId: d.sampling.candidateId,
              tests: d.tests,
            },
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
        return { ...issued, awaiting: withAwaiting(context.awaiting, d.requestId, [...programs]) };
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

/** Verdicts by problem-round and request, rebuilt by folding; kept outside the machine so each
 * event costs O(its results). A problem-round's own lists are dropped once it is evaluated;
 * recorded verdicts by pair and load outcomes by program stay, so later plans can reuse them
 * instead of executing a pair again.
 *
 * Those two grow with the whole run (a verdict per pair): a snapshot keeps them as side rows
 * (see PairRows), a row per pair written once, and an index restored from a snapshot reads the
 * row of each pair it is asked about (a point read: a problem's reference is asked about every
 * new test of the run, and neither its whole history nor a map of it is read or kept); it holds
 * what it folded since the last save. The snapshot body holds the open work. */
export class VerdictIndex {
  readonly #byProblem = new Map<string, Map<string, PairResult[]>>();
  /** Reused pairs per request, answered from the recorded verdicts when the request is read. */
  readonly #reused = new Map<string, { problemId: string; pairs: Pair[] }>();
  /** Recorded verdicts by problem (the scope), program hash and test hash, and load outcomes by
   * problem and program (see PairRows). */
  readonly #recordedPairs: PairRows<PairResult>;
  /** requestId -> problemId, for keying the pairs of its verdicts (until its problem-round is evaluated). */
  readonly #problemOf = new Map<string, string>();
  /** Problem-round -> its requests, so evaluation drops their entries. */
  readonly #requestsOf = new Map<string, string[]>();
  /** Pairs of requests whose results are still to come (results name pairs by position). */
  readonly #awaiting = new Map<string, { pairs: Pair[]; left: number }>();
  constructor(side: SideReader | null = null) {
    // A verdict is its own figures: read as they are, kept until saved.
    this.#recordedPairs = new PairRows<PairResult>(side, (r) => r);
  }

  observe(envelope: EventEnvelope): void {
    if (envelope.type === 'ProblemEvaluated') {
      const d = envelope.data as EventData<'ProblemEvaluated'>;
      const k = key(d.round, d.problemId);
      for (const id of this.#requestsOf.get(k) ?? []) {
        this.#problemOf.delete(id);
        this.#reused.delete(id);
      }
      this.#requestsOf.delete(k);
      this.#byProblem.delete(k);
      return;
    }
    if (envelope.type === 'ExecutionRequested') {
      const d = envelope.data as EventData<'ExecutionRequested'>;
      const k = key(d.round, d.problemId);
      this.#problemOf.set(d.requestId, d.problemId);
      const ids = this.#requestsOf.get(k);
      if (ids) ids.push(d.requestId);
      else this.#requestsOf.set(k, [d.requestId]);
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
      if (problemId !== undefined) this.#recordedPairs.recordLoad(envelope.position, problemId, d.programHash, d.load);
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
    const kept = results.some((d) => d.verdict === 'sandbox_error') ? results.filter((d) => d.verdict !== 'sandbox_error') : results;
    if (kept.length === 0) return;
    for (const d of kept) this.#recordedPairs.record(envelope.position, problemId, d.programHash, d.testHash, d);
  }

  /** For actor snapshots: the open work as JSON data (see VerdictIndexData), and an index from
   * that data and the snapshot's side rows. */
  serialize(): VerdictIndexData {
    return {
      byProblem: [...this.#byProblem].map(([k, requests]) => [k, [...requests].map(([id, list]) => [id, Array.from(list, (r) => r ?? null)])]),
      reused: [...this.#reused].map(([requestId, v]) => ({ requestId, problemId: v.problemId, pairs: v.pairs })),
      problemOf: [...this.#problemOf],
      requestsOf: [...this.#requestsOf],
      awaiting: [...this.#awaiting].map(([requestId, v]) => ({ requestId, left: v.left, pairs: v.pairs })),
    };
  }
  static restore(d: VerdictIndexData, side: SideReader | null): VerdictIndex {
    const index = new VerdictIndex(side);
    for (const [k, requests] of d.byProblem) index.#byProblem.set(k, new Map(requests.map(([id, list]) => [id, holes(list)])));
    for (const { requestId, problemId, pairs } of d.reused) index.#reused.set(requestId, { problemId, pairs });
    for (const [k, v] of d.problemOf) index.#problemOf.set(k, v);
    for (const [k, v] of d.requestsOf) index.#requestsOf.set(k, v);
    for (const { requestId, left, pairs } of d.awaiting) index.#awaiting.set(requestId, { pairs, left });
    return index;
  }

  /** The recorded verdicts and load outcomes changed since the last saved snapshot, as side
   * rows (see PairRows.sideRows). */
  sideRows(): SideRows {
    return this.#recordedPairs.sideRows();
  }
  /** See PairRows.sideSaved: once saved, verdicts are read from `saved` and dropped here. */
  sideSaved(saved?: SideReader): void {
    this.#recordedPairs.sideSaved(saved);
  }

  /** Recorded verdicts and load outcomes held in memory, and programs whose numbers were
   * looked up or first events noted (see PairRows): what was folded or asked about since the last save, not the run (tests count them). */
  get heldEntries(): number {
    return this.#recordedPairs.heldEntries;
  }

  /** Every recorded verdict and load outcome, whether folded or read from a snapshot's rows, in
   * key order (see PairRows.recorded; tests compare indexes whole with it). */
  recorded(): [string, string][] {
    return this.#recordedPairs.recorded();
  }

  /** Reads the recorded verdicts of these pairs in one batch, for the `has` and `get` that follow
   * (see PairRows.prefetch). */
  prefetch(problemId: string, pairs: readonly Pair[]): void {
    this.#recordedPairs.prefetch(problemId, pairs);
  }

  /** Whether the pair has a recorded verdict in this problem. */
  has(problemId: string, programHash: string, testHash: string): boolean {
    return this.#recordedPairs.has(problemId, programHash, testHash);
  }

  /** What the recorded executions of a program in this problem tell of its module body. */
  load(problemId: string, programHash: string): ModuleLoad {
    return this.#recordedPairs.load(problemId, programHash) ?? 'unknown';
  }

  /** The verdicts of a request: those it executed, then those it reused, under its own ids. */
  of(requestId: string): PairResult[] {
    const k = requestId.slice(0, requestId.lastIndexOf('/'));
    const own = this.#byProblem.get(k)?.get(requestId) ?? [];
    const out = own.filter((v) => v !== undefined);
    const reused = this.#reused.get(requestId);
    if (!reused) return out;
    for (const p of reused.pairs) {
      const v = this.#recordedPairs.get(reused.problemId, p.programHash, p.testHash);
      if (v) {
        out.push({
          requestId,
          programId: p.programId,
          programHash: p.programHash,
          testId: p.testId,
          testHash: p.testHash,
          verdict: v.verdict,
          timeMs: v.timeMs,
          memoryKb: v.memoryKb,
          outputHash: v.outputHash,
          exceptionType: v.exceptionType,
          isolated: v.isolated,
          cached: true,
        });
      }
    }
    return out;
  }
}

/** Splits a plan's pairs into those to execute and those already recorded or already in an
 * earlier request of the same plan (`planned`, updated in place). */
export function splitReused(problemId: string, pairs: readonly Pair[], verdicts: VerdictIndex, planned: Set<string>): { pairs: Pair[]; reused: Pair[] } {
  const fresh: Pair[] = [];
  const reused: Pair[] = [];
  verdicts.prefetch(problemId, pairs);
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
  context: JudgeContext,
  // Between steps: no problem open, so the body holds the Mistake Books, not a step's suites.
  atRest: (snapshot) => Object.keys(snapshot.context.open).length === 0,
  index: {
    create: () => new VerdictIndex(),
    observe: (verdicts, envelope) => verdicts.observe(envelope),
    types: ['ExecutionRequested', 'ProgramExecuted', 'ExecutionCompleted', 'ProblemEvaluated'],
    serialize: (verdicts) => verdicts.serialize(),
    schema: VerdictIndexData,
    restore: (data: VerdictIndexData, side) => VerdictIndex.restore(data, side),
    sideRows: (verdicts) => verdicts.sideRows(),
    sideSaved: (verdicts, saved) => verdicts.sideSaved(saved),
  },
  async run(effect, env, snapshot, verdicts) {
    const p = effect.problem;
    const problem = await env.problem(p.problemId);
    const method = judgementOf(env.config.method);
    if (effect.kind === 'oracle') {
      const pairs = await method.oracle(env, problem, p);
      // With nothing to execute the request counts as complete at once.
      const split = splitReused(p.problemId, pairs, verdicts, new Set());
      return [
        env.event('ExecutionRequested', {
          round: p.round,
          problemId: p.problemId,
          requestId: `${p.key}/oracle`,
          purpose: 'oracle',
          ...requestBody(split.pairs, split.reused),
        }),
      ];
    }
    const book = snapshot.context.mistakeBooks[p.problemId] ?? emptyMistakeBook();
    if (effect.kind === 'plan') {
      const evolved = snapshot.context.evolved[p.problemId] ?? null;
      const tcsBuffer = snapshot.context.tcsBuffers[p.problemId] ?? [];
      return method.plan({
        env,
        problem,
        round: p,
        oracle: verdicts.of(`${p.key}/oracle`),
        book,
        evolved,
        tcsBuffer,
        split: (pairs, planned) => splitReused(p.problemId, pairs, verdicts, planned),
      });
    }
    const stage = snapshot.context.stages[p.round] ?? 1;
    const evolved = snapshot.context.evolved[p.problemId] ?? null;
    const tcsBuffer = snapshot.context.tcsBuffers[p.problemId] ?? [];
    return method.judge({
      env,
      problem,
      round: p,
      book,
      verdicts: (id) => verdicts.of(id),
      load: (programHash) => verdicts.load(p.problemId, programHash),
      stage,
      evolved,
      tcsBuffer,
    });
  },
};
