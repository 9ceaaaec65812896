/** The report's error type, apart from the code that reads runs for the CLI's error mapping. */

/** A directory that is not a readable crucible run: the message names it and why. */
export class NotARunError extends Error {
  constructor(
    readonly dir: string,
    reason: string,
  ) {
    super(`${dir}: ${reason}`);
    this.name = 'NotARunError';
  }
}
