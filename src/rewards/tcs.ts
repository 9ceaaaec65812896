/**
 * TCS (Test Cases Scaling): a two-stage RL schedule for a test generator. TCS publishes only an
 * abstract; this is our reading of it (METHODS.md) and everything is configurable.
 *
 * - A policy-aligned rolling buffer (the Judge keeps whole samples: rollTcsBuffer below): recent generated tests, each tagged with the policy version
 *   that wrote it; entries older than `maxStaleness` versions are dropped, then the oldest
 *   beyond `size`.
 * - Stage 1 reward: validity against the reference (the reference accepts the test's expected
 *   output) -> 1, else 0; unknown (sandbox error) -> null, i.e. not trained on.
 * - Stage 2: the buffer is restricted to the solver's current failure modes (valid tests some
 *   current solver program fails); reward = validityWeight * valid + counterexampleWeight *
 *   counterexample, where counterexample is 1 if the test is valid and fails at least one current
 *   solver program ('any') or the share of solver programs it fails ('fraction').
 * - Stage switch: after `afterRounds` rounds in stage 1, or once the stage-1 validity rate of the
 *   last round reaches `threshold` (optionally after `minRounds`). Once in stage 2 we stay.
 */
import { z } from 'zod';
import type { Verdict } from '../core/verdicts.js';
import { RewardInputError, outcomeOf, parseWith } from './matrix.js';

export const TCS_ID = 'tcs/v1';

export const TcsOptions = z
  .object({
    bufferSize: z.number().int().positive().default(256),
    /** Keep entries written by policy versions >= current - maxStaleness; null: any version. */
    maxStaleness: z.number().int().nonnegative().nullable().default(1),
    switchRule: z
      .discriminatedUnion('kind', [
        z.object({ kind: z.literal('rounds'), afterRounds: z.number().int().nonnegative() }).strict(),
        z
          .object({
            kind: z.literal('validity'),
            threshold: z.number().min(0).max(1),
            minRounds: z.number().int().nonnegative().default(0),
          })
          .strict(),
      ])
      .default({ kind: 'validity', threshold: 0.8, minRounds: 0 }),
    validityWeight: z.number().nonnegative().default(0.5),
    counterexampleWeight: z.number().nonnegative().default(0.5),
    counterexample: z.enum(['any', 'fraction']).default('any'),
  })
  .strict();
export type TcsOptions = z.output<typeof TcsOptions>;
export type TcsOptionsInput = z.input<typeof TcsOptions>;

export interface TcsBufferEntry {
  testKey: string;
  testHash: string;
  policyVersion: number;
  round: number;
  /** Validity against the reference; null when unknown. */
  valid: boolean | null;
}

/** Append entries (oldest first) and trim: staleness first, then the oldest beyond size. */
export function pushBuffer(
  buffer: readonly TcsBufferEntry[],
  entries: readonly TcsBufferEntry[],
  currentPolicyVersion: number,
  options: TcsOptionsInput = {},
): TcsBufferEntry[] {
  const o = parseWith(TcsOptions, options, 'TCS options');
  let all = [...buffer, ...entries];
  if (o.maxStaleness !== null) {
    const minVersion = currentPolicyVersion - o.maxStaleness;
    all = all.filter((e) => e.policyVersion >= minVersion);
  }
  return all.slice(Math.max(0, all.length - o.bufferSize));
}

/** Stage 1 reward of a test from the reference program's verdict on it. */
export function tcsStage1Reward(referenceVerdict: Verdict | null): number | null {
  const o = outcomeOf(referenceVerdict);
  return o === 'unknown' ? null : o === 'pass' ? 1 : 0;
}

/** Stage 2 buffer: valid entries whose test some current solver program fails. */
export function restrictToFailureModes(buffer: readonly TcsBufferEntry[], failingKeys: ReadonlySet<string>): TcsBufferEntry[] {
  return buffer.filter((e) => e.valid === true && failingKeys.has(e.testKey));
}

/** Stage 2 reward of one test: `solverVerdicts` are the current solver programs' verdicts on it. */
export function tcsStage2Reward(referenceVerdict: Verdict | null, solverVerdicts: readonly (Verdict | null)[], options: TcsOptionsInput = {}): number | null {
  const o = parseWith(TcsOptions, options, 'TCS options');
  const valid = tcsStage1Reward(referenceVerdict);
  if (valid === null) return null;
  const outcomes = solverVerdicts.map(outcomeOf).filter((x) => x !== 'unknown');
  const failing = outcomes.filter((x) => x === 'fail').length;
  let ce = 0;
  if (valid === 1 && outcomes.length > 0) {
    ce = o.counterexample === 'any' ? (failing > 0 ? 1 : 0) : failing / outcomes.length;
  }
  return o.validityWeight * valid + o.counterexampleWeight * ce;
}

export interface TcsStageState {
  stage: 1 | 2;
  /** Rounds completed in the current stage. */
  roundsInStage: number;
}

export function initialTcsStage(): TcsStageState {
  return { stage: 1, roundsInStage: 0 };
}

/** Fold one completed round (with its stage-1 validity rate) into the stage state. */
export function nextTcsStage(state: TcsStageState, validityRate: number, options: TcsOptionsInput = {}): TcsStageState {
  const o = parseWith(TcsOptions, options, 'TCS options');
  if (!(validityRate >= 0 && validityRate <= 1)) throw new RewardInputError(`validityRate must be in [0, 1], got ${String(validityRate)}`);
  const rounds = state.roundsInStage + 1;
  if (state.stage === 2) return { stage: 2, roundsInStage: rounds };
  const rule = o.switchRule;
  const switchNow = rule.kind === 'rounds' ? rounds >= rule.afterRounds : rounds >= rule.minRounds && validityRate >= rule.threshold;
  return switchNow ? { stage: 2, roundsInStage: 0 } : { stage: 1, roundsInStage: rounds };
}

// ---------------------------------------------------------------------------------------------
// The buffer the Judge keeps: whole test-policy samples (suites), across rounds

/** One judged test of a buffered suite. `consistent`: 1 when the reference accepts it as stated,
 * 0 when it does not (malformed, no expected value, wrong value, the reference raises), null
 * when unknown (a sandbox error). `testHash`: the GT-corrected test that runs, null when the
 * test is not usable. */
export interface TcsBufferedTest {
  testId: string;
  testHash: string | null;
  consistent: 0 | 1 | null;
}

/** A test-policy sample in the buffer, with the policy version that wrote it. */
export interface TcsBufferedSuite {
  suiteId: string;
  round: number;
  policyVersion: number;
  tests: TcsBufferedTest[];
}

/**
 * The buffer of one problem after a round: the round's suites appended, then the suites written
 * by policy versions older than `currentPolicyVersion - maxStaleness` dropped (policy-aligned),
 * then the oldest suites dropped while the buffer holds more than `bufferSize` tests. The
 * round's own suites are always kept: they are on-policy.
 */
export function rollTcsBuffer(
  buffer: readonly TcsBufferedSuite[],
  round: readonly TcsBufferedSuite[],
  currentPolicyVersion: number,
  options: TcsOptionsInput = {},
): TcsBufferedSuite[] {
  const o = parseWith(TcsOptions, options, 'TCS options');
  const fresh = new Set(round.map((s) => s.suiteId));
  let older = buffer.filter((s) => !fresh.has(s.suiteId));
  if (o.maxStaleness !== null) older = older.filter((s) => s.policyVersion >= currentPolicyVersion - o.maxStaleness!);
  let size = round.reduce((n, s) => n + s.tests.length, 0) + older.reduce((n, s) => n + s.tests.length, 0);
  // Oldest first: drop from the front until the size fits.
  let from = 0;
  while (from < older.length && size > o.bufferSize) size -= older[from++]!.tests.length;
  return [...older.slice(from), ...round];
}

/** Stage 2: the buffered suites at the Solver's current failure modes (holding a usable,
 * reference-consistent test that some current program fails). */
export function suitesAtFailureModes(buffer: readonly TcsBufferedSuite[], failing: ReadonlySet<string>): TcsBufferedSuite[] {
  return buffer.filter((s) => s.tests.some((t) => t.testHash !== null && t.consistent === 1 && failing.has(t.testId)));
}
