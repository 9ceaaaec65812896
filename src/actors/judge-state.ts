/** The Judge's view of one problem in one round, shared by its machine and its effects. */
import type { EventData } from '../events/catalog.js';

export interface SolutionRef {
  solutionId: string;
  programHash: string;
  candidateId: string | null;
}

export interface SuiteRef {
  suiteId: string;
  targetSolutionId: string | null;
  nonprintableRatio: number;
  candidateId: string | null;
  tests: EventData<'TestsSampled'>['tests'];
}

export type JudgePhase = 'sampling' | 'oracle' | 'executing' | 'judged';

export interface ProblemRound {
  key: string;
  round: number;
  problemId: string;
  groupSize: number;
  /** The test-policy version the round's suites were sampled from (ProblemScheduled). */
  testVersion: number;
  solutions: SolutionRef[];
  suites: SuiteRef[];
  phase: JudgePhase;
  /** Requests this Judge issued for the problem-round, and those whose verdicts are all in. */
  issued: string[];
  completed: string[];
  judgedTests: EventData<'TestsJudged'>['tests'] | null;
  /** CURE runs: each sample's recorded tokens (ModelSampled.tokensHash, null when the server
   * returned none), by solution or suite id: length regularization reads response lengths. */
  responseTokens?: Record<string, string | null>;
}
