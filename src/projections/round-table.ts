/**
 * The per-round table a person reads at the end of `crucible run`: a pure fold of the log.
 * Wall-clock seconds come from the events' informational `at` and are kept apart from the
 * figures, so that two runs of one seed can be compared on everything else.
 */
import type { EventEnvelope } from '../events/envelope.js';
import type { EventData } from '../events/catalog.js';

export interface RoundRow {
  round: number;
  problems: number;
  /** Held-out pass rate of the Solver's sampled programs: programs passing every official test. */
  heldOutPass: number;
  /** Exact probability that the code policy which drew this round's programs samples a correct
   * program (mean over the round's problems); null when the backend cannot compute it. */
  exactCorrect: number | null;
  /** Generated tests judged valid against the reference, over all generated tests; null when
   * the round judged no generated test (the golden-tests baseline): the figure does not exist. */
  validity: number | null;
  /** Exact probability that a test drawn from the round's test policy is valid; null as above. */
  exactValid: number | null;
  /** The same two figures for the policies this round's training step made. */
  trainedCorrect: number | null;
  trainedValid: number | null;
  /** Share of (suite, known-incorrect program) pairs where the suite's valid tests fail the
   * program; null without judged generated tests or known-incorrect programs. */
  killRate: number | null;
  /** Tests in the Mistake Book, over all problems, at the end of the round; null for a run that
   * keeps no Mistake Book. */
  mistakeBook: number | null;
  codeReward: number;
  /** Mean test reward; null when no generated test was judged (no test-policy reward exists). */
  testReward: number | null;
  seconds: number | null;
}

interface Accumulator {
  problems: number;
  programs: number;
  passed: number;
  tests: number;
  /** Generated tests the Judge judged (TestsJudged): 0 when the method judges none. */
  judged: number;
  valid: number;
  targets: number;
  killed: number;
  /** Mean rewards by problem: summed at the end in the round's schedule order, never in the
   * order the problems were judged, so float sums do not depend on arrival order. */
  rewards: Record<string, { code: number; test: number }>;
  /** The round's problems in schedule order (RoundStarted). */
  schedule: string[];
  startedAt: string | null;
  completedAt: string | null;
  /** Milliseconds the run was stopped while the round was under way (RunResumed). */
  stoppedMs: number;
  mistakeBook: number | null;
  exact: { correct: number; validTest: number; trainedCorrect: number; trainedValid: number } | null;
}

export interface RoundTableState {
  rounds: Record<number, Accumulator>;
  /** Whether the run keeps a Mistake Book (from RunStarted). */
  keepsBook: boolean;
  /** Current Mistake Book size per problem. */
  bookSizes: Record<string, Record<string, number>>;
}

export const emptyRoundTable = (): RoundTableState => ({ rounds: {}, keepsBook: false, bookSizes: {} });

const blank = (): Accumulator => ({
  problems: 0,
  programs: 0,
  passed: 0,
  tests: 0,
  judged: 0,
  valid: 0,
  targets: 0,
  killed: 0,
  rewards: {},
  schedule: [],
  startedAt: null,
  completedAt: null,
  stoppedMs: 0,
  mistakeBook: null,
  exact: null,
});

function withRound(state: RoundTableState, round: number, f: (a: Accumulator) => Partial<Accumulator>): RoundTableState {
  const acc = state.rounds[round] ?? blank();
  return { ...state, rounds: { ...state.rounds, [round]: { ...acc, ...f(acc) } } };
}

/** The methods whose Judge keeps a Mistake Book (Code-A1's loop), when the config enables it. */
const BOOK_METHODS: readonly string[] = ['code-a1', 'self-play'];
export function keepsMistakeBook(method: string, config: unknown): boolean {
  const book = (config as { mistakeBook?: { enabled?: boolean } }).mistakeBook;
  return BOOK_METHODS.includes(method) && book?.enabled !== false;
}

function bookTotal(sizes: RoundTableState['bookSizes']): number {
  let n = 0;
  for (const book of Object.values(sizes)) n += Object.keys(book).length;
  return n;
}

export function reduceRoundTable(state: RoundTableState, event: EventEnvelope): RoundTableState {
  switch (event.type) {
    case 'RunStarted': {
      const d = event.data as EventData<'RunStarted'>;
      return { ...state, keepsBook: keepsMistakeBook(d.method, d.config) };
    }
    case 'TestsJudged': {
      const d = event.data as EventData<'TestsJudged'>;
      return withRound(state, d.round, (a) => ({ judged: a.judged + d.tests.length }));
    }
    case 'RoundStarted': {
      const d = event.data as EventData<'RoundStarted'>;
      return withRound(state, d.round, () => ({ startedAt: event.at, schedule: d.problemIds }));
    }
    case 'ProblemEvaluated': {
      const d = event.data as EventData<'ProblemEvaluated'>;
      return withRound(state, d.round, (a) => ({
        problems: a.problems + 1,
        programs: a.programs + d.heldOut.programs,
        passed: a.passed + d.heldOut.passed,
        tests: a.tests + d.tests.sampled,
        valid: a.valid + d.tests.valid,
        targets: a.targets + d.kill.targets * d.kill.suites,
        killed: a.killed + d.kill.killed,
        rewards: { ...a.rewards, [d.problemId]: { code: d.rewards.code, test: d.rewards.test } },
      }));
    }
    case 'PolicyEvaluated': {
      const d = event.data as EventData<'PolicyEvaluated'>;
      return withRound(state, d.round, () => ({
        exact: { correct: d.sampled.correct, validTest: d.sampled.validTest, trainedCorrect: d.trained.correct, trainedValid: d.trained.validTest },
      }));
    }
    case 'MistakeBookUpdated': {
      const d = event.data as EventData<'MistakeBookUpdated'>;
      // Hundreds of changes an event, most of them removals (decay): a Map takes them in
      // tens of nanoseconds each, an object with deleted keys in about a microsecond. The same
      // keys in the same order come out (both keep insertion order; keys are test JSON, never
      // array indexes).
      const book = new Map(Object.entries(state.bookSizes[d.problemId] ?? {}));
      for (const c of d.changes) {
        if (c.count <= 0) book.delete(c.testKey);
        else book.set(c.testKey, c.count);
      }
      return { ...state, bookSizes: { ...state.bookSizes, [d.problemId]: Object.fromEntries(book) } };
    }
    case 'RunResumed': {
      // The time stopped counts against the round that was under way, if any.
      const d = event.data as EventData<'RunResumed'>;
      const open = Object.entries(state.rounds).find(([, a]) => a.startedAt !== null && a.completedAt === null);
      if (!open || d.stoppedAt === null) return state;
      const stopped = Math.max(0, Date.parse(event.at) - Math.max(Date.parse(d.stoppedAt), Date.parse(open[1].startedAt!)));
      return withRound(state, Number(open[0]), (a) => ({ stoppedMs: a.stoppedMs + stopped }));
    }
    case 'RoundCompleted': {
      const d = event.data as EventData<'RoundCompleted'>;
      const size = bookTotal(state.bookSizes);
      return withRound(state, d.round, () => ({ completedAt: event.at, mistakeBook: size }));
    }
    default:
      return state;
  }
}

/** Sums of the round's per-problem rewards, scheduled problems first in schedule order, any other
 * after them by id: the same figures whatever order the problems were judged in. */
function rewardSums(a: Accumulator): { code: number; test: number } {
  const scheduled = new Set(a.schedule);
  const others = Object.keys(a.rewards)
    .filter((id) => !scheduled.has(id))
    .sort();
  let code = 0;
  let test = 0;
  for (const id of [...a.schedule, ...others]) {
    const r = a.rewards[id];
    if (!r) continue;
    code += r.code;
    test += r.test;
  }
  return { code, test };
}

const ratio = (a: number, b: number) => (b === 0 ? 0 : a / b);
/** A figure over generated tests: null when none was judged, or the denominator is empty. */
const ofJudged = (a: Accumulator, num: number, den: number) => (a.judged === 0 || den === 0 ? null : num / den);

/** The finished rows, in round order (a round appears once it is completed). */
export function roundRows(state: RoundTableState): RoundRow[] {
  return Object.entries(state.rounds)
    .map(([round, a]) => ({ round: Number(round), a }))
    .filter(({ a }) => a.completedAt !== null)
    .sort((x, y) => x.round - y.round)
    .map(({ round, a }) => ({ round, a, sums: rewardSums(a) }))
    .map(({ round, a, sums }) => ({
      round,
      problems: a.problems,
      heldOutPass: ratio(a.passed, a.programs),
      exactCorrect: a.exact?.correct ?? null,
      validity: ofJudged(a, a.valid, a.tests),
      exactValid: a.exact?.validTest ?? null,
      trainedCorrect: a.exact?.trainedCorrect ?? null,
      trainedValid: a.exact?.trainedValid ?? null,
      killRate: ofJudged(a, a.killed, a.targets),
      mistakeBook: state.keepsBook ? (a.mistakeBook ?? 0) : null,
      codeReward: ratio(sums.code, a.problems),
      testReward: ofJudged(a, sums.test, a.problems),
      seconds: a.startedAt && a.completedAt ? (Date.parse(a.completedAt) - Date.parse(a.startedAt) - a.stoppedMs) / 1000 : null,
    }));
}
