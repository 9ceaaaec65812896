/** Input the sandbox does not take (a tests file, a batch file, a run request): the message
 * names the file, line and field, or the request's path. Raised before anything runs. */
export class SandboxInputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SandboxInputError';
  }
}

/** The sandbox cannot start as asked (no interpreter, isolation required but unavailable). */
export class SandboxSetupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SandboxSetupError';
  }
}
