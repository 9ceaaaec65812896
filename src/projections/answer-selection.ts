/**
 * Answer selection (best-of-N with generated tests, as in CURE and TCS), as a projection of the
 * recorded events: per problem-round, pick one of the N sampled programs by how it did on the
 * tests the Judge ran it on, and ask whether the pick passes the held-out tests. Compared with a
 * random pick (the exact expected value over the N samples) and the oracle (some sample passes).
 *
 * What it reads, all from the log: SolutionSampled (the N candidates), TestsJudged (which tests
 * are usable generated tests), and the verdicts of the requests `<round>/<problemId>/reward`
 * (generated tests and replayed Mistake Book tests) and `.../heldout` (official held-out tests),
 * executed or reused (see recorded-verdicts.ts). A row is final at ProblemEvaluated.
 *
 * The Judge runs each program on the suites drawn for it (and on the replayed Mistake Book
 * tests, the same for all programs), so programs may face different numbers of generated tests:
 * scores are pass rates, not raw counts. Two selectors:
 *   - generated:  generated-test pass rate;
 *   - with-book:  pass rate over generated and Mistake Book tests together.
 * Ties, in this order: higher pass rate, more tests passed, more Mistake Book tests passed, the
 * earlier sample (lower sampling index), then the smaller solution id. A program with no
 * executed test has rate 0. "Passes held out" means what the round table means: at least one
 * held-out verdict, all accepted.
 */
import type { EventEnvelope } from '../events/envelope.js';
import type { EventData } from '../events/catalog.js';
import {
  emptyRecordedVerdicts,
  forgetRequests,
  observeVerdicts,
  verdictsOf,
  VERDICT_EVENT_TYPES,
  type RecordedVerdicts,
  type RequestVerdict,
} from './recorded-verdicts.js';

export interface Tally {
  passed: number;
  run: number;
}

export interface CandidateScore {
  solutionId: string;
  /** Sampling index within the group (the deterministic tie-break). */
  index: number;
  programHash: string;
  generated: Tally;
  book: Tally;
  heldOut: Tally;
  passesHeldOut: boolean;
}

export const SELECTORS = ['generated', 'with-book'] as const;
export type Selector = (typeof SELECTORS)[number];

const tallyOf = (c: CandidateScore, by: Selector): Tally =>
  by === 'generated' ? c.generated : { passed: c.generated.passed + c.book.passed, run: c.generated.run + c.book.run };

/** Compares a/b with b/a exactly (no floating point); a rate over zero tests is 0. */
function compareRates(a: Tally, b: Tally): number {
  const [ap, ar] = a.run === 0 ? [0, 1] : [a.passed, a.run];
  const [bp, br] = b.run === 0 ? [0, 1] : [b.passed, b.run];
  return ap * br - bp * ar;
}

/** Negative when `a` is the better pick (sorts first). */
export function compareCandidates(a: CandidateScore, b: CandidateScore, by: Selector): number {
  const ta = tallyOf(a, by);
  const tb = tallyOf(b, by);
  return (
    compareRates(tb, ta) ||
    tb.passed - ta.passed ||
    b.book.passed - a.book.passed ||
    a.index - b.index ||
    (a.solutionId < b.solutionId ? -1 : a.solutionId > b.solutionId ? 1 : 0)
  );
}

/** The selected candidate (null when there is none). */
export function selectAnswer(candidates: readonly CandidateScore[], by: Selector): CandidateScore | null {
  let best: CandidateScore | null = null;
  for (const c of candidates) if (best === null || compareCandidates(c, best, by) < 0) best = c;
  return best;
}

export interface ProblemSelection {
  round: number;
  problemId: string;
  candidates: number;
  /** Candidates passing the held-out tests. */
  passing: number;
  selectedGenerated: string | null;
  generatedPass: boolean;
  selectedWithBook: string | null;
  withBookPass: boolean;
  /** Expected held-out pass of a uniformly random pick: passing / candidates. */
  randomPass: number;
  /** Whether some candidate passes (what a perfect selector achieves). */
  oraclePass: boolean;
  scores: CandidateScore[];
}

export function selectForProblem(round: number, problemId: string, scores: readonly CandidateScore[]): ProblemSelection {
  const passing = scores.filter((c) => c.passesHeldOut).length;
  const gen = selectAnswer(scores, 'generated');
  const book = selectAnswer(scores, 'with-book');
  return {
    round,
    problemId,
    candidates: scores.length,
    passing,
    selectedGenerated: gen?.solutionId ?? null,
    generatedPass: gen?.passesHeldOut ?? false,
    selectedWithBook: book?.solutionId ?? null,
    withBookPass: book?.passesHeldOut ?? false,
    randomPass: scores.length === 0 ? 0 : passing / scores.length,
    oraclePass: passing > 0,
    scores: [...scores],
  };
}

export interface RoundSelection {
  round: number;
  problems: number;
  /** Share of problems whose pick passes held-out, per selector; random is the mean expected
   * value. A selector's figure is null when no candidate of the round ran a test it reads (a
   * method without generated tests): there was nothing to select by. */
  generated: number | null;
  withBook: number | null;
  random: number;
  oracle: number;
}

/** Per-round means over the problems of the round, in round order. */
export function roundSelections(problems: readonly ProblemSelection[]): RoundSelection[] {
  const byRound = new Map<number, ProblemSelection[]>();
  for (const p of problems) {
    const list = byRound.get(p.round);
    if (list) list.push(p);
    else byRound.set(p.round, [p]);
  }
  const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
  const ran = (ps: ProblemSelection[], by: Selector) => ps.some((p) => p.scores.some((c) => tallyOf(c, by).run > 0));
  return [...byRound.entries()]
    .sort(([a], [b]) => a - b)
    .map(([round, ps]) => ({
      round,
      problems: ps.length,
      generated: ran(ps, 'generated') ? mean(ps.map((p) => (p.generatedPass ? 1 : 0))) : null,
      withBook: ran(ps, 'with-book') ? mean(ps.map((p) => (p.withBookPass ? 1 : 0))) : null,
      random: mean(ps.map((p) => p.randomPass)),
      oracle: mean(ps.map((p) => (p.oraclePass ? 1 : 0))),
    }));
}

/** What a verdict is counted by: whose, on which test, and what it says. */
type Counted = Pick<RequestVerdict, 'programId' | 'testId' | 'verdict'> & Partial<RequestVerdict>;

/** Scores the candidates of one problem-round from its requests' verdicts. */
export function scoreCandidates(args: {
  candidates: readonly { solutionId: string; programHash: string; index: number }[];
  /** Test ids of the usable generated tests (TestsJudged with an oracle). */
  generatedTests: ReadonlySet<string>;
  reward: readonly Counted[];
  heldOut: readonly Counted[];
}): CandidateScore[] {
  const scores = new Map<string, CandidateScore>();
  for (const c of args.candidates) {
    scores.set(c.solutionId, { ...c, generated: { passed: 0, run: 0 }, book: { passed: 0, run: 0 }, heldOut: { passed: 0, run: 0 }, passesHeldOut: false });
  }
  const bump = (t: Tally, v: Counted) => {
    t.run++;
    if (v.verdict === 'accepted') t.passed++;
  };
  for (const v of args.reward) {
    const s = scores.get(v.programId);
    // The reference's replay of Mistake Book tests is not a candidate's.
    if (!s) continue;
    // The dataset's own tests (CURE's and the golden baseline's ground truth) select nothing:
    // selection is by generated and Mistake Book tests only.
    if (isGenerated(args.generatedTests, v.testId)) bump(s.generated, v);
    else if (v.testId.startsWith(MISTAKE_BOOK_PREFIX)) bump(s.book, v);
  }
  for (const v of args.heldOut) {
    const s = scores.get(v.programId);
    if (s) bump(s.heldOut, v);
  }
  for (const s of scores.values()) s.passesHeldOut = s.heldOut.run > 0 && s.heldOut.passed === s.heldOut.run;
  return [...scores.values()];
}

interface OpenRound {
  candidates: { solutionId: string; programHash: string; index: number }[];
  generatedTests: string[];
}

export interface AnswerSelectionState {
  verdicts: RecordedVerdicts;
  /** "round/problemId" -> what is known of the problem-round so far. */
  open: Record<string, OpenRound>;
  problems: ProblemSelection[];
}

export const emptyAnswerSelection = (): AnswerSelectionState => ({ verdicts: emptyRecordedVerdicts(), open: {}, problems: [] });

export const ANSWER_SELECTION_TYPES = ['SolutionSampled', 'TestsJudged', ...VERDICT_EVENT_TYPES, 'ProblemEvaluated'] as const;

const keyOf = (round: number, problemId: string) => `${round}/${problemId}`;
/** Test ids of replayed Mistake Book tests in a reward request. */
export const MISTAKE_BOOK_PREFIX = 'mistake-book/';
/** Test ids of EvolveCoder's evolving test set (generated tests of earlier rounds included). */
export const EVOLVED_PREFIX = 'evolved/';

/** A generated test: usable in the round's TestsJudged, or one of EvolveCoder's evolved tests. */
export function isGenerated(judged: ReadonlySet<string>, testId: string): boolean {
  return judged.has(testId) || testId.startsWith(EVOLVED_PREFIX);
}
const collected = (purpose: string) => purpose === 'reward' || purpose === 'heldout';

function withOpen(state: AnswerSelectionState, key: string, f: (o: OpenRound) => OpenRound): AnswerSelectionState {
  const o = state.open[key] ?? { candidates: [], generatedTests: [] };
  return { ...state, open: { ...state.open, [key]: f(o) } };
}

export function reduceAnswerSelection(state: AnswerSelectionState, event: EventEnvelope): AnswerSelectionState {
  switch (event.type) {
    case 'SolutionSampled': {
      const d = event.data as EventData<'SolutionSampled'>;
      const c = { solutionId: d.solutionId, programHash: d.programHash, index: d.sampling.index };
      return withOpen(state, keyOf(d.round, d.problemId), (o) => ({ ...o, candidates: [...o.candidates, c] }));
    }
    case 'TestsJudged': {
      const d = event.data as EventData<'TestsJudged'>;
      const usable = d.tests.filter((t) => t.oracleHash !== null).map((t) => t.testId);
      return withOpen(state, keyOf(d.round, d.problemId), (o) => ({ ...o, generatedTests: [...o.generatedTests, ...usable] }));
    }
    case 'ExecutionRequested':
    case 'ProgramExecuted':
    case 'ExecutionCompleted':
      return { ...state, verdicts: observeVerdicts(state.verdicts, event, collected) };
    case 'ProblemEvaluated': {
      const d = event.data as EventData<'ProblemEvaluated'>;
      const key = keyOf(d.round, d.problemId);
      const o = state.open[key] ?? { candidates: [], generatedTests: [] };
      const requests = [`${key}/reward`, `${key}/heldout`];
      const scores = scoreCandidates({
        candidates: o.candidates,
        generatedTests: new Set(o.generatedTests),
        reward: verdictsOf(state.verdicts, requests[0]!),
        heldOut: verdictsOf(state.verdicts, requests[1]!),
      });
      const open = { ...state.open };
      delete open[key];
      return { verdicts: forgetRequests(state.verdicts, requests), open, problems: [...state.problems, selectForProblem(d.round, d.problemId, scores)] };
    }
    default:
      return state;
  }
}
