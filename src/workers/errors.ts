/** The exit status of a worker whose log changed under it (LogRewrittenError): its supervisor
 * starts another at once, which reads the log again, and does not count it as a failure. */
export const EXIT_READ_AGAIN = 75;

/** Errors of worker processes; src/cli/errors.ts maps them to exit codes. */
export class WorkerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WorkerError';
  }
}

/** The log holds no such run (nothing to work on). */
export class RunNotFoundError extends WorkerError {
  constructor(
    readonly runId: string,
    readonly location: string,
  ) {
    super(`run ${runId} does not exist at ${location} (no RunStarted recorded; \`crucible run CONFIG --log ${location}\` starts it)`);
    this.name = 'RunNotFoundError';
  }
}

/** A worker was started with a role that no actor plays, or a bad option. */
export class WorkerUsageError extends WorkerError {
  constructor(message: string) {
    super(message);
    this.name = 'WorkerUsageError';
  }
}

/** `crucible status` found no server that answered within its time. */
export class StatusUnavailableError extends WorkerError {
  constructor(message: string) {
    super(message);
    this.name = 'StatusUnavailableError';
  }
}
