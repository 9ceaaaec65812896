/**
 * What one method's judgement provides to the Judge: the reference runs it needs first (none
 * for methods without a reference), the plan of executions with the test verdicts, and the
 * rewards once every verdict is in. Each method is one module; the Judge dispatches on
 * `config.method` (see ./index.ts).
 */
import type { Problem } from '../../core/problem.js';
import type { EventData, ExecutionPair } from '../../events/catalog.js';
import type { NewEvent } from '../../events/envelope.js';
import type { MistakeBookState } from '../../rewards/mistake-book.js';
import type { PairResult } from '../../events/program-executed.js';
import type { ModuleLoad } from '../../core/module-load.js';
import type { TcsBufferedSuite } from '../../rewards/tcs.js';
import type { RunEnv } from '../env.js';
import type { BlobStore } from '../../events/blobs.js';
import type { EvolvedState, ProblemRound } from '../judge-state.js';

export type Pair = ExecutionPair;
/** Per-pair results of a request, executed and reused (see recorded-verdicts.ts). */
export type Verdicts = PairResult[];
export type JudgedTest = EventData<'TestsJudged'>['tests'][number];
export type RewardItem = EventData<'RewardsAssigned'>['items'][number];

export type { EvolvedState } from '../judge-state.js';

export interface PlanArgs {
  env: RunEnv;
  problem: Problem;
  round: ProblemRound;
  oracle: Verdicts;
  book: MistakeBookState;
  evolved?: EvolvedState | null;
  /** TCS: the problem's buffer as it stood before this round (the round is not in it yet). */
  tcsBuffer: readonly TcsBufferedSuite[];
  /** Leaves out of a request the pairs already recorded or planned (a pair runs once a run). */
  split(pairs: readonly Pair[], planned: Set<string>): Promise<{ pairs: Pair[]; reused: Pair[] }>;
}

export interface JudgeArgs {
  env: RunEnv;
  problem: Problem;
  round: ProblemRound;
  book: MistakeBookState;
  verdicts: (requestId: string) => Verdicts;
  /** What the problem's recorded executions tell of a program's module body (Code-A1's
   * valid-program marker). */
  load: (programHash: string) => ModuleLoad;
  /** The TCS stage of this round (1 until a switch is recorded). */
  stage: 1 | 2;
  evolved?: EvolvedState | null;
  /** TCS: the problem's buffer after this round's TestsJudged (the round's suites included). */
  tcsBuffer: readonly TcsBufferedSuite[];
}

/** What a judgement reads apart from the settings and the Judge's own state. */
export interface BasisArgs {
  blobs: BlobStore;
  problem: Problem;
  round: ProblemRound;
  verdicts: (requestId: string) => Verdicts;
  load: (programHash: string) => ModuleLoad;
  /** Runs `compute`, which reads only the evaluation requests (held-out, kill): judgements of
   * the problem-round whose reward requests differ (ablation) may hand back one shared result. */
  evaluation?: <T>(compute: () => T) => T;
}

/** A judgement in two steps: `basis` derives what the recorded verdicts alone decide (no
 * setting read), `finish` the rest under `env.config`. `finish(await basis(a), a)` is `judge(a)`;
 * judging one problem-round under several settings (ablation) computes the basis once. */
export interface JudgementSteps<B> {
  basis(args: BasisArgs): Promise<B>;
  finish(basis: B, args: JudgeArgs): Promise<NewEvent[]>;
  /** The basis of the same requests with no Mistake Book test replayed, derived from `basis`
   * (a judgement with the Mistake Book off reads it): where the method replays any. */
  withoutReplays?(basis: B): B;
}

export interface MethodJudgement {
  /** Reference runs needed before planning (oracle outputs, validity). */
  oracle(env: RunEnv, problem: Problem, round: ProblemRound): Promise<Pair[]>;
  plan(args: PlanArgs): Promise<NewEvent[]>;
  judge(args: JudgeArgs): Promise<NewEvent[]>;
  /** The same judgement in two steps, where the method has a settings-free part worth sharing. */

  steps?: JudgementSteps<any>;
}
