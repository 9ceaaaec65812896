/**
 * Answer selection (see answer-selection.ts) as a row projection: what the reducer kept in one
 * state, serialized whole at every checkpoint (every verdict of the run), is kept here in
 * internal rows, so a batch writes only the rows its events touch:
 *  - answer_selection_requests: one verdict letter per pair of each request ('.' until
 *    answered); kept, since a later request may reuse its verdicts. The request's lists are kept
 *    packed beside them (answer_selection_request_lists, its test lists stored once per
 *    problem-round: request-lists.ts);
 *  - answer_selection_programs: per (problem, program hash), the requests that executed it, in
 *    log order: a reused pair's verdict is the newest of them that ran the pair (not a
 *    sandbox error), the reducer's by-pair memory read backwards;
 *  - answer_selection_open: the candidates and usable generated tests of a problem-round until
 *    ProblemEvaluated;
 *  - answer_selection_round_sums: per round, the running sums whose means answer_selection_rounds
 *    shows, added in event order so the means are the reducer's to the last bit;
 *  - answer_selection_source: where the candidates' tallies come from in this log, decided at its
 *    first ProblemEvaluated: 'recorded' where the Judge recorded them with it (then the requests,
 *    their verdicts and the judged tests are not read at all: most of a log's bytes), 'verdicts' in logs written
 *    before it did (every request's verdicts are kept and counted, as they always were).
 * The shown tables (answer_selection, answer_selection_rounds) hold the reducer's rows exactly,
 * so the projection's state hash, which reads shown tables only, is the reducer's.
 */
import type Database from 'better-sqlite3';
import type { EventEnvelope } from '../events/envelope.js';
import type { EventData, ExecutionPair } from '../events/catalog.js';
import { VERDICT_CODES, verdictOfCode } from '../core/verdicts.js';
import { put, del, type ReadView, type RowWrite, type TableSpec } from './readmodel.js';
import { all, queryBuilder, type DatabaseOf } from './typed-sql.js';
import { sql } from 'kysely';
import type { RowProjection } from './runner.js';
import {
  ANSWER_SELECTION_TYPES,
  isGenerated,
  MISTAKE_BOOK_PREFIX,
  scoreCandidates,
  selectForProblem,
  type CandidateScore,
  type ProblemSelection,
} from './answer-selection.js';
import type { RequestVerdict } from './recorded-verdicts.js';
import { packRequest, REQUEST_LIST_TABLES, REQUEST_LISTS, requestListsOf, type RequestLists } from './request-lists.js';

const REQUESTS = 'answer_selection_requests';
const PROGRAMS = 'answer_selection_programs';
const OPEN = 'answer_selection_open';
const SUMS = 'answer_selection_round_sums';
const SOURCE = 'answer_selection_source';
type Source = 'recorded' | 'verdicts';
/** What it reads once the log's ProblemEvaluated carry the candidates' tallies. */
const RECORDED_TYPES = ['SolutionSampled', 'ProblemEvaluated'] as const;
/** A pair whose result is not recorded yet. */
const UNANSWERED = '.';
const SANDBOX_ERROR = VERDICT_CODES.sandbox_error;
const ACCEPTED = VERDICT_CODES.accepted;

interface RequestRow {
  request_id: string;
  problem_id: string;
  codes: string;
  /** Older per-pair results that name no pair of the request: [programId, programHash, testId, testHash, letter]. */
  extra: string | null;
}

interface OpenRow {
  candidates: { solutionId: string; programHash: string; index: number }[];
  generatedTests: string[];
}

/** Request lists, by request id: a problem-round's requests are read several times. */
class Bodies {
  readonly #lists = new Map<string, RequestLists>();
  constructor(private readonly view: ReadView) {}
  of(requestId: string): RequestLists {
    let b = this.#lists.get(requestId);
    if (!b) {
      b = requestListsOf(this.view, requestId);
      // Its lists are written with its letters (requested): a request known here is there.
      if (!b) throw new Error(`request ${requestId} is not in ${REQUEST_LISTS}`);
      if (this.#lists.size > 64) this.#lists.clear();
      this.#lists.set(requestId, b);
    }
    return b;
  }
}

function requestRow(view: ReadView, requestId: string): RequestRow | undefined {
  return view.get(REQUESTS, { request_id: requestId }) as RequestRow | undefined;
}

/** Sets the letters of `positions` (a ProgramExecuted's pairs) in a request's letter string. */
function withLetters(codes: string, positions: readonly number[], letters: string): string {
  // Letters are ASCII: one byte each, with no string per letter.
  const bytes = Buffer.from(codes, 'latin1');
  for (let i = 0; i < positions.length; i++) {
    const at = positions[i]!;
    if (at >= 0 && at < bytes.length) bytes[at] = letters.charCodeAt(i);
  }
  return bytes.toString('latin1');
}

/** Notes that `requestId` executed `programHash` (once per request; log order). */
function noteProgram(view: ReadView, problemId: string, programHash: string, requestId: string): RowWrite[] {
  const key = { problem_id: problemId, program_hash: programHash };
  const row = view.get(PROGRAMS, key) as { requests: string } | undefined;
  const requests = row ? (JSON.parse(row.requests) as string[]) : [];
  if (requests[requests.length - 1] === requestId) return [];
  requests.push(requestId);
  return [put(PROGRAMS, { ...key, requests: JSON.stringify(requests) })];
}

/** A program's recorded verdicts in a problem, by test hash: the newest that is not a sandbox
 * error (its requests in log order, each request's pairs in order, later ones overwriting). */
function recordedVerdicts(view: ReadView, bodies: Bodies, problemId: string, programHash: string): Map<string, string> {
  const out = new Map<string, string>();
  const row = view.get(PROGRAMS, { problem_id: problemId, program_hash: programHash }) as { requests: string } | undefined;
  if (!row) return out;
  for (const requestId of JSON.parse(row.requests) as string[]) {
    const req = requestRow(view, requestId);
    if (!req) continue;
    const b = bodies.of(requestId);
    for (let i = 0; i < b.pairCount; i++) {
      const letter = req.codes[i]!;
      if (letter === UNANSWERED || letter === SANDBOX_ERROR) continue;
      if (b.programHash(b.pairs[2 * i]!) === programHash) out.set(b.testHash(b.pairs[2 * i + 1]!)!, letter);
    }
    // Older per-pair results outside the request's pairs came after its pairs' results.
    if (req.extra) {
      for (const [, ph, , th, letter] of JSON.parse(req.extra) as [string, string, string, string, string][]) {
        if (ph === programHash && letter !== SANDBOX_ERROR) out.set(th, letter);
      }
    }
  }
  return out;
}

/** What the reducer's verdictsOf gives for a collected request: executed, then reused. */
function verdictsOfRequest(view: ReadView, bodies: Bodies, requestId: string): RequestVerdict[] {
  const req = requestRow(view, requestId);
  if (!req) return [];
  const b = bodies.of(requestId);
  const out: RequestVerdict[] = [];
  for (let i = 0; i < b.pairCount; i++) {
    const letter = req.codes[i]!;
    if (letter === UNANSWERED) continue;
    const pi = b.pairs[2 * i]!;
    const ti = b.pairs[2 * i + 1]!;
    const programId = b.programIds[pi]!;
    const programHash = b.programHash(pi)!;
    const testId = b.testIds[ti]!;
    const testHash = b.testHash(ti)!;
    out.push({ programId, programHash, testId, testHash, verdict: verdictOfCode(letter), reused: false });
  }
  if (req.extra) {
    for (const [programId, programHash, testId, testHash, letter] of JSON.parse(req.extra) as [string, string, string, string, string][]) {
      out.push({ programId, programHash, testId, testHash, verdict: verdictOfCode(letter), reused: false });
    }
  }
  // Each reused program's recorded verdicts are gathered once, not once per pair.
  const byProgram = new Map<string, Map<string, string>>();
  for (let i = 0; i < b.reused.length; i += 2) {
    const pi = b.reused[i]!;
    const ti = b.reused[i + 1]!;
    const programId = b.programIds[pi]!;
    const programHash = b.programHash(pi)!;
    const testId = b.testIds[ti]!;
    const testHash = b.testHash(ti)!;
    let known = byProgram.get(programHash);
    if (!known) byProgram.set(programHash, (known = recordedVerdicts(view, bodies, req.problem_id, programHash)));
    const letter = known.get(testHash);
    if (letter !== undefined) out.push({ programId, programHash, testId, testHash, verdict: verdictOfCode(letter), reused: true });
  }
  return out;
}

function openRow(view: ReadView, key: string): OpenRow {
  const row = view.get(OPEN, { key }) as { body: string } | undefined;
  return row ? (JSON.parse(row.body) as OpenRow) : { candidates: [], generatedTests: [] };
}

const ran = (scores: readonly CandidateScore[], withBook: boolean) => scores.some((c) => c.generated.run + (withBook ? c.book.run : 0) > 0);

interface SumsRow {
  round: number;
  problems: number;
  generated: number;
  with_book: number;
  random: number;
  oracle: number;
  generated_ran: boolean;
  with_book_ran: boolean;
}

/**
 * The candidates' scores with the generated and held-out tallies of `basis` (the same
 * problem-round's scores in a log that differs from this one only in the Mistake Book pairs its
 * reward requests reuse) and the Mistake Book tallies counted here: the Mistake Book pairs of the
 * reward request, executed (the same in both logs) and reused (this log's), with the lookups
 * only those need. Null when the basis does not fit (other candidates, or a generated test
 * named like a Mistake Book test): then the problem-round is scored whole.
 */
function scoresBeside(view: ReadView, bodies: Bodies, key: string, o: OpenRow, generatedTests: ReadonlySet<string>, basis: string): CandidateScore[] | null {
  const scores = JSON.parse(basis) as CandidateScore[];
  if (scores.length !== o.candidates.length || scores.some((c, i) => c.solutionId !== o.candidates[i]!.solutionId)) return null;
  for (const t of generatedTests) if (t.startsWith(MISTAKE_BOOK_PREFIX)) return null;
  const byId = new Map<string, CandidateScore>();
  for (const c of scores) {
    c.book = { passed: 0, run: 0 };
    byId.set(c.solutionId, c);
  }
  // What scoreCandidates counts as a Mistake Book verdict: a candidate's, on a test that is not generated.
  const bump = (programId: string, testId: string, letter: string) => {
    const c = byId.get(programId);
    if (!c || !testId.startsWith(MISTAKE_BOOK_PREFIX) || isGenerated(generatedTests, testId)) return;
    c.book.run++;
    if (letter === ACCEPTED) c.book.passed++;
  };
  const requestId = `${key}/reward`;
  const req = requestRow(view, requestId);
  if (!req) return scores;
  const b = bodies.of(requestId);
  for (let i = 0; i < b.pairCount; i++) {
    const letter = req.codes[i]!;
    if (letter !== UNANSWERED) bump(b.programIds[b.pairs[2 * i]!]!, b.testIds[b.pairs[2 * i + 1]!]!, letter);
  }
  if (req.extra)
    for (const [programId, , testId, , letter] of JSON.parse(req.extra) as [string, string, string, string, string][]) bump(programId, testId, letter);
  const known = new Map<string, Map<string, string>>();
  for (let i = 0; i < b.reused.length; i += 2) {
    const pi = b.reused[i]!;
    const testId = b.testIds[b.reused[i + 1]!]!;
    const programId = b.programIds[pi]!;
    if (!byId.has(programId) || !testId.startsWith(MISTAKE_BOOK_PREFIX)) continue;
    const programHash = b.programHash(pi)!;
    let verdicts = known.get(programHash);
    if (!verdicts) known.set(programHash, (verdicts = recordedVerdicts(view, bodies, req.problem_id, programHash)));
    const letter = verdicts.get(b.testHash(b.reused[i + 1]!)!);
    if (letter !== undefined) bump(programId, testId, letter);
  }
  return scores;
}

const sourceOf = (view: ReadView): Source | undefined => (view.get(SOURCE, { id: 1 }) as { source: Source } | undefined)?.source;

/** The candidates' scores from the tallies the Judge recorded with ProblemEvaluated. */
function recordedScores(o: OpenRow, d: EventData<'ProblemEvaluated'>): CandidateScore[] {
  const tallies = new Map((d.candidates ?? []).map((c) => [c.solutionId, c]));
  return o.candidates.map((c) => {
    const t = tallies.get(c.solutionId);
    const tally = (x: readonly [number, number] | undefined) => ({ passed: x?.[0] ?? 0, run: x?.[1] ?? 0 });
    const heldOut = tally(t?.heldOut);
    return { ...c, generated: tally(t?.generated), book: tally(t?.book), heldOut, passesHeldOut: heldOut.run > 0 && heldOut.passed === heldOut.run };
  });
}

function evaluated(view: ReadView, e: EventEnvelope, opts: { basis?: SelectionBasis; fromVerdicts?: boolean } = {}): RowWrite[] {
  const d = e.data as EventData<'ProblemEvaluated'>;
  const key = `${d.round}/${d.problemId}`;
  const o = openRow(view, key);
  const decided = sourceOf(view);
  const source: Source = decided ?? (d.candidates !== undefined && !opts.fromVerdicts ? 'recorded' : 'verdicts');
  let scores: CandidateScore[];
  if (source === 'recorded') {
    // Its requests were not read: there is nothing else to count.
    if (d.candidates === undefined)
      throw new Error(
        `ProblemEvaluated of ${key} at position ${e.position} carries no candidates' tallies, though this log's first one did, so its requests were not read and the problem-round cannot be counted (a log an older crucible wrote on after a newer one)`,
      );
    scores = recordedScores(o, d);
  } else {
    const bodies = new Bodies(view);
    const generatedTests = new Set(o.generatedTests);
    const given = opts.basis?.get(key);
    scores =
      (given !== undefined ? scoresBeside(view, bodies, key, o, generatedTests, given) : null) ??
      scoreCandidates({
        candidates: o.candidates,
        generatedTests,
        reward: verdictsOfRequest(view, bodies, `${key}/reward`),
        heldOut: verdictsOfRequest(view, bodies, `${key}/heldout`),
      });
  }
  const p = selectForProblem(d.round, d.problemId, scores);
  const s = (view.get(SUMS, { round: d.round }) as SumsRow | undefined) ?? {
    round: d.round,
    problems: 0,
    generated: 0,
    with_book: 0,
    random: 0,
    oracle: 0,
    generated_ran: false,
    with_book_ran: false,
  };
  // Added in event order, as the reducer's means add the round's problems.
  const sums: SumsRow = {
    round: d.round,
    problems: s.problems + 1,
    generated: s.generated + (p.generatedPass ? 1 : 0),
    with_book: s.with_book + (p.withBookPass ? 1 : 0),
    random: s.random + p.randomPass,
    oracle: s.oracle + (p.oraclePass ? 1 : 0),
    generated_ran: s.generated_ran || ran(scores, false),
    with_book_ran: s.with_book_ran || ran(scores, true),
  };
  return [
    ...(decided === undefined ? [put(SOURCE, { id: 1, source })] : []),
    del(OPEN, { key }),
    put('answer_selection', selectionRow(p)),
    put(SUMS, { ...sums }),
    put('answer_selection_rounds', {
      round: d.round,
      problems: sums.problems,
      generated: sums.generated_ran ? sums.generated / sums.problems : null,
      with_book: sums.with_book_ran ? sums.with_book / sums.problems : null,
      random: sums.random / sums.problems,
      oracle: sums.oracle / sums.problems,
    }),
  ];
}

function selectionRow(p: ProblemSelection) {
  return {
    round: p.round,
    problem_id: p.problemId,
    candidates: p.candidates,
    passing: p.passing,
    selected_generated: p.selectedGenerated,
    generated_pass: p.generatedPass,
    selected_with_book: p.selectedWithBook,
    with_book_pass: p.withBookPass,
    random_pass: p.randomPass,
    oracle_pass: p.oraclePass,
    scores: p.scores,
  };
}

function requested(view: ReadView, d: EventData<'ExecutionRequested'>): RowWrite[] {
  return [
    put(REQUESTS, { request_id: d.requestId, problem_id: d.problemId, codes: UNANSWERED.repeat(d.pairs.length / 2), extra: null }),
    ...packRequest(d, view),
  ];
}

function executed(view: ReadView, d: EventData<'ProgramExecuted'>): RowWrite[] {
  const req = requestRow(view, d.requestId);
  // A result of a request this log never announced is nobody's verdict.
  if (!req) return [];
  return [put(REQUESTS, { ...req, codes: withLetters(req.codes, d.pairs, d.verdicts) }), ...noteProgram(view, req.problem_id, d.programHash, d.requestId)];
}

/** An older per-pair result: set at its pair's position, or kept beside when it names none. */
function completed(view: ReadView, d: EventData<'ExecutionCompleted'>): RowWrite[] {
  const req = requestRow(view, d.requestId);
  if (!req) return [];
  const b = new Bodies(view).of(d.requestId);
  const letter = VERDICT_CODES[d.verdict];
  let at = -1;
  for (let i = 0; i < b.pairCount && at < 0; i++) {
    if (b.programIds[b.pairs[2 * i]!] === d.programId && b.testIds[b.pairs[2 * i + 1]!] === d.testId && req.codes[i] === UNANSWERED) at = i;
  }
  const row =
    at >= 0
      ? { ...req, codes: withLetters(req.codes, [at], letter) }
      : {
          ...req,
          extra: JSON.stringify([...(req.extra ? (JSON.parse(req.extra) as unknown[]) : []), [d.programId, d.programHash, d.testId, d.testHash, letter]]),
        };
  return [put(REQUESTS, row), ...noteProgram(view, req.problem_id, d.programHash, d.requestId)];
}

/** One event into answer selection's rows; `fromVerdicts`: count every request's verdicts even
 * where the Judge recorded the tallies (what a log written before it did gets). */
export function applyAnswerSelection(e: EventEnvelope, view: ReadView, opts: { fromVerdicts?: boolean; basis?: SelectionBasis } = {}): readonly RowWrite[] {
  // Requests, verdicts and usable tests are nobody's once the tallies are read from ProblemEvaluated.
  if (COUNTED_TYPES.has(e.type) && sourceOf(view) === 'recorded') return [];
  switch (e.type) {
    case 'SolutionSampled': {
      const d = e.data as EventData<'SolutionSampled'>;
      const key = `${d.round}/${d.problemId}`;
      const o = openRow(view, key);
      o.candidates.push({ solutionId: d.solutionId, programHash: d.programHash, index: d.sampling.index });
      return [put(OPEN, { key, body: JSON.stringify(o) })];
    }
    case 'TestsJudged': {
      const d = e.data as EventData<'TestsJudged'>;
      const key = `${d.round}/${d.problemId}`;
      const o = openRow(view, key);
      for (const t of d.tests) if (t.oracleHash !== null) o.generatedTests.push(t.testId);
      return [put(OPEN, { key, body: JSON.stringify(o) })];
    }
    case 'ExecutionRequested':
      return requested(view, e.data as EventData<'ExecutionRequested'>);
    case 'ProgramExecuted':
      return executed(view, e.data as EventData<'ProgramExecuted'>);
    case 'ExecutionCompleted':
      return completed(view, e.data as EventData<'ExecutionCompleted'>);
    case 'ProblemEvaluated':
      return evaluated(view, e, opts);
    default:
      return [];
  }
}

/** What only the count from verdicts reads. */
const COUNTED_TYPES: ReadonlySet<string> = new Set(['TestsJudged', 'ExecutionRequested', 'ProgramExecuted', 'ExecutionCompleted']);

/** The event types it reads from here on: fewer once the tallies are known to be recorded. */
const readsNow = (view: ReadView): readonly string[] => (sourceOf(view) === 'recorded' ? RECORDED_TYPES : ANSWER_SELECTION_TYPES);

/** Scores already selected, by problem-round ("round/problemId"), as the shown table keeps them
 * (the `scores` column's JSON text). */
export type SelectionBasis = ReadonlyMap<string, string>;

/** The scores a read model's answer selection keeps (built by answerSelectionProjection or
 * answerSelectionBeside), as answerSelectionBeside takes them. */
export function readSelectionBasis(db: Database.Database): Map<string, string> {
  const rows = all(db, query.selectFrom('answer_selection').select(['round', 'problem_id', 'scores']));
  return new Map(rows.map((r) => [`${r.round}/${r.problem_id}`, r.scores]));
}

/**
 * Answer selection of a log whose events are those of a log already projected, `basis` its
 * scores, but for the Mistake Book pairs its reward requests reuse (a variant that replays
 * fewer Mistake Book tests, or none: the reward requests it plans keep the executed pairs and
 * the generated tests' pairs, see src/ablation): the generated and held-out tallies are the
 * basis's and only the Mistake Book tallies are counted again. Where the log's ProblemEvaluated
 * carry the tallies (the variant's Judge counted them) the basis is not needed. The caller vouches for the
 * likeness of the logs; the projection is the same one (name, version, tables), so its rows and
 * state hash are answerSelectionProjection's over this log.
 */
export function answerSelectionBeside(basis: SelectionBasis): RowProjection {
  return {
    ...answerSelectionProjection,
    apply: (e, view) => applyAnswerSelection(e, view, { basis }),
  };
}

/** The read model's tables (internal ones are the projection's working rows). */
const TABLES = {
  answer_selection: {
    columns: {
      round: 'integer',
      problem_id: 'text',
      candidates: 'integer',
      passing: 'integer',
      selected_generated: 'text?',
      generated_pass: 'boolean',
      selected_with_book: 'text?',
      with_book_pass: 'boolean',
      random_pass: 'real',
      oracle_pass: 'boolean',
      scores: 'json',
    },
    key: ['round', 'problem_id'],
  },
  answer_selection_rounds: {
    columns: { round: 'integer', problems: 'integer', generated: 'real?', with_book: 'real?', random: 'real', oracle: 'real' },
    key: ['round'],
  },
  [REQUESTS]: { columns: { request_id: 'text', problem_id: 'text', codes: 'text', extra: 'text?' }, key: ['request_id'], internal: true },
  ...REQUEST_LIST_TABLES,
  [PROGRAMS]: { columns: { problem_id: 'text', program_hash: 'text', requests: 'text' }, key: ['problem_id', 'program_hash'], internal: true },
  [OPEN]: { columns: { key: 'text', body: 'text' }, key: ['key'], internal: true },
  [SOURCE]: { columns: { id: 'integer', source: 'text' }, key: ['id'], internal: true },
  [SUMS]: {
    columns: {
      round: 'integer',
      problems: 'integer',
      generated: 'real',
      with_book: 'real',
      random: 'real',
      oracle: 'real',
      generated_ran: 'boolean',
      with_book_ran: 'boolean',
    },
    key: ['round'],
    internal: true,
  },
} as const satisfies Readonly<Record<string, TableSpec>>;
const query = queryBuilder<DatabaseOf<typeof TABLES>>();

/** Best-of-N answer selection per problem-round and per round (see answer-selection.ts). */
export const answerSelectionProjection: RowProjection = {
  name: 'answer-selection',
  // 9: the requests' lists read packed, through request-lists.ts. 10: the lists are its own
  // (the executions read model, nobody's reading, is gone), test lists stored once, pairs as runs.
  // 11: test ids stored in the log's packed form. 12: the candidates' tallies read from
  // ProblemEvaluated where the Judge recorded them.
  version: 12,
  types: ANSWER_SELECTION_TYPES,
  readsNow,
  tables: TABLES,
  apply: (e, view) => applyAnswerSelection(e, view),
};

/** The same read model counted from every request's verdicts, as in a log whose Judge recorded no
 * tallies (what `replay --verify` and the tests compare the recorded tallies with). */
export const answerSelectionFromVerdicts: RowProjection = {
  ...answerSelectionProjection,
  readsNow: undefined,
  apply: (e, view) => applyAnswerSelection(e, view, { fromVerdicts: true }),
};

/** The problem selections of a read model, in the order they were evaluated (rows are only
 * ever inserted, so rowid order is event order). */
export function readProblemSelections(db: Database.Database): ProblemSelection[] {
  const rows = all(
    db,
    query
      .selectFrom('answer_selection')
      .selectAll()
      .orderBy(sql`rowid`),
  );
  return rows.map((r) => ({
    round: r.round,
    problemId: r.problem_id,
    candidates: r.candidates,
    passing: r.passing,
    selectedGenerated: r.selected_generated,
    generatedPass: r.generated_pass === 1,
    selectedWithBook: r.selected_with_book,
    withBookPass: r.with_book_pass === 1,
    randomPass: r.random_pass,
    oraclePass: r.oracle_pass === 1,
    scores: JSON.parse(r.scores) as CandidateScore[],
  }));
}
