/**
 * One pass over a run's log for the report: the execution matrix of every problem-round (its
 * sampled programs against the generated, buffered, Mistake Book and held-out tests, with the
 * Judge's figures of that problem-round) and the Mistake Book tests by how often they were
 * replayed and whom they caught.
 * Verdicts come from recorded-verdicts.ts (executed and reused alike).
 */
import type { EventEnvelope } from '../events/envelope.js';
import type { EventData } from '../events/catalog.js';
import type { Verdict } from '../core/verdicts.js';
import { emptyRecordedVerdicts, forgetRequests, observeVerdicts, verdictsOf } from '../projections/recorded-verdicts.js';
import { MISTAKE_BOOK_PREFIX, isGenerated } from '../projections/answer-selection.js';

/** generated: judged in this problem-round (or one of EvolveCoder's evolved tests); buffer: generated
 * in an earlier round of the problem and run again (TCS's rolling buffer); dataset: the problem's
 * own tests a method rewards with (CURE's ground truth, the golden baseline). */
export type TestKind = 'generated' | 'buffer' | 'book' | 'dataset' | 'heldout';

/** The Judge's figures of one problem-round (ProblemEvaluated); null where the denominator is empty. */
export interface ProblemFigures {
  heldOutPass: number | null;
  validity: number | null;
  killRate: number | null;
  mistakeBook: number;
}

export interface ProblemMatrix {
  problemId: string;
  round: number;
  programs: { solutionId: string; index: number }[];
  tests: { testId: string; kind: TestKind }[];
  /** cells[program][test]: the verdict, or null where the pair was not run (a suite of another program). */
  cells: (Verdict | null)[][];
  figures: ProblemFigures;
}

export interface ReplayedTest {
  problemId: string;
  /** The test's id in reward requests ("mistake-book/<key>"). */
  testId: string;
  testHash: string;
  /** Problem-rounds that replayed it. */
  replays: number;
  /** Sampled programs that failed it, by program, most often first. */
  failing: { programHash: string; times: number }[];
  /** Times a sampled program passed it. */
  passes: number;
}

interface Open {
  candidates: { solutionId: string; index: number }[];
  generated: Set<string>;
}

export async function collectMatrices(events: AsyncIterable<EventEnvelope>): Promise<{ matrices: ProblemMatrix[]; replayed: ReplayedTest[] }> {
  let verdicts = emptyRecordedVerdicts();
  const collect = (purpose: string) => purpose === 'reward' || purpose === 'heldout';
  const open = new Map<string, Open>();
  const matrices: ProblemMatrix[] = [];
  // Tests each problem's earlier rounds judged: run again later, they are buffered tests.
  const earlier = new Map<string, Set<string>>();
  const replayed = new Map<
    string,
    { problemId: string; testId: string; testHash: string; rounds: Set<number>; failing: Map<string, number>; passes: number }
  >();
  const openOf = (round: number, problemId: string) => {
    const k = `${round}/${problemId}`;
    let o = open.get(k);
    if (!o) open.set(k, (o = { candidates: [], generated: new Set() }));
    return o;
  };
  for await (const e of events) {
    switch (e.type) {
      case 'SolutionSampled': {
        const d = e.data as EventData<'SolutionSampled'>;
        openOf(d.round, d.problemId).candidates.push({ solutionId: d.solutionId, index: d.sampling.index });
        break;
      }
      case 'TestsJudged': {
        const d = e.data as EventData<'TestsJudged'>;
        const o = openOf(d.round, d.problemId);
        for (const t of d.tests) if (t.oracleHash !== null) o.generated.add(t.testId);
        break;
      }
      case 'ExecutionRequested':
      case 'ProgramExecuted':
      case 'ExecutionCompleted':
        verdicts = observeVerdicts(verdicts, e, collect);
        break;
      case 'ProblemEvaluated': {
        const d = e.data as EventData<'ProblemEvaluated'>;
        const k = `${d.round}/${d.problemId}`;
        const o = openOf(d.round, d.problemId);
        open.delete(k);
        const before = earlier.get(d.problemId) ?? new Set<string>();
        const ids = [`${k}/reward`, `${k}/heldout`];
        const programs = [...o.candidates].sort((a, b) => a.index - b.index);
        const row = new Map(programs.map((p, i) => [p.solutionId, i]));
        const testCol = new Map<string, number>();
        const tests: ProblemMatrix['tests'] = [];
        const cellsOf: { p: number; t: string; v: Verdict }[] = [];
        for (const [i, id] of ids.entries()) {
          for (const v of verdictsOf(verdicts, id)) {
            const p = row.get(v.programId);
            if (p === undefined) continue;
            const kind: TestKind =
              i === 1
                ? 'heldout'
                : isGenerated(o.generated, v.testId)
                  ? 'generated'
                  : v.testId.startsWith(MISTAKE_BOOK_PREFIX)
                    ? 'book'
                    : before.has(v.testId)
                      ? 'buffer'
                      : 'dataset';
            if (!testCol.has(v.testId)) {
              testCol.set(v.testId, tests.length);
              tests.push({ testId: v.testId, kind });
            }
            cellsOf.push({ p, t: v.testId, v: v.verdict });
            if (kind === 'book') {
              const rk = `${d.problemId}\u0000${v.testId}`;
              let r = replayed.get(rk);
              if (!r)
                replayed.set(rk, (r = { problemId: d.problemId, testId: v.testId, testHash: v.testHash, rounds: new Set(), failing: new Map(), passes: 0 }));
              r.rounds.add(d.round);
              if (v.verdict === 'accepted') r.passes++;
              else r.failing.set(v.programHash, (r.failing.get(v.programHash) ?? 0) + 1);
            }
          }
        }
        verdicts = forgetRequests(verdicts, ids);
        for (const t of o.generated) before.add(t);
        earlier.set(d.problemId, before);
        // Columns: generated tests, then buffered, Mistake Book, dataset, held-out, each in first-seen order.
        const order: TestKind[] = ['generated', 'buffer', 'book', 'dataset', 'heldout'];
        const sorted = tests.map((t, i) => ({ t, i })).sort((a, b) => order.indexOf(a.t.kind) - order.indexOf(b.t.kind) || a.i - b.i);
        const colOf = new Map(sorted.map(({ t }, j) => [t.testId, j]));
        const cells: (Verdict | null)[][] = programs.map(() => sorted.map(() => null));
        for (const c of cellsOf) cells[c.p]![colOf.get(c.t)!] = c.v;
        const share = (n: number, of: number) => (of === 0 ? null : n / of);
        const figures: ProblemFigures = {
          heldOutPass: share(d.heldOut.passed, d.heldOut.programs),
          validity: share(d.tests.valid, d.tests.sampled),
          killRate: share(d.kill.killed, d.kill.targets * d.kill.suites),
          mistakeBook: d.mistakeBook.size,
        };
        matrices.push({ problemId: d.problemId, round: d.round, programs, tests: sorted.map(({ t }) => t), cells, figures });
        break;
      }
      default:
        break;
    }
  }
  const byProblem = matrices.sort((a, b) => (a.problemId < b.problemId ? -1 : a.problemId > b.problemId ? 1 : a.round - b.round));
  const tests = [...replayed.values()]
    .map((r) => ({
      problemId: r.problemId,
      testId: r.testId,
      testHash: r.testHash,
      replays: r.rounds.size,
      passes: r.passes,
      failing: [...r.failing.entries()]
        .map(([programHash, times]) => ({ programHash, times }))
        .sort((a, b) => b.times - a.times || (a.programHash < b.programHash ? -1 : 1)),
    }))
    .sort(
      (a, b) =>
        b.replays - a.replays || b.failing.reduce((s, f) => s + f.times, 0) - a.failing.reduce((s, f) => s + f.times, 0) || (a.testId < b.testId ? -1 : 1),
    );
  return { matrices: byProblem, replayed: tests };
}
