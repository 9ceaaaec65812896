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
import { assign, enqueueActions, setup } from 'xstate';
import type { ActorRefFrom, SnapshotFrom } from 'xstate';
import type { ActorDefinition } from './runtime.js';
import type { LogEvent } from './actor-fold.js';
import { problemRoundMachine, roundOfRequest, workOfRound } from './problem-round.js';
import type { RunEnv } from './env.js';
import { configOf, dataOf } from './events.js';
import { requestBody, requestPairs, requestSize, reusedPairs, type EventData, type ExecutionPair } from '../events/catalog.js';
import type { EventEnvelope } from '../events/envelope.js';
import { emptyMistakeBook, applyMistakeBookChanges } from '../rewards/mistake-book.js';
import { judgementOf } from './methods/index.js';
import { tcsBufferAfter } from './methods/tcs.js';
import { JudgeContext, ProblemRound, VerdictIndexData } from './judge-state.js';
import type { SideReader, SideRows } from './snapshots.js';
import { ProgramHistory, RecordedResults, resultsOf } from './program-history.js';
import { NO_LOG, type ReadAt } from '../events/read-at.js';
import { pairResultsOf, type PairResult } from '../events/program-executed.js';
import type { ModuleLoad } from '../core/module-load.js';

export type { EvolvedState, ProblemRound, SolutionRef, SuiteRef } from './judge-state.js';

export { JudgeContext };

const key = (round: number, problemId: string) => `${round}/${problemId}`;

/** The problem-round a log event names (null: none, or an event the Judge reads whole). */
function roundKeyOf(event: LogEvent): string | null {
  const e = event.envelope;
  switch (e.type) {
    case 'SolutionSampled':
    case 'HeldOutSampled':
    case 'TestsSampled':
    case 'ExecutionRequested':
    case 'TestsJudged':
    case 'ProblemEvaluated': {
      const d = e.data as { round: number; problemId: string };
      return key(d.round, d.problemId);
    }
    case 'ModelSampled':
      // Sample ids are `<round>/<problemId>/s<i>` (programs) and `<that>/t<j>` (suites).
      return dataOf(e, 'ModelSampled').sampleId.replace(/\/s\d+(\/t\d+)?$/, '');
    case 'ProgramExecuted':
    case 'ExecutionCompleted':
      return roundOfRequest((e.data as { requestId: string }).requestId);
    default:
      return null;
  }
}

type Snapshot = SnapshotFrom<typeof judgeMachine>;
type RoundActor = ActorRefFrom<typeof problemRoundMachine>;

/** The open problem-round actors, by key, in the order they were scheduled. */
function roundsOf(snapshot: { children: Record<string, unknown> }): [string, RoundActor][] {
  return Object.entries(snapshot.children).filter((e): e is [string, RoundActor] => e[1] !== undefined);
}

/** An open problem-round's state (undefined: not open). */
export function openRound(snapshot: Snapshot, k: string): ProblemRound | undefined {
  return (snapshot.children[k] as RoundActor | undefined)?.getSnapshot().context;
}

/** The open problem-rounds' states, in the order they were scheduled. */
export function openRounds(snapshot: Snapshot): ProblemRound[] {
  return roundsOf(snapshot).map(([, r]) => r.getSnapshot().context);
}

export const judgeMachine = setup({
  types: { context: {} as JudgeContext, events: {} as LogEvent },
  actors: { problemRound: problemRoundMachine },
  actions: {
    /** A log event that names an open problem-round goes to its actor. */
    forward: enqueueActions(({ event, enqueue, self }) => {
      const k = roundKeyOf(event);
      const round = k === null ? undefined : (self.getSnapshot().children[k] as RoundActor | undefined);
      if (round) enqueue.sendTo(round, event);
    }),
  },
}).createMachine({
  id: 'judge',
  context: { suitesPerProgram: 1, mistakeBooks: {}, stages: {}, evolved: {}, tcsBuffers: {}, tcs: null },
  on: {
    RunStarted: {
      actions: assign(({ event }) => {
        const config = configOf(event.envelope);
        const tcs = config.method === 'tcs' ? { bufferSize: config.tcs.bufferSize, maxStaleness: config.tcs.maxStaleness } : null;
        return {
          suitesPerProgram: config.sampling.suitesPerProgram,
          ...(config.sampling.heldOutSamples !== undefined ? { heldOutSamples: config.sampling.heldOutSamples } : {}),
          tcs,
          keepsTokens: config.method === 'cure',
        };
      }),
    },
    ProblemScheduled: {
      actions: enqueueActions(({ context, event, enqueue }) => {
        const d = dataOf(event.envelope, 'ProblemScheduled');
        const k = key(d.round, d.problemId);
        const input: ProblemRound = {
          key: k,
          round: d.round,
          problemId: d.problemId,
          groupSize: d.groupSize,
          suitesPerProgram: context.suitesPerProgram,
          testVersion: d.testVersion,
          solutions: [],
          suites: [],
          issued: [],
          completed: [],
          awaiting: {},
          judgedTests: null,
          ...(context.heldOutSamples !== undefined ? { heldOutSize: context.heldOutSamples, heldOut: [] } : {}),
        };
        enqueue.spawnChild('problemRound', { id: k, input });
      }),
    },
    SolutionSampled: { actions: 'forward' },
    HeldOutSampled: { actions: 'forward' },
    TestsSampled: { actions: 'forward' },
    // CURE's length regularization reads the samples' recorded tokens; other methods keep none.
    ModelSampled: { guard: ({ context }) => context.keepsTokens === true, actions: 'forward' },
    ExecutionRequested: { actions: 'forward' },
    ProgramExecuted: { actions: 'forward' },
    ExecutionCompleted: { actions: 'forward' },
    TestsJudged: {
      actions: enqueueActions(({ context, event, enqueue, self }) => {
        const d = dataOf(event.envelope, 'TestsJudged');
        const round = self.getSnapshot().children[key(d.round, d.problemId)] as RoundActor | undefined;
        if (!round) return;
        if (context.tcs) {
          const buffer = tcsBufferAfter(context.tcsBuffers[d.problemId] ?? [], round.getSnapshot().context, d.tests, context.tcs);
          enqueue.assign({ tcsBuffers: { ...context.tcsBuffers, [d.problemId]: buffer } });
        }
        enqueue.sendTo(round, event);
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
    // The round is judged: its actor ends, and the Judge's state holds no more of it.
    ProblemEvaluated: {
      actions: enqueueActions(({ event, enqueue, self }) => {
        const d = dataOf(event.envelope, 'ProblemEvaluated');
        const round = self.getSnapshot().children[key(d.round, d.problemId)] as RoundActor | undefined;
        if (!round) return;
        enqueue.sendTo(round, event);
        enqueue.stopChild(round);
      }),
    },
  },
});

export type JudgeEffect =
  | { key: string; kind: 'oracle'; problem: ProblemRound }
  | { key: string; kind: 'plan'; problem: ProblemRound }
  | { key: string; kind: 'judge'; problem: ProblemRound };

/** The work each open problem-round's state calls for (see workOfRound). */
export function judgePending(snapshot: Snapshot): JudgeEffect[] {
  const effects: JudgeEffect[] = [];
  for (const [k, round] of roundsOf(snapshot)) {
    const state = round.getSnapshot();
    const kind = workOfRound(state);
    if (kind) effects.push({ key: `${k}/${kind}`, kind, problem: state.context });
  }
  return effects;
}

type Pair = ExecutionPair;

/** A pair within a problem: plans reuse verdicts of their own problem only, whose earlier
 * rounds are finished, so a reused verdict is always recorded by the time it is judged. */
const pairKey = (problemId: string, programHash: string, testHash: string) => `${problemId}\u0000${programHash}\u0000${testHash}`;

/** Verdicts by problem-round and request, rebuilt by folding; kept outside the machine so each
 * event costs O(its results). A problem-round's own lists are dropped once it is evaluated.
 *
 * What a later plan may reuse, the verdicts recorded in a problem and the load outcome of each of
 * its programs, grows with the whole run and is already in the log: the index keeps, per problem
 * and program, where (see ProgramHistory), and a plan reads the recorded verdicts of the programs
 * it asks about from the log (`resultsOf`); only programs with history are read (a problem's
 * reference, its known-incorrect programs), a fresh sample costs a lookup. The snapshot body
 * holds the open work. */
export class VerdictIndex {
  readonly #byProblem = new Map<string, Map<string, PairResult[]>>();
  /** Reused pairs per request, answered from the recorded verdicts when the request is read. */
  readonly #reused = new Map<string, { problemId: string; pairs: Pair[] }>();
  /** Where each program's verdicts in each problem (the scope) are in the log. */
  readonly #history: ProgramHistory;
  readonly #read: ReadAt;
  /** requestId -> its problem and its position in the log (until its problem-round is evaluated). */
  readonly #problemOf = new Map<string, { problemId: string; position: number }>();
  /** Problem-round -> its requests, so evaluation drops their entries. */
  readonly #requestsOf = new Map<string, string[]>();
  /** Pairs of requests whose results are still to come (results name pairs by position). */
  readonly #awaiting = new Map<string, { pairs: Pair[]; left: number }>();
  constructor(side: SideReader | null = null, read: ReadAt = NO_LOG) {
    this.#history = new ProgramHistory(side);
    this.#read = read;
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
      this.#problemOf.set(d.requestId, { problemId: d.problemId, position: envelope.position });
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
    const request = this.#problemOf.get(requestId);
    if (envelope.type === 'ProgramExecuted') {
      const d = envelope.data as EventData<'ProgramExecuted'>;
      const wait = this.#awaiting.get(requestId);
      if (wait && (wait.left -= results.length) <= 0) this.#awaiting.delete(requestId);
      if (request !== undefined) this.#history.recordLoad(request.problemId, d.programHash, envelope.position, d.load);
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
    if (request === undefined) return;
    // A sandbox error is the sandbox's failure, not a verdict: such a pair is executed again.
    const tests = results.flatMap((d) => (d.verdict === 'sandbox_error' ? [] : [d.testHash]));
    if (tests.length === 0) return;
    // One event holds one program's results (an older per-pair event names its own test).
    this.#history.record(request.problemId, results[0]!.programHash, envelope.position, envelope.type === 'ProgramExecuted' ? request.position : 0, tests);
  }

  /** For actor snapshots: the open work as JSON data (see VerdictIndexData), and an index from
   * that data and the snapshot's side rows. */
  serialize(): VerdictIndexData {
    return {
      byProblem: [...this.#byProblem].map(([k, requests]) => [k, [...requests].map(([id, list]) => [id, Array.from(list, (r) => r ?? null)])]),
      reused: [...this.#reused].map(([requestId, v]) => ({ requestId, problemId: v.problemId, pairs: v.pairs })),
      problemOf: [...this.#problemOf].map(([requestId, v]) => [requestId, v.problemId, v.position]),
      requestsOf: [...this.#requestsOf],
      awaiting: [...this.#awaiting].map(([requestId, v]) => ({ requestId, left: v.left, pairs: v.pairs })),
    };
  }
  static restore(d: VerdictIndexData, side: SideReader | null, read: ReadAt = NO_LOG): VerdictIndex {
    const index = new VerdictIndex(side, read);
    for (const [k, requests] of d.byProblem) index.#byProblem.set(k, new Map(requests.map(([id, list]) => [id, holes(list)])));
    for (const { requestId, problemId, pairs } of d.reused) index.#reused.set(requestId, { problemId, pairs });
    for (const [requestId, problemId, position] of d.problemOf) index.#problemOf.set(requestId, { problemId, position });
    for (const [k, v] of d.requestsOf) index.#requestsOf.set(k, v);
    for (const { requestId, left, pairs } of d.awaiting) index.#awaiting.set(requestId, { pairs, left });
    return index;
  }

  /** The index entries changed since the last saved snapshot, as side rows (see ProgramHistory). */
  sideRows(): SideRows {
    return this.#history.sideRows();
  }
  /** See ProgramHistory.sideSaved: once saved, entries are read from `saved` and dropped here. */
  sideSaved(saved?: SideReader): void {
    this.#history.sideSaved(saved);
  }

  /** Index entries held in memory: those read or changed since the last save, not the run's
   * (tests count them). */
  get heldEntries(): number {
    return this.#history.heldEntries;
  }

  /** Every index entry, whether held or read from a snapshot's rows, in key order (see
   * ProgramHistory.recorded; tests compare indexes whole with it). */
  recorded(): [string, string][] {
    return this.#history.recorded();
  }

  /** The recorded verdicts in this problem of `pairs`, read from the log where the index says they are. */
  resultsOf(problemId: string, pairs: Iterable<{ programHash: string; testHash: string }>): Promise<RecordedResults> {
    return resultsOf(this.#history, problemId, pairs, this.#read);
  }

  /** What the recorded executions of a program in this problem tell of its module body. */
  load(problemId: string, programHash: string): ModuleLoad {
    return this.#history.load(problemId, programHash) ?? 'unknown';
  }

  /** The verdicts of each request of an open problem-round, the reused ones read from the log
   * once for all of them: those it executed, then those it reused, under its own ids. */
  async verdictsOf(roundKey: string): Promise<(requestId: string) => PairResult[]> {
    const reused = (this.#requestsOf.get(roundKey) ?? []).flatMap((id) => this.#reused.get(id) ?? []);
    const recorded =
      reused.length === 0
        ? RecordedResults.EMPTY
        : await this.resultsOf(
            reused[0]!.problemId,
            reused.flatMap((r) => r.pairs),
          );
    // A judgement reads a request several times (rewards, evaluation, tallies): built once.
    const built = new Map<string, PairResult[]>();
    return (requestId) => {
      let out = built.get(requestId);
      if (out === undefined) built.set(requestId, (out = this.#of(requestId, recorded)));
      return out;
    };
  }

  #of(requestId: string, recorded: RecordedResults): PairResult[] {
    const k = requestId.slice(0, requestId.lastIndexOf('/'));
    const own = this.#byProblem.get(k)?.get(requestId) ?? [];
    const out = own.filter((v) => v !== undefined);
    const reused = this.#reused.get(requestId);
    if (!reused) return out;
    for (const p of reused.pairs) {
      const v = recorded.get(p.programHash, p.testHash);
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

/** Splits a plan's pairs into those to execute and those already recorded (`recorded`, read for
 * these pairs) or already in an earlier request of the same plan (`planned`, updated in place). */
export function splitReused(problemId: string, pairs: readonly Pair[], recorded: RecordedResults, planned: Set<string>): { pairs: Pair[]; reused: Pair[] } {
  const fresh: Pair[] = [];
  const reused: Pair[] = [];
  for (const p of pairs) {
    const k = pairKey(problemId, p.programHash, p.testHash);
    if (planned.has(k) || recorded.has(p.programHash, p.testHash)) reused.push(p);
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
  children: { problemRound: { machine: problemRoundMachine, context: ProblemRound } },
  // Between steps: no problem open, so the body holds the Mistake Books, not a step's suites.
  atRest: (snapshot) => roundsOf(snapshot).length === 0,
  index: {
    create: (read) => new VerdictIndex(null, read),
    observe: (verdicts, envelope) => verdicts.observe(envelope),
    types: ['ExecutionRequested', 'ProgramExecuted', 'ExecutionCompleted', 'ProblemEvaluated'],
    serialize: (verdicts) => verdicts.serialize(),
    schema: VerdictIndexData,
    restore: (data: VerdictIndexData, side, read) => VerdictIndex.restore(data, side, read),
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
      const split = splitReused(p.problemId, pairs, await verdicts.resultsOf(p.problemId, pairs), new Set());
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
        oracle: (await verdicts.verdictsOf(p.key))(`${p.key}/oracle`),
        book,
        evolved,
        tcsBuffer,
        split: async (pairs, planned) => splitReused(p.problemId, pairs, await verdicts.resultsOf(p.problemId, pairs), planned),
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
      verdicts: await verdicts.verdictsOf(p.key),
      load: (programHash) => verdicts.load(p.problemId, programHash),
      stage,
      evolved,
      tcsBuffer,
    });
  },
};
