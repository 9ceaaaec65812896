/**
 * Execution matrices as the report's page draws them: one letter per verdict (a row of a matrix
 * is a string), each program marked correct when it passes every held-out test, and each
 * problem's figures across its rounds. Pure.
 */
import { VERDICT_CODES, type Verdict } from '../core/verdicts.js';
import type { ProblemFigures, ProblemMatrix, TestKind } from './matrix.js';

/** A letter per verdict (the one `ProgramExecuted` records use), '.' for a pair that was not run. */
export { VERDICT_CODES };

/** Verdict colours: eight hues far apart (time and memory limits among them), named in the legend. */
export const VERDICT_COLOURS: Readonly<Record<Verdict, string>> = {
  accepted: '#16a34a',
  wrong_answer: '#dc2626',
  runtime_error: '#f97316',
  time_limit: '#2563eb',
  memory_limit: '#d946ef',
  output_limit: '#a16207',
  compile_error: '#111827',
  sandbox_error: '#94a3b8',
};

export const KIND_LABELS: Readonly<Record<TestKind, string>> = {
  generated: 'generated',
  buffer: 'TCS buffer (earlier rounds)',
  book: 'Mistake Book',
  dataset: 'dataset tests',
  heldout: 'held-out',
};

export interface MatrixView {
  problemId: string;
  round: number;
  programs: { label: string; id: string; correct: boolean }[];
  tests: { id: string; kind: TestKind }[];
  /** rows[program]: one letter per test (VERDICT_CODES, '.' not run). */
  rows: string[];
  figures: ProblemFigures;
}

/** A program is correct when it ran at least one held-out test and passed every one. */
export function correctPrograms(m: ProblemMatrix): boolean[] {
  const held = m.tests.flatMap((t, j) => (t.kind === 'heldout' ? [j] : []));
  return m.cells.map((row) => held.length > 0 && held.every((j) => row[j] === 'accepted'));
}

export function matrixView(m: ProblemMatrix): MatrixView {
  const correct = correctPrograms(m);
  return {
    problemId: m.problemId,
    round: m.round,
    programs: m.programs.map((p, i) => ({ label: `s${p.index}`, id: p.solutionId, correct: correct[i]! })),
    tests: m.tests.map((t) => ({ id: t.testId, kind: t.kind })),
    rows: m.cells.map((row) => row.map((v) => (v === null ? '.' : VERDICT_CODES[v])).join('')),
    figures: m.figures,
  };
}

export interface ProblemTrend {
  problemId: string;
  rounds: number[];
  heldOutPass: (number | null)[];
  validity: (number | null)[];
  killRate: (number | null)[];
  /** Share of the round's programs that are correct (the matrix's marked rows). */
  correct: (number | null)[];
}

/** Each problem's figures by round, problems in the order of the matrices. */
export function problemTrends(ms: readonly ProblemMatrix[]): ProblemTrend[] {
  const out = new Map<string, ProblemTrend>();
  for (const m of [...ms].sort((a, b) => a.round - b.round)) {
    let t = out.get(m.problemId);
    if (!t) out.set(m.problemId, (t = { problemId: m.problemId, rounds: [], heldOutPass: [], validity: [], killRate: [], correct: [] }));
    const c = correctPrograms(m);
    t.rounds.push(m.round);
    t.heldOutPass.push(m.figures.heldOutPass);
    t.validity.push(m.figures.validity);
    t.killRate.push(m.figures.killRate);
    t.correct.push(c.length === 0 ? null : c.filter(Boolean).length / c.length);
  }
  const order = [...new Set(ms.map((m) => m.problemId))];
  return order.map((p) => out.get(p)!);
}
