/** The actors' error types, in a module of their own so that the CLI's error mapping loads
 * none of the actors' code. */

/** A run directory or log that holds another run than the one asked for (another config). */
export class RunMismatchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RunMismatchError';
  }
}

/** An actor that broke its contract (an effect with no output, work that stays pending after
 * its output was recorded): a bug of the actor, never retried. */
export class ActorFailedError extends Error {
  constructor(
    readonly actor: string,
    readonly effectKey: string,
    cause: unknown,
  ) {
    super(`actor ${actor} failed on ${effectKey}: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'ActorFailedError';
  }
}

export class UnsupportedSourceError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnsupportedSourceError';
  }
}
