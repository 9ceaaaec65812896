/** A user-facing failure: printed as one clear line naming what is wrong, no stack trace. */
export class UserError extends Error {
  constructor(message: string, readonly exitCode = 2) {
    super(message);
    this.name = 'UserError';
  }
}
