/** What both kinds of worker loop share: the log, the one-actor runtime, the wake signal, and
 * the figures a heartbeat reports. */
import type { EventLog } from '../events/log.js';
import type { EventEnvelope } from '../events/envelope.js';
import type { ActorRuntime, RuntimeView } from '../actors/runtime.js';
import type { RunEnv } from '../actors/env.js';
import type { WorkerBoard } from '../events/jetstream/jetstream-board.js';
import type { WorkerRole } from './roles.js';
import type { Wake } from './wake.js';

/** Sees RunCompleted: every worker stops once the run is complete. */
export class CompletionView implements RuntimeView {
  readonly types = ['RunCompleted'] as const;
  completed = false;
  observe(_envelope: EventEnvelope): void {
    this.completed = true;
  }
}

export interface WorkerFigures {
  state: 'live' | 'standby' | 'stopping';
  running: number;
  pending: number;
  /** Commits this process appended (duplicates and fenced appends not counted). */
  written: number;
  duplicates: number;
  fenced: number;
}

export interface LoopContext {
  role: WorkerRole;
  runId: string;
  workerId: string;
  log: EventLog;
  board: WorkerBoard;
  runtime: ActorRuntime<RunEnv>;
  env: RunEnv;
  wake: Wake;
  completion: CompletionView;
  concurrency: number;
  figures: WorkerFigures;
  /** Folds what is new (one fold at a time per process). */
  fold(): Promise<void>;
  stopped(): boolean;
  say(line: string): void;
  /** Time since the worker started, for its lines ("1234 ms"). */
  since(): string;
}
