/** The projections' error types, in a module of their own so that the CLI's error mapping
 * loads none of the read models' code (kysely, SQLite). */
import type { EventLog } from '../events/log.js';

export class ReadModelError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** A read model built from another log than the one it is opened with: its checkpoints are
 * positions of that log, which mean nothing in this one. */
export class ReadModelOfAnotherLogError extends ReadModelError {
  constructor(
    readonly path: string,
    /** The identity of the log that built it (EventLog.identity). */
    readonly builtFrom: string,
    readonly log: EventLog,
  ) {
    super(
      `${path} holds read models built from another log (${builtFrom}), not from ${log.location} (${log.identity}): ` +
        `their checkpoints are positions of that log. Delete ${path} to rebuild them from this log, or keep this log's read models in another file`,
    );
  }
}

/** A read model, snapshot or ablation variant file that SQLite cannot read, or another kind of
 * file (see damaged-file.ts). */
export class DamagedFileError extends Error {
  constructor(
    /** The damaged file. */
    readonly file: string,
    /** The run directory whose log rebuilds it. */
    readonly runDir: string,
    readonly reason: string,
  ) {
    super(`${file}: ${reason}`);
    this.name = 'DamagedFileError';
  }
}
