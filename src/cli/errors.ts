// Each layer's error types from its errors module, none of its code: this module is loaded by
// every command, `crucible runs` and `crucible --version` among them (see main.ts).
import { ConfigError } from '../config/errors.js';
import { ActorFailedError, RunMismatchError, UnsupportedSourceError } from '../actors/errors.js';
import { RunFailedError } from '../actors/effect-failures.js';
import { DamagedFileError, ReadModelError, ReadModelOfAnotherLogError } from '../projections/errors.js';
import { DatasetError } from '../datasets/errors.js';
import { SandboxInputError, SandboxSetupError } from '../sandbox/errors.js';
import {
  EventLogError,
  LogRewrittenError,
  MissingLogMessageError,
  IncompatibleStreamError,
  LogAuthenticationError,
  LogCredentialsError,
  LogUnavailableError,
  NewerLogFormatError,
  NotACrucibleLogError,
} from '../events/errors.js';
import { NotARunError } from '../report/errors.js';
import { AblationError, VariantRefusedError } from '../ablation/errors.js';
import { ModelRequestError } from '../policies/openai/errors.js';
import { BridgeError } from '../bridge/errors.js';
import { EXIT_READ_AGAIN, RunNotFoundError, StatusUnavailableError, WorkerError, WorkerUsageError } from '../workers/errors.js';

/** A user-facing failure: printed as one clear line naming what is wrong, no stack trace. */
export class UserError extends Error {
  constructor(
    message: string,
    readonly exitCode = 2,
  ) {
    super(message);
    this.name = 'UserError';
  }
}

/** Exit status 2: the input was wrong (usage, config, dataset, a file that is not a run). */
export const EXIT_BAD_INPUT = 2;
/** Exit status 1: the command ran and found something wrong (a failed check, a corrupt log). */
export const EXIT_FAILED = 1;
/** Exit status 3: a file derived from the log (views.db, snapshots.db, an ablation variant's
 * file) is damaged or of another kind; `crucible replay RUN --rebuild` builds it again. */
export const EXIT_DAMAGED = 3;

/** The one line a damaged derived file gets: the file, what is wrong, and the fix. */
export function damagedLine(err: DamagedFileError): string {
  return `${err.file} is damaged or not a crucible file (${err.reason}); it is rebuilt from the log by: crucible replay ${err.runDir} --rebuild`;
}

/**
 * Each layer throws its own error types; this is the one place that turns them into a line and
 * an exit status. Anything not listed is a bug and keeps its stack trace.
 */
export function userFacing(err: unknown): { message: string; exitCode: number } | null {
  if (err instanceof UserError) return { message: err.message, exitCode: err.exitCode };
  if (err instanceof DamagedFileError) return { message: damagedLine(err), exitCode: EXIT_DAMAGED };
  if (err instanceof ConfigError || err instanceof DatasetError || err instanceof UnsupportedSourceError || err instanceof RunMismatchError) {
    return { message: err.message, exitCode: EXIT_BAD_INPUT };
  }
  if (err instanceof VariantRefusedError || err instanceof AblationError) return { message: err.message, exitCode: EXIT_BAD_INPUT };
  if (err instanceof SandboxSetupError || err instanceof SandboxInputError || err instanceof ReadModelOfAnotherLogError)
    return { message: err.message, exitCode: EXIT_BAD_INPUT };
  if (
    err instanceof NotACrucibleLogError ||
    err instanceof NewerLogFormatError ||
    err instanceof NotARunError ||
    err instanceof LogUnavailableError ||
    err instanceof IncompatibleStreamError
  )
    return { message: err.message, exitCode: EXIT_BAD_INPUT };
  if (err instanceof LogCredentialsError || err instanceof LogAuthenticationError) return { message: err.message, exitCode: EXIT_BAD_INPUT };
  // A worker given a run that is not there or a wrong option: bad input; a worker that failed: a failure.
  if (err instanceof RunNotFoundError || err instanceof WorkerUsageError || err instanceof StatusUnavailableError)
    return { message: err.message, exitCode: EXIT_BAD_INPUT };
  if (err instanceof WorkerError) return { message: err.message, exitCode: EXIT_FAILED };
  // A message gone that the log's head says it holds: what a reader meets when a cluster that
  // failed over dropped messages; like a rewrite, read again (the supervisor bounds how often).
  if (err instanceof LogRewrittenError || err instanceof MissingLogMessageError) return { message: err.message, exitCode: EXIT_READ_AGAIN };
  if (err instanceof EventLogError || err instanceof ReadModelError) return { message: err.message, exitCode: EXIT_FAILED };
  // An actor's effect that failed outside the retried path (a worker's, an ablation's): a failure.
  if (err instanceof ActorFailedError) return { message: err.message, exitCode: EXIT_FAILED };
  // A model server or trainer that stayed unreachable: what is recorded stays, and running the
  // same command again resumes the run.
  if (err instanceof RunFailedError) {
    const recorded = err.unrecorded === null ? 'RunFailed is recorded in the log; ' : '';
    return { message: `${err.message}\n(${recorded}once the cause is fixed, running the same command again resumes the run)`, exitCode: EXIT_FAILED };
  }
  if (err instanceof ModelRequestError || err instanceof BridgeError)
    return { message: `${err.message}\n(the run is resumable: run the same command again)`, exitCode: EXIT_FAILED };
  return null;
}
