/**
 * One variant's re-judgement of a recorded log. The recorded events go through in order; the
 * Judge's own decisions are made again under the variant's config:
 *  - what the other actors wrote (schedules, samples, executions, training) passes unchanged: the
 *    log fixes it;
 *  - the test verdicts (TestsJudged) and the held-out, kill and load requests pass unchanged: no
 *    setting a variant may change reaches them;
 *  - the reward request of the Code-A1 family is planned again from the variant's own Mistake
 *    Book (which tests it replays);
 *  - the judgement (rewards, advantages, TOPVAR, Mistake Book changes, evaluation) is computed
 *    again by the run's own method module (src/actors/methods), every verdict it asks for
 *    answered from the recorded verdicts (read only through src/projections/recorded-verdicts).
 * A verdict the log does not hold refuses the variant, naming the settings that asked for it, or
 * with --execute is run into the variant's own log (./execute.ts).
 */
import { isJudgeStream, JUDGE_STREAM } from '../core/judge-shares.js';
import type { SnapshotFrom } from 'xstate';
import { judgeMachine, openRound } from '../actors/judge.js';
import { ActorFold, FoldError } from '../actors/actor-fold.js';
import { judgementOf } from '../actors/methods/index.js';
import type { JudgeArgs, Pair, Verdicts } from '../actors/methods/contract.js';
import { RunEnv, type PolicyBackend } from '../actors/env.js';
import type { ProblemRound } from '../actors/judge-state.js';
import type { Problem } from '../core/problem.js';
import type { Sandbox } from '../sandbox/api.js';
import { catalog, requestBody, requestPairs, reusedPairs, type EventData } from '../events/catalog.js';
import type { EventEnvelope, NewEvent } from '../events/envelope.js';
import { sha256Hex, type BlobStore } from '../events/blobs.js';
import { asPosition } from '../events/log.js';
import { variantPosition } from './variant-log.js';
import { emptyRecordedVerdicts, loadOf, observeVerdicts, verdictsOf, type RecordedVerdicts, type RequestVerdict } from '../projections/recorded-verdicts.js';
import { applyMistakeBookChanges, emptyMistakeBook, topTests, type MistakeBookChange, type MistakeBookState } from '../rewards/mistake-book.js';
import { canonicalJson } from '../core/canonical-json.js';
import { AblationError, VariantRefusedError } from './errors.js';
import { BOOK_SETTINGS, type Variant } from './variant.js';
import type { VariantExecutions } from './execute.js';

/** The stream the Judge writes to (runtime.ts appends each actor's outputs under its name). */
const HIST_SUITE = 'mistake-book/';
/** The purpose (and request id suffix) of the executions a variant runs with --execute. */
const EXECUTED_PURPOSE = 'mistake-book';
/** Events of the Judge's judgement commit; the first of a problem-round triggers the variant's. */
const JUDGEMENT_TYPES = new Set(['RewardsAssigned', 'MistakeBookUpdated', 'ProblemEvaluated']);
/** What the Judge's machine folds (executions are answered from recorded verdicts instead); it is
 * folded once over the recorded events for every variant (RecordedJudge). */
const MACHINE_TYPES = new Set([
  'RunStarted',
  'ProblemScheduled',
  'SolutionSampled',
  'HeldOutSampled',
  'TestsSampled',
  'ModelSampled',
  'ExecutionRequested',
  'TestsJudged',
  'MistakeBookUpdated',
  'StageDecided',
  'TestsEvolved',
  'ProblemEvaluated',
]);

const refuseWork = (what: string) => new AblationError(`a variant re-judges recorded executions: ${what} is never called`);

/** A variant runs no program: the sandbox it is given refuses. */
const NO_SANDBOX: Sandbox = {
  isolation: 'rlimits',
  run: () => Promise.reject(refuseWork('the sandbox')),
  close: async () => {},
};

/** A variant samples and trains nothing: the policy backend it is given refuses. */
export const NO_POLICIES: PolicyBackend = {
  name: 'none',
  exactBasis: null,
  initialParams: () => {
    throw refuseWork('a policy');
  },
  evaluate: () => {
    throw refuseWork('a policy');
  },
  sampler: () => {
    throw refuseWork('a policy');
  },
  trainer: () => {
    throw refuseWork('a trainer');
  },
};

const pairKey = (p: { programId: string; testId: string; testHash: string }) => `${p.programId}\u0000${p.testId}\u0000${p.testHash}`;
const roundKey = (d: { round: number; problemId: string }) => `${d.round}/${d.problemId}`;

/** A recorded verdict in the shape the method modules read. Only the verdict and the pair are
 * read by a judgement step (the oracle's output, `outputHash`, is read when tests are judged,
 * which a variant does not redo). */
function asCompleted(requestId: string, v: RequestVerdict): Verdicts[number] {
  return {
    requestId,
    programId: v.programId,
    programHash: v.programHash,
    testId: v.testId,
    testHash: v.testHash,
    verdict: v.verdict,
    timeMs: 0,
    memoryKb: 0,
    outputHash: null,
    exceptionType: null,
    isolated: true,
    cached: v.reused,
  };
}

/** The recorded verdicts as every variant reads them at one point of the log: each request's
 * list is built once and shared (read-only) by the variants that ask for it. */
export class RecordedAnswers {
  readonly state: RecordedVerdicts;
  readonly #memo = new Map<string, Verdicts>();

  constructor(state: RecordedVerdicts) {
    this.state = state;
  }

  of(requestId: string): Verdicts {
    let out = this.#memo.get(requestId);
    if (!out) {
      out = Object.freeze(verdictsOf(this.state, requestId).map((v) => asCompleted(requestId, v))) as Verdicts;
      this.#memo.set(requestId, out);
    }
    return out;
  }

  readonly #byPair = new Map<string, ReadonlyMap<string, Verdicts[number]>>();

  /** The request's recorded verdicts by pair (shared, like `of`): what a replanned request of
   * it needs is looked up here before anything else. */
  byPair(requestId: string): ReadonlyMap<string, Verdicts[number]> {
    let out = this.#byPair.get(requestId);
    if (!out) this.#byPair.set(requestId, (out = new Map(this.of(requestId).map((v) => [pairKey(v), v]))));
    return out;
  }
}

/**
 * The Judge's state as the recorded events build it (problem-rounds, stages, EvolveCoder and TCS
 * state), folded once for every variant: a variant changes none of it. Only the Mistake Books
 * differ between variants, and each variant keeps its own. Also keeps, per problem-round, what
 * variants compute alike from the same inputs: the settings-free part of a judgement
 * (JudgementSteps.basis) of the same requests, and the Mistake Book's replay plan and updates
 * under the same book and Mistake Book settings.
 */
export class RecordedJudge {
  /** The Judge's machine, folded as the runtime folds it. */
  readonly #fold = new ActorFold(judgeMachine);
  /** Per open problem-round: what variants computed alike, by the identities of its inputs. */
  readonly #shared = new Map<string, Map<unknown, unknown>>();
  /** Mistake Books after a change, by the book and the change list (both shared objects). */
  readonly #applied = new WeakMap<MistakeBookState, WeakMap<readonly unknown[], MistakeBookState>>();

  /** Folds one recorded event (after every variant has stepped over it). */
  fold(e: EventEnvelope): void {
    if (!MACHINE_TYPES.has(e.type) || (e.type === 'MistakeBookUpdated' && isJudgeStream(e.stream))) return;
    try {
      this.#fold.fold(e);
    } catch (err) {
      if (!(err instanceof FoldError)) throw err;
      throw new AblationError(`the Judge's fold failed on ${e.type} at recorded position ${e.position}: ${String(err.cause)}`);
    }
    // The problem-round is closed: its bases are not asked for again.
    if (e.type === 'ProblemEvaluated' && isJudgeStream(e.stream)) this.#shared.delete(roundKey(e.data as { round: number; problemId: string }));
  }

  get context(): SnapshotFrom<typeof judgeMachine>['context'] {
    return this.#fold.snapshot.context;
  }

  open(key: string): ProblemRound {
    const p = openRound(this.#fold.snapshot, key);
    if (!p) throw new AblationError(`the log judges ${key} before it is scheduled and sampled: not a complete crucible run`);
    return p;
  }

  /** What `compute` gives for problem-round `key` and inputs `tokens` (compared by identity),
   * computed by the first variant asking: variants whose settings lead to the same inputs share
   * the (pure) result. */
  share<T>(key: string, tokens: readonly unknown[], compute: () => T): T {
    let node = this.#shared.get(key);
    if (!node) this.#shared.set(key, (node = new Map()));
    for (const t of tokens) {
      let next = node.get(t) as Map<unknown, unknown> | undefined;
      if (!next) node.set(t, (next = new Map()));
      node = next;
    }
    // The value sits under its own key: one token list may be the start of another.
    if (node.has(RESULT)) return node.get(RESULT) as T;
    const out = compute();
    node.set(RESULT, out);
    return out;
  }

  /** `applyMistakeBookChanges`, the same book and change list giving the same book object. */
  applyChanges(book: MistakeBookState, changes: readonly MistakeBookChange[]): MistakeBookState {
    let byChanges = this.#applied.get(book);
    if (!byChanges) this.#applied.set(book, (byChanges = new WeakMap()));
    let out = byChanges.get(changes);
    if (!out) byChanges.set(changes, (out = applyMistakeBookChanges(book, changes)));
    return out;
  }
}

const RESULT = Symbol('result');

/** The book of a problem without entries: one object, so that variants' books share identities. */
const EMPTY_BOOK: MistakeBookState = emptyMistakeBook();

export class VariantJudge {
  readonly variant: Variant;
  /** The variant's events of the kept types, at variant positions (./variant-log.ts): events
   * passed through are the objects the fan-out gives every variant. */
  readonly events: EventEnvelope[] = [];
  /** The recorded event being stepped over (its ordinal in the read) and how many events the
   * variant has written for it. */
  #ordinal = 0;
  #written = 0;
  readonly #env: RunEnv;
  readonly #problems: ReadonlyMap<string, Problem>;
  readonly #recorded: RecordedJudge;
  /** The variant's own Mistake Books, folded from the changes its judgement made. */
  readonly #books = new Map<string, MistakeBookState>();
  readonly #judged = new Set<string>();
  /** Requests whose pairs the variant planned again, per problem-round until it is judged:
   * requestId -> the pairs it needs (the judgement reads the variant's own verdicts for them). */
  readonly #replanned = new Map<string, Map<string, Pair[]>>();
  readonly #rederivesBook: boolean;
  /** The Mistake Book settings, as the key of the replay plans variants share. */
  readonly #bookSettings: string;
  /** With --execute: where the pairs nobody recorded are run (else such a variant is refused). */
  readonly #executions: VariantExecutions | null;
  /** The verdicts of the executions the variant ran (or found in its own log). */
  #own: RecordedVerdicts = emptyRecordedVerdicts();

  /** The event types the variant's read models read (null: all); the others are not kept. */
  readonly #kept: ReadonlySet<string> | null;

  constructor(
    variant: Variant,
    runId: string,
    problems: ReadonlyMap<string, Problem>,
    blobs: BlobStore,
    recorded: RecordedJudge,
    opts: { executions?: VariantExecutions | null; keep?: readonly string[] | null } = {},
  ) {
    this.variant = variant;
    this.#kept = opts.keep ? new Set(opts.keep) : null;
    this.#executions = opts.executions ?? null;
    this.#problems = problems;
    this.#recorded = recorded;
    this.#env = new RunEnv({ runId, config: variant.config, blobs, sandbox: NO_SANDBOX, backend: NO_POLICIES, problems: [...problems.values()] });
    this.#rederivesBook = variant.config.method === 'code-a1' || variant.config.method === 'self-play';
    this.#bookSettings = canonicalJson(variant.config.mistakeBook);
  }

  /** Folds one recorded event, the `ordinal`-th of the read; `verdicts` holds every verdict
   * recorded up to and including it. The shared RecordedJudge has folded every event before
   * this one. `moved`: the event at its variant position, one object for every variant (null
   * when no variant keeps its type). */
  step(e: EventEnvelope, verdicts: RecordedAnswers, ordinal: number, moved: EventEnvelope | null): Promise<void> | void {
    this.#ordinal = ordinal;
    this.#written = 0;
    if (!isJudgeStream(e.stream)) return this.#pass(e, moved);
    if (e.type === 'ExecutionRequested') {
      const d = e.data as EventData<'ExecutionRequested'>;
      if (d.purpose === 'reward' && this.#rederivesBook) {
        const planned = this.#replanReward(e, d);
        return this.#pass(planned === e ? e : planned, planned === e ? moved : planned);
      }
      return this.#pass(e, moved);
    }
    if (!JUDGEMENT_TYPES.has(e.type)) return this.#pass(e, moved);
    const key = roundKey(e.data as { round: number; problemId: string });
    if (this.#judged.has(key)) return;
    this.#judged.add(key);
    // Only a judgement waits (on blobs, or executions with --execute): the rest is synchronous.
    return this.#judgeRound(key, e, verdicts);
  }

  async #judgeRound(key: string, e: EventEnvelope, verdicts: RecordedAnswers): Promise<void> {
    const outputs = await this.#judge(key, verdicts);
    this.#replanned.delete(key);
    outputs.forEach((ne, i) => this.#emit(this.#envelope(ne, e, i)));
  }

  /** A recorded event passed through unchanged: the shared object at its variant position. */
  #pass(e: EventEnvelope, moved: EventEnvelope | null): void {
    if (moved === null || this.#written > 0) return this.#emit(e);
    this.#written++;
    if (this.#kept === null || this.#kept.has(e.type)) this.events.push(moved);
    this.#foldBook(e);
  }

  #emit(e: EventEnvelope): void {
    const position = variantPosition(this.#ordinal, this.#written++);
    if (this.#kept === null || this.#kept.has(e.type)) this.events.push({ ...e, position });
    this.#foldBook(e);
  }

  #foldBook(e: EventEnvelope): void {
    if (e.type === 'MistakeBookUpdated') {
      const d = e.data as EventData<'MistakeBookUpdated'>;
      this.#books.set(d.problemId, this.#recorded.applyChanges(this.#books.get(d.problemId) ?? EMPTY_BOOK, d.changes));
    }
  }

  #envelope(ne: NewEvent, cause: EventEnvelope, i: number): EventEnvelope {
    return {
      id: `${cause.id}/${this.variant.name}/${i}`,
      type: ne.type,
      v: catalog.currentVersion(ne.type),
      runId: cause.runId,
      stream: JUDGE_STREAM,
      position: cause.position,
      commitId: cause.commitId,
      causationId: ne.causationId ?? null,
      correlationId: ne.correlationId ?? null,
      at: cause.at,
      data: ne.data,
    };
  }

  /** The reward request as the variant's Mistake Book plans it: the recorded generated-test pairs,
   * then the variant's replayed tests per program (and the reference on them for the blacklist),
   * in the order the Judge plans them. Unchanged when it needs exactly the recorded pairs. */
  #replanReward(e: EventEnvelope, d: EventData<'ExecutionRequested'>): EventEnvelope {
    const book = this.#books.get(d.problemId) ?? EMPTY_BOOK;
    // Variants with the same book and Mistake Book settings plan alike.
    const { event, want } = this.#recorded.share(roundKey(d), ['replan', e, book, this.#bookSettings], () => this.#replan(e, d, book));
    if (want) {
      const key = roundKey(d);
      this.#replanned.set(key, (this.#replanned.get(key) ?? new Map()).set(d.requestId, want));
    }
    return event;
  }

  #replan(e: EventEnvelope, d: EventData<'ExecutionRequested'>, book: MistakeBookState): { event: EventEnvelope; want: Pair[] | null } {
    const p = this.#recorded.open(roundKey(d));
    const cfg = this.variant.config.mistakeBook;
    const history = cfg.enabled ? topTests(book, cfg.replay) : [];
    const executed = requestPairs(d);
    const recorded = [...executed, ...reusedPairs(d)];
    // The generated-test pairs by program, in recorded order (one pass, not one per program).
    const generatedOf = new Map<string, Pair[]>();
    for (const x of recorded) {
      if (x.testId.startsWith(HIST_SUITE)) continue;
      const list = generatedOf.get(x.programId);
      if (list) list.push(x);
      else generatedOf.set(x.programId, [x]);
    }
    const want: Pair[] = [];
    for (const s of p.solutions) {
      want.push(...(generatedOf.get(s.solutionId) ?? []));
      for (const h of history) want.push({ programId: s.solutionId, programHash: s.programHash, testId: `${HIST_SUITE}${h.testKey}`, testHash: h.testHash });
    }
    const solutionIds = new Set(p.solutions.map((s) => s.solutionId));
    // Pairs of programs that are not this round's samples, in recorded order.
    for (const x of recorded) if (!solutionIds.has(x.programId) && !x.testId.startsWith(HIST_SUITE)) want.push(x);
    if (history.length > 0 && cfg.blacklist) {
      const reference = this.#problems.get(d.problemId)?.solutions[0];
      if (reference === undefined) throw new AblationError(`problem ${d.problemId} has no reference program: the Mistake Book blacklist needs one`);
      const referenceHash = sha256Hex(reference);
      for (const h of history) want.push({ programId: 'reference', programHash: referenceHash, testId: `${HIST_SUITE}${h.testKey}`, testHash: h.testHash });
    }
    const same =
      want.length === recorded.length &&
      (() => {
        const keys = new Set(recorded.map(pairKey));
        return want.every((x) => keys.has(pairKey(x)));
      })();
    if (same) return { event: e, want: null };
    // Pairs this request executed in the run stay its own, in their recorded order (the recorded
    // results name them by position); the others are answered from earlier records. What the
    // variant's judgement reads is `want` (see #verdicts).
    const executedKeys = new Set(executed.map(pairKey));
    const data = catalog.encode(
      'ExecutionRequested',
      {
        ...d,
        ...requestBody(
          executed,
          want.filter((x) => !executedKeys.has(pairKey(x))),
        ),
      },
      {},
    ).data;
    // At its variant position already: variants planning alike share the object.
    return { event: { ...e, id: `${e.id}/replanned`, data, position: variantPosition(this.#ordinal, 0) }, want };
  }

  /** What a replanned request needs, answered from the recorded verdicts (its own, then those
   * other requests of the problem recorded) and then from the variant's own executions. */
  #answer(requestId: string, want: readonly Pair[], p: ProblemRound, answers: RecordedAnswers): { byKey: Map<string, RequestVerdict>; missing: Pair[] } {
    const byKey = new Map<string, RequestVerdict>(verdictsOf(answers.state, requestId).map((v) => [pairKey(v), v]));
    for (const state of [answers.state, this.#own]) {
      const lacking = want.filter((x) => !byKey.has(pairKey(x)));
      if (lacking.length === 0) break;
      // Pairs recorded by other requests of the problem: asked for as one more request reusing them.
      const probe = `${requestId}/variant`;
      const asked: EventEnvelope = {
        id: probe,
        type: 'ExecutionRequested',
        v: catalog.currentVersion('ExecutionRequested'),
        runId: this.#env.runId,
        stream: JUDGE_STREAM,
        position: asPosition(1),
        commitId: probe,
        causationId: null,
        correlationId: null,
        at: new Date(0).toISOString(),
        data: { round: p.round, problemId: p.problemId, requestId: probe, purpose: 'reward', ...requestBody([], lacking) },
      };
      for (const v of verdictsOf(
        observeVerdicts(state, asked, () => true),
        probe,
      ))
        byKey.set(pairKey(v), v);
    }
    return { byKey, missing: want.filter((x) => !byKey.has(pairKey(x))) };
  }

  /** With --execute: runs the pairs the problem-round's replanned requests need and nobody
   * recorded, into the variant's own log, and adds them to the variant's events. */
  async #executeMissing(key: string, p: ProblemRound, answers: RecordedAnswers): Promise<void> {
    if (!this.#executions) return;
    for (const [requestId, want] of this.#replanned.get(key) ?? []) {
      const { missing } = this.#answer(requestId, want, p, answers);
      if (missing.length === 0) continue;
      for (const e of await this.#executions.run(p.round, p.problemId, `${key}/${EXECUTED_PURPOSE}`, missing)) {
        this.#emit(e);
        this.#own = observeVerdicts(this.#own, e, () => false);
      }
    }
  }

  /** Verdicts of a request as the variant needs them, from the recorded ones (and its own executions). */
  #verdicts(requestId: string, p: ProblemRound, answers: RecordedAnswers): Verdicts {
    const want = this.#replanned.get(p.key)?.get(requestId);
    if (!want) return answers.of(requestId);
    // Most replanned requests need only pairs the request itself recorded (the Mistake Book off
    // or narrower): those verdicts, as every variant reads them, without building them again.
    const own = answers.byPair(requestId);
    const found = want.map((x) => own.get(pairKey(x)));
    if (found.every((v) => v !== undefined)) return found as Verdicts[number][];
    const { byKey, missing } = this.#answer(requestId, want, p, answers);
    if (missing.length > 0) {
      const settings = this.variant.overrides.map((o) => o.key).filter((k) => BOOK_SETTINGS.includes(k));
      const first = missing[0]!;
      throw new VariantRefusedError(
        this.variant.name,
        settings.length > 0 ? settings.join(', ') : null,
        `needs ${missing.length} verdict(s) the run never recorded (round ${p.round}, problem ${p.problemId}: e.g. program ${first.programId} on ${first.testId.startsWith(HIST_SUITE) ? 'Mistake Book test' : 'test'} ${first.testHash.slice(0, 12)}); ` +
          'a variant answers only from recorded executions unless --execute runs the missing ones into its own log',
      );
    }
    return want.map((x) => asCompleted(requestId, byKey.get(pairKey(x))!));
  }

  async #judge(key: string, answers: RecordedAnswers): Promise<NewEvent[]> {
    const p = this.#recorded.open(key);
    const ctx = this.#recorded.context;
    const problem = this.#problems.get(p.problemId);
    if (!problem) throw new AblationError(`problem ${p.problemId} is judged in the log but not listed in its RunStarted`);
    await this.#executeMissing(key, p, answers);
    const asked = new Map<string, Verdicts>();
    const args: JudgeArgs = {
      env: this.#env,
      problem,
      round: p,
      book: this.#books.get(p.problemId) ?? EMPTY_BOOK,
      verdicts: (requestId) => {
        // Asked for by the refusal check below, then by the judgement.
        let out = asked.get(requestId);
        if (!out) asked.set(requestId, (out = this.#verdicts(requestId, p, answers)));
        return out;
      },
      load: (programHash) => loadOf(answers.state, p.problemId, programHash),
      stage: ctx.stages[p.round] ?? 1,
      evolved: ctx.evolved[p.problemId] ?? null,
      tcsBuffer: ctx.tcsBuffers[p.problemId] ?? [],
    };
    const method = judgementOf(this.variant.config.method);
    const steps = method.steps;
    if (!steps) return method.judge(args);
    // The evaluation figures read the held-out and kill requests, which no variant plans again.
    const evaluation = <T>(compute: () => T): T => this.#recorded.share(key, ['evaluation'], compute);
    const basisArgs = { blobs: this.#env.blobs, problem, round: p, verdicts: args.verdicts, load: args.load, evaluation };
    const basis = () => steps.basis(basisArgs);
    // Shared by the variants that judge the same requests: the recorded ones, or the same
    // replanned ones answered from recorded verdicts. One that executed pairs judges its own.
    const ofRound = [...(this.#replanned.get(key) ?? [])];
    if (ofRound.length > 0 && this.#executions) return steps.finish(await basis(), args);
    // A variant lacking a verdict is refused in its own name before anything is shared.
    for (const [id] of ofRound) args.verdicts(id);
    const wants = ofRound.map(([, want]) => want);
    // A reward request replaying no Mistake Book test (the Mistake Book off) needs the recorded
    // pairs less the replays: its basis is the recorded one's less those columns, derived.
    const derive = steps.withoutReplays;
    if (derive && wants.length > 0 && wants.every((want) => !want.some((x) => x.testId.startsWith(HIST_SUITE)))) {
      const recordedBasis = this.#recorded.share(key, ['basis', steps.basis], () => steps.basis({ ...basisArgs, verdicts: (id) => answers.of(id) }));
      return steps.finish(await this.#recorded.share(key, ['basis', steps.basis, 'without replays'], async () => derive(await recordedBasis)), args);
    }
    return steps.finish(await this.#recorded.share(key, ['basis', steps.basis, ...wants], basis), args);
  }
}
