/**
 * CURE (co-evolving coder and unit tester): rewards from an n codes x (GT + generated tests)
 * matrix, and best-of-N selection.
 *
 *   I_j        = program j passes every GT test
 *   R_code(j)  = GT tests passed / GT tests                     (unknown cells left out)
 *   R_test(k)  = + (incorrect programs failing k) / (incorrect)  if k passes every correct program
 *              = - (incorrect programs passing k) / (incorrect)  otherwise
 *
 * Edge cases (ours; the formula is silent):
 * - A program is correct only if every GT test has a verdict and all pass; incorrect if any GT
 *   test fails; otherwise (sandbox errors, no GT test) its correctness is unknown and it is left
 *   out of R_test. R_code is then passed/observed (0 with nothing observed).
 * - No correct program: generated tests get no reward (the release): R_test = 0 for every test
 *   and `defined` is false.
 * - No incorrect program (with a verdict on k): the release gives the sign alone, +1 to a test
 *   that passes every correct program and -1 otherwise.
 * - No GT test: the release's code rewards are NaN; here it is an error naming the problem.
 * - Per test, programs whose cell on k is unknown are left out of both sets.
 * Reference programs are never among the n codes.
 */
import { z } from 'zod';
import {
  RewardInputError,
  type ExecutionMatrix,
  candidateIndices,
  cell,
  countOutcomes,
  outcomeOf,
  parseWith,
  passVector,
  suiteTestIndices,
  usableTestIndices,
} from './matrix.js';

export const CURE_ID = 'cure/v1';

export const CureOptions = z
  .object({
    /** Suite id of the ground-truth tests in the matrix. */
    gtSuite: z.string().min(1).default('gt'),
  })
  .strict();
export type CureOptionsInput = z.input<typeof CureOptions>;

export interface CureProgramResult {
  program: string;
  /** I_j; null when unknown. */
  correct: boolean | null;
  gtPassed: number;
  gtObserved: number;
  reward: number;
}

export interface CureTestResult {
  test: string;
  reward: number;
  passesAllCorrect: boolean;
  correctObserved: number;
  incorrectObserved: number;
  incorrectFailing: number;
  incorrectPassing: number;
}

export interface CureResult {
  rewardId: typeof CURE_ID;
  programs: CureProgramResult[];
  tests: CureTestResult[];
  correctCount: number;
  incorrectCount: number;
  /** False when no program is known correct: test rewards are all 0. */
  defined: boolean;
}

/** CURE rewards; generated tests are the usable tests outside `gtSuite`, in matrix order. */
export function cureRewards(m: ExecutionMatrix, options: CureOptionsInput = {}): CureResult {
  const o = parseWith(CureOptions, options, 'CURE options');
  const gt = suiteTestIndices(m, o.gtSuite);
  if (gt.length === 0) {
    throw new RewardInputError(`CURE needs ground-truth tests (suite "${o.gtSuite}"): the matrix has no ground-truth test, so code rewards are undefined`);
  }
  const generated = usableTestIndices(m).filter((t) => m.tests[t]!.suite !== o.gtSuite);
  const candidates = candidateIndices(m);

  const programs: CureProgramResult[] = candidates.map((p) => {
    const c = countOutcomes(passVector(m, p, gt));
    const correct = c.failed > 0 ? false : c.unknown === 0 && c.passed > 0 ? true : null;
    return { program: m.programs[p]!.id, correct, gtPassed: c.passed, gtObserved: c.observed, reward: c.rate };
  });
  const correctIdx = candidates.filter((_, i) => programs[i]!.correct === true);
  const incorrectIdx = candidates.filter((_, i) => programs[i]!.correct === false);
  const defined = correctIdx.length > 0;

  const tests: CureTestResult[] = generated.map((t) => {
    const correctOut = correctIdx.map((p) => outcomeOf(cell(m, p, t))).filter((x) => x !== 'unknown');
    const incorrectOut = incorrectIdx.map((p) => outcomeOf(cell(m, p, t))).filter((x) => x !== 'unknown');
    const passesAllCorrect = correctOut.length > 0 && correctOut.every((x) => x === 'pass');
    const incorrectFailing = incorrectOut.filter((x) => x === 'fail').length;
    const incorrectPassing = incorrectOut.length - incorrectFailing;
    let reward = 0;
    if (defined && correctOut.length > 0 && incorrectOut.length > 0) {
      // `0 - x` rather than `-x`: no negative zero in recorded rewards.
      reward = passesAllCorrect ? incorrectFailing / incorrectOut.length : 0 - incorrectPassing / incorrectOut.length;
    } else if (defined && correctOut.length > 0) {
      reward = passesAllCorrect ? 1 : -1;
    }
    return {
      test: m.tests[t]!.id,
      reward,
      passesAllCorrect,
      correctObserved: correctOut.length,
      incorrectObserved: incorrectOut.length,
      incorrectFailing,
      incorrectPassing,
    };
  });
  return {
    rewardId: CURE_ID,
    programs,
    tests,
    correctCount: correctIdx.length,
    incorrectCount: incorrectIdx.length,
    defined,
  };
}

/**
 * CURE's advantages for one problem's codes or tests (normalized and dropped independently):
 * z-scores with the population std and no epsilon; null when the rewards have no spread (a lone
 * sample included): the release drops such a group from training rather than giving it zeros.
 */
export function cureAdvantages(rewards: readonly number[]): number[] | null {
  rewards.forEach((r, i) => {
    if (!Number.isFinite(r)) throw new RewardInputError(`reward ${i} is not a finite number: ${String(r)}`);
  });
  if (rewards.length === 0) return null;
  const mean = rewards.reduce((s, r) => s + r, 0) / rewards.length;
  const std = Math.sqrt(rewards.reduce((s, r) => s + (r - mean) * (r - mean), 0) / rewards.length);
  if (!(std > 0)) return null;
  return rewards.map((r) => (r - mean) / std);
}

export interface BestOfN {
  /** Program id, or null when there is no candidate. */
  program: string | null;
  passed: number;
  /** Passed count of every candidate, in matrix order. */
  scores: { program: string; passed: number }[];
}

/**
 * Best-of-N answer selection: the candidate passing the most of `tests` (default: usable tests
 * outside `gtSuite`, i.e. the generated ones); ties go to the earlier program in the matrix.
 * Unknown cells count as not passed.
 */
export function bestOfN(m: ExecutionMatrix, tests?: readonly number[], options: CureOptionsInput = {}): BestOfN {
  const o = parseWith(CureOptions, options, 'CURE options');
  const ts = tests ?? usableTestIndices(m).filter((t) => m.tests[t]!.suite !== o.gtSuite);
  const scores = candidateIndices(m).map((p) => ({
    program: m.programs[p]!.id,
    passed: countOutcomes(passVector(m, p, ts)).passed,
  }));
  let best: { program: string; passed: number } | null = null;
  for (const s of scores) if (best === null || s.passed > best.passed) best = s;
  return { program: best?.program ?? null, passed: best?.passed ?? 0, scores };
}
