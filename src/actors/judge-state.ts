/**
 * The Judge's state as zod schemas, from which its types are derived: its view of one problem in
 * one round (shared by its machine and its effects) and its whole machine context, which a
 * snapshot stores and is checked against when restored (see snapshot-schema.ts).
 */
import { z } from 'zod';
import { ExecutionPair, catalog } from '../events/catalog.js';
import type { MistakeBookState as RewardsMistakeBook } from '../rewards/mistake-book.js';
import type { TcsBufferedSuite as RewardsTcsSuite } from '../rewards/tcs.js';
import { agree, type Agree } from './type-agreement.js';

const events = catalog.specs;

export const SolutionRef = z.strictObject({
  solutionId: z.string(),
  programHash: z.string(),
  candidateId: z.string().nullable(),
});
export type SolutionRef = z.infer<typeof SolutionRef>;

export const SuiteRef = z.strictObject({
  suiteId: z.string(),
  targetSolutionId: z.string().nullable(),
  nonprintableRatio: z.number(),
  candidateId: z.string().nullable(),
  tests: events.TestsSampled.schema.shape.tests,
});
export type SuiteRef = z.infer<typeof SuiteRef>;

export const ProblemRound = z.strictObject({
  key: z.string(),
  round: z.int().nonnegative(),
  problemId: z.string(),
  groupSize: z.int().nonnegative(),
  /** Suites sampled per program (the run's sampling.suitesPerProgram): all are in at groupSize x this. */
  suitesPerProgram: z.int().positive(),
  /** The test-policy version the round's suites were sampled from (ProblemScheduled). */
  testVersion: z.int(),
  solutions: z.array(SolutionRef),
  suites: z.array(SuiteRef),
  /** Programs sampled for the held-out evaluation only (HeldOutSampled): all are in at
   * heldOutSize (the run's sampling.heldOutSamples; absent: none). */
  heldOutSize: z.int().nonnegative().optional(),
  heldOut: z.array(SolutionRef).optional(),
  /** Requests this Judge issued for the problem-round, and those whose verdicts are all in. */
  issued: z.array(z.string()),
  completed: z.array(z.string()),
  /** Per issued request not yet complete, the program hashes whose results are still to come
   * (see problem-round.ts). */
  awaiting: z.record(z.string(), z.array(z.string())),
  judgedTests: events.TestsJudged.schema.shape.tests.nullable(),
  /** CURE runs: each sample's recorded tokens (ModelSampled.tokensHash, null when the server
   * returned none), by solution or suite id: length regularization reads response lengths. */
  responseTokens: z.record(z.string(), z.string().nullable()).optional(),
});
export type ProblemRound = z.infer<typeof ProblemRound>;

/** EvolveCoder's state of one problem: the fixed candidates and the evolving test set. */
export const EvolvedState = z.strictObject({
  programs: z.array(z.strictObject({ programId: z.string(), programHash: z.string() })),
  tests: z.array(z.string()),
});
export type EvolvedState = z.infer<typeof EvolvedState>;

// The rewards layer's types, described here (the rewards know no snapshot).
const MistakeBookState = z.strictObject({
  entries: z.array(z.strictObject({ testKey: z.string(), testHash: z.string(), count: z.int().nonnegative(), blacklisted: z.boolean() })).readonly(),
});
agree<Agree<z.infer<typeof MistakeBookState>, RewardsMistakeBook>>();

const TcsBufferedSuite = z.strictObject({
  suiteId: z.string(),
  round: z.int().nonnegative(),
  policyVersion: z.int(),
  tests: z.array(z.strictObject({ testId: z.string(), testHash: z.string().nullable(), consistent: z.union([z.literal(0), z.literal(1)]).nullable() })),
});
agree<Agree<z.infer<typeof TcsBufferedSuite>, RewardsTcsSuite>>();

/** The Judge's own context: what outlives a problem-round. The open problem-rounds are its
 * child actors (problem-round.ts), each with its ProblemRound as context. */
export const JudgeContext = z.strictObject({
  suitesPerProgram: z.int().positive(),
  /** The run's sampling.heldOutSamples (absent: none). */
  heldOutSamples: z.int().positive().optional(),
  mistakeBooks: z.record(z.string(), MistakeBookState),
  /** EvolveCoder: each problem's fixed candidates and evolving tests. */
  evolved: z.record(z.string(), EvolvedState),
  /** TCS: the stage of each round, as the Conductor decided it. */
  stages: z.record(z.number(), z.union([z.literal(1), z.literal(2)])),
  /** TCS: each problem's rolling buffer of test-policy samples, folded from TestsJudged. */
  tcsBuffers: z.record(z.string(), z.array(TcsBufferedSuite)),
  /** The TCS buffer options (null: the run is not TCS and keeps no buffer). */
  tcs: z.strictObject({ bufferSize: z.int().positive(), maxStaleness: z.int().nonnegative().nullable() }).nullable(),
  /** CURE: the samples' recorded tokens are kept with their problem-round (response lengths). */
  keepsTokens: z.boolean().optional(),
});
export type JudgeContext = z.infer<typeof JudgeContext>;

/** The Judge's side index (VerdictIndex in judge.ts) as its snapshot body holds it: the open
 * work's results by problem-round and request (null: still to come), the reused pairs and the
 * requests still awaited; where recorded verdicts are is kept in side rows (see ProgramHistory). */
export const VerdictIndexData = z.strictObject({
  byProblem: z.array(z.tuple([z.string(), z.array(z.tuple([z.string(), z.array(events.ExecutionCompleted.schema.nullable())]))])),
  reused: z.array(z.strictObject({ requestId: z.string(), problemId: z.string(), pairs: z.array(ExecutionPair) })),
  /** Each open request's problem and its position in the log (what a program's history names). */
  problemOf: z.array(z.tuple([z.string(), z.string(), z.int().nonnegative()])),
  requestsOf: z.array(z.tuple([z.string(), z.array(z.string())])),
  awaiting: z.array(z.strictObject({ requestId: z.string(), left: z.int(), pairs: z.array(ExecutionPair) })),
});
export type VerdictIndexData = z.infer<typeof VerdictIndexData>;
