/**
 * The evaluation every method records, whatever its rewards: held-out pass of the sampled
 * programs (official tests, never used for rewards) and the kill rate of the sampled suites
 * against the problem's known-incorrect programs. The held-out programs are the round's G and
 * the programs sampled for the evaluation only (sampling.heldOutSamples), all drawn from the
 * same policy version.
 */
import type { Problem } from '../../core/problem.js';
import { canonicalJson } from '../../core/canonical-json.js';
import { outcomeOf } from '../../rewards/matrix.js';
import type { RunEnv } from '../env.js';
import type { ProblemRound } from '../judge-state.js';
import type { Pair, Verdicts } from './contract.js';
import { scoreCandidates } from '../../projections/answer-selection.js';
import type { EventData } from '../../events/catalog.js';

const cellKey = (programId: string, testId: string) => `${programId}\u0000${testId}`;

/** The programs the held-out pass is measured on. */
const heldOutPrograms = (p: ProblemRound) => (p.heldOut && p.heldOut.length > 0 ? [...p.solutions, ...p.heldOut] : p.solutions);

/** Held-out pairs (every program on every official test) and kill pairs (each known-incorrect
 * program on each distinct usable test hash). */
export async function evaluationPairs(
  env: RunEnv,
  problem: Problem,
  p: ProblemRound,
  usableHashes: readonly string[],
): Promise<{ heldout: Pair[]; kill: Pair[] }> {
  const heldout: Pair[] = [];
  const officialHashes: string[] = [];
  for (const t of problem.tests.private) officialHashes.push(await env.blobs.put(canonicalJson(t)));
  for (const s of heldOutPrograms(p)) {
    officialHashes.forEach((testHash, i) => heldout.push({ programId: s.solutionId, programHash: s.programHash, testId: `heldout/${i}`, testHash }));
  }
  const kill: Pair[] = [];
  const distinct = [...new Set(usableHashes)];
  for (const [i, program] of problem.incorrectSolutions.entries()) {
    const programHash = await env.blobs.put(program);
    for (const testHash of distinct) kill.push({ programId: `incorrect/${i}`, programHash, testId: `oracle/${testHash.slice(0, 16)}`, testHash });
  }
  return { heldout, kill };
}

/** Programs passing every held-out test, and (suite, target) pairs where the target fails at
 * least one of the suite's usable tests. `usableBySuite`: suite id -> usable test hashes. */
export function evaluationFigures(
  problem: Problem,
  p: ProblemRound,
  verdicts: (requestId: string) => Verdicts,
  usableBySuite: ReadonlyMap<string, readonly string[]>,
): { heldOut: { programs: number; passed: number }; kill: { targets: number; suites: number; killed: number } } {
  const heldout = verdicts(`${p.key}/heldout`);
  const programs = heldOutPrograms(p);
  const passed = programs.filter((s) => {
    const mine = heldout.filter((v) => v.programId === s.solutionId);
    return mine.length > 0 && mine.every((v) => v.verdict === 'accepted');
  }).length;
  const failing = new Set(
    verdicts(`${p.key}/kill`)
      .filter((v) => outcomeOf(v.verdict) === 'fail')
      .map((v) => cellKey(v.programId, v.testHash)),
  );
  let killed = 0;
  for (const suite of p.suites) {
    const hashes = usableBySuite.get(suite.suiteId) ?? [];
    problem.incorrectSolutions.forEach((_, i) => {
      if (hashes.some((h) => failing.has(cellKey(`incorrect/${i}`, h)))) killed++;
    });
  }
  return {
    heldOut: { programs: programs.length, passed },
    kill: { targets: problem.incorrectSolutions.length, suites: p.suites.length, killed },
  };
}

/** Each sampled program's tallies as answer selection counts them (scoreCandidates, the same
 * rules), from the verdicts the Judge judges on: recorded with ProblemEvaluated, so answer
 * selection need not read every request's verdicts from the log again. */
export function candidateTallies(p: ProblemRound, verdicts: (requestId: string) => Verdicts): NonNullable<EventData<'ProblemEvaluated'>['candidates']> {
  const usable = new Set((p.judgedTests ?? []).filter((t) => t.oracleHash !== null).map((t) => t.testId));
  const scores = scoreCandidates({
    candidates: p.solutions.map((s, index) => ({ solutionId: s.solutionId, programHash: s.programHash, index })),
    generatedTests: usable,
    reward: verdicts(`${p.key}/reward`),
    heldOut: verdicts(`${p.key}/heldout`),
  });
  return scores.map((c) => ({
    solutionId: c.solutionId,
    generated: [c.generated.passed, c.generated.run],
    book: [c.book.passed, c.book.run],
    heldOut: [c.heldOut.passed, c.heldOut.run],
  }));
}

export function mean(xs: readonly number[]): number {
  if (xs.length === 0) return 0;
  let s = 0;
  for (const x of xs) s += x;
  return s / xs.length;
}
