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
 *
 * The release's switches (optimization/reward.py, optimization_config.py), each an option:
 * - post_stage (default off): the scale of a test's reward becomes all-or-nothing: a test
 *   passing every correct program earns 1 only when every incorrect program fails it (0
 *   otherwise), one that does not earns -1 when any incorrect program passes it (0 otherwise).
 * - enable_efficient (default off): a group whose rewards are all exactly 1 is kept as it is
 *   instead of dropped, and every kept group goes through length_regularize (below) with the
 *   samples' response lengths in tokens.
 */
import { z } from 'zod';
import { npMedian, npStd, npSum } from './numpy-sum.js';
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
/** R_test under the release's post_stage: a formula of its own, so a name of its own. */
export const CURE_POST_STAGE_ID = 'cure-post-stage/v1';

export const CureOptions = z
  .object({
    /** Suite id of the ground-truth tests in the matrix. */
    gtSuite: z.string().min(1).default('gt'),
    /** The release's post_stage: all-or-nothing test reward scales. */
    postStage: z.boolean().default(false),
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
  rewardId: typeof CURE_ID | typeof CURE_POST_STAGE_ID;
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
      // `0 - x` rather than `-x`: no negative zero in recorded rewards. post_stage replaces the
      // release's mean over incorrect programs by "all of them fail" / "any of them passes".
      const scale = o.postStage
        ? passesAllCorrect
          ? incorrectPassing === 0
            ? 1
            : 0
          : incorrectPassing > 0
            ? 1
            : 0
        : passesAllCorrect
          ? incorrectFailing / incorrectOut.length
          : incorrectPassing / incorrectOut.length;
      reward = passesAllCorrect ? scale : 0 - scale;
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
    rewardId: o.postStage ? CURE_POST_STAGE_ID : CURE_ID,
    programs,
    tests,
    correctCount: correctIdx.length,
    incorrectCount: incorrectIdx.length,
    defined,
  };
}

export const CureAdvantageOptions = z
  .object({
    /** The release's enable_efficient: an all-ones group is kept as it is (not dropped), and
     * every kept group is length-regularized unless `lengthRegularize` says otherwise. */
    enableEfficient: z.boolean().default(false),
    /** Apply length_regularize to kept groups; null: when enableEfficient (the release). */
    lengthRegularize: z.boolean().nullable().default(null),
    /** length_regularize's clamp of the median length (max_len_threshold, min_len_threshold). */
    maxLenThreshold: z.number().nonnegative().default(8000),
    minLenThreshold: z.number().nonnegative().default(1000),
  })
  .strict();
export type CureAdvantageOptions = z.output<typeof CureAdvantageOptions>;
export type CureAdvantageOptionsInput = z.input<typeof CureAdvantageOptions>;

/** Whether the options length-regularize, i.e. need the samples' response lengths. */
export function cureRegularizesLength(options: CureAdvantageOptionsInput = {}): boolean {
  const o = parseWith(CureAdvantageOptions, options, 'CURE advantage options');
  return o.lengthRegularize ?? o.enableEfficient;
}

function checkFinite(rewards: readonly number[]): void {
  rewards.forEach((r, i) => {
    if (!Number.isFinite(r)) throw new RewardInputError(`reward ${i} is not a finite number: ${String(r)}`);
  });
}

/**
 * CURE's advantages for one problem's codes or tests (normalized and dropped independently):
 * z-scores with the population std and no epsilon, summed in numpy's order; null when the group
 * is dropped from training: no sample, or all values equal (a lone sample included). "All
 * equal" is decided on the values, not on the std: ten rewards of 0.8 summed left to right
 * leave a std of 1.1e-16, which would make every advantage +1. With enableEfficient an all-ones
 * group is kept as it is, and with length regularization the z-scores then go through
 * cureLengthRegularize (`lengths`: each sample's response length in tokens, in order).
 */
export function cureAdvantages(rewards: readonly number[], options: CureAdvantageOptionsInput = {}, lengths?: readonly number[]): number[] | null {
  const o = parseWith(CureAdvantageOptions, options, 'CURE advantage options');
  checkFinite(rewards);
  if (rewards.length === 0) return null;
  let out: number[] | null;
  if (o.enableEfficient && rewards.every((r) => r === 1)) out = [...rewards];
  else if (rewards.every((r) => r === rewards[0])) out = null;
  else {
    const mean = npSum(rewards) / rewards.length;
    const std = npStd(rewards);
    out = rewards.map((r) => (r - mean) / std);
  }
  if (out === null || !(o.lengthRegularize ?? o.enableEfficient)) return out;
  if (lengths === undefined || lengths.length !== rewards.length) {
    throw new RewardInputError(`length regularization needs a response length per sample: ${rewards.length} rewards, ${lengths?.length ?? 'no'} lengths`);
  }
  return cureLengthRegularize(out, lengths, o);
}

/**
 * The release's normalize_balance_std: positives scaled so that they sum to the negatives'
 * absolute sum, then everything divided by the population std. Null when there is no positive
 * or no negative value.
 */
export function cureBalanceStd(values: readonly number[]): number[] | null {
  const x = [...values];
  const sumPos = npSum(x.filter((v) => v > 0));
  const sumNegAbs = Math.abs(npSum(x.filter((v) => v < 0)));
  if (sumPos * sumNegAbs === 0) return null;
  const scale = sumNegAbs / sumPos;
  for (let i = 0; i < x.length; i++) if (x[i]! > 0) x[i] = x[i]! * scale;
  const std = npStd(x);
  return x.map((v) => v / std);
}

/**
 * The release's length_regularize of one group's advantages: samples with a positive
 * advantage earn (threshold - their length), where threshold is the median length of those
 * samples clamped to [minLenThreshold, maxLenThreshold]; negative ones all get the least value
 * of that array taken while its other entries are still 0 (so at most 0); then cureBalanceStd.
 * When the positive samples' lengths are all equal, cureBalanceStd of the signs alone. Null
 * (dropped) when, in the end, no value is positive or none negative.
 */
export function cureLengthRegularize(advantages: readonly number[], lengths: readonly number[], options: CureAdvantageOptionsInput = {}): number[] | null {
  const o = parseWith(CureAdvantageOptions, options, 'CURE advantage options');
  checkFinite(advantages);
  lengths.forEach((l, i) => {
    if (!Number.isFinite(l) || l < 0) throw new RewardInputError(`response length ${i} must be a non-negative number, got ${String(l)}`);
  });
  if (lengths.length !== advantages.length) throw new RewardInputError(`${advantages.length} advantages but ${lengths.length} lengths`);
  const sign = advantages.map((a) => Math.sign(a) + 0);
  const pos = sign.flatMap((s, i) => (s === 1 ? [i] : []));
  const neg = sign.flatMap((s, i) => (s === -1 ? [i] : []));
  const posLengths = pos.map((i) => lengths[i]!);
  let threshold = npMedian(posLengths);
  // No positive sample: the release's median is NaN and its sum of squares 0, so it falls
  // through to the signs, which have no positive: dropped.
  if (posLengths.length === 0 || npSum(posLengths.map((l) => (l - threshold) ** 2)) === 0) return cureBalanceStd(sign);
  threshold = Math.max(Math.min(threshold, o.maxLenThreshold), o.minLenThreshold);
  const reg = advantages.map(() => 0);
  for (const i of pos) reg[i] = -lengths[i]! + threshold;
  const least = Math.min(...reg);
  for (const i of neg) reg[i] = least;
  return cureBalanceStd(reg);
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
