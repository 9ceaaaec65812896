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
  /** Generated tests judged valid against the reference, over all generated tests. */
  validity: number;
  /** Exact probability that a test drawn from the round's test policy is valid; null as above. */
  exactValid: number | null;
  /** The same two figures for the policies this round's training step made. */
  trainedCorrect: number | null;
  trainedValid: number | null;
  /** Share of (suite, known-incorrect program) pairs where the suite's valid tests fail the program. */
  killRate: number;
  /** Tests in the Mistake Book, over all problems, at the end of the round. */
  mistakeBook: number;
  codeReward: number;
  testReward: number;
  seconds: number | null;
}

interface Accumulator {
  problems: number;
  programs: number;
  passed: number;
  tests: number;
  valid: number;
  targets: number;
  killed: number;
  codeReward: number;
  testReward: number;
  startedAt: string | null;
  completedAt: string | null;
  mistakeBook: number | null;
  exact: { correct: number; validTest: number; trainedCorrect: number; trainedValid: number } | null;
}

export interface RoundTableState {
  rounds: Record<number, Accumulator>;
  /** Current Mistake Book size per problem. */
  bookSizes: Record<string, Record<string, number>>;
}

export const emptyRoundTable = (): RoundTableState => ({ rounds: {}, bookSizes: {} });

const blank = (): Accumulator => ({
  problems: 0,
  programs: 0,
  passed: 0,
  tests: 0,
  valid: 0,
  targets: 0,
  killed: 0,
  codeReward: 0,
  testReward: 0,
  startedAt: null,
  completedAt: null,
  mistakeBook: null,
  exact: null,
});

function withRound(state: RoundTableState, round: number, f: (a: Accumulator) => Partial<Accumulator>): RoundTableState {
  const acc = state.rounds[round] ?? blank();
  return { ...state, rounds: { ...state.rounds, [round]: { ...acc, ...f(acc) } } };
}

function bookTotal(sizes: RoundTableState['bookSizes']): number {
  let n = 0;
  for (const book of Object.values(sizes)) n += Object.keys(book).length;
  return n;
}

export function reduceRoundTable(state: RoundTableState, event: EventEnvelope): RoundTableState {
  switch (event.type) {
    case 'RoundStarted': {
      const d = event.data as EventData<'RoundStarted'>;
      return withRound(state, d.round, () => ({ startedAt: event.at }));
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
        codeReward: a.codeReward + d.rewards.code,
        testReward: a.testReward + d.rewards.test,
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
      const book = { ...(state.bookSizes[d.problemId] ?? {}) };
      for (const c of d.changes) {
        if (c.count <= 0) delete book[c.testKey];
        else book[c.testKey] = c.count;
      }
      return { ...state, bookSizes: { ...state.bookSizes, [d.problemId]: book } };
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

const ratio = (a: number, b: number) => (b === 0 ? 0 : a / b);

/** The finished rows, in round order (a round appears once it is completed). */
export function roundRows(state: RoundTableState): RoundRow[] {
  return Object.entries(state.rounds)
    .map(([round, a]) => ({ round: Number(round), a }))
    .filter(({ a }) => a.completedAt !== null)
    .sort((x, y) => x.round - y.round)
    .map(({ round, a }) => ({
      round,
      problems: a.problems,
      heldOutPass: ratio(a.passed, a.programs),
      exactCorrect: a.exact?.correct ?? null,
      validity: ratio(a.valid, a.tests),
      exactValid: a.exact?.validTest ?? null,
      trainedCorrect: a.exact?.trainedCorrect ?? null,
      trainedValid: a.exact?.trainedValid ?? null,
      killRate: ratio(a.killed, a.targets),
      mistakeBook: a.mistakeBook ?? 0,
      codeReward: ratio(a.codeReward, a.problems),
      testReward: ratio(a.testReward, a.problems),
      seconds: a.startedAt && a.completedAt ? (Date.parse(a.completedAt) - Date.parse(a.startedAt)) / 1000 : null,
    }));
}
