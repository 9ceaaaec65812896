/** Point reads of a log: the events at given positions, through the log's own `readAt` where it
 * has one, else a one-position `read` each (JetStream: a direct get of the message). */
import type { EventEnvelope } from './envelope.js';
import { asPosition, type EventLog, type Position } from './log.js';

/** The events at `positions`, in the order asked (undefined where the log holds none). */
export type ReadAt = (positions: readonly Position[]) => Promise<(EventEnvelope | undefined)[]>;

export function readAtOf(log: EventLog): ReadAt {
  if (log.readAt) return (positions) => log.readAt!(positions);
  return async (positions) => {
    const out: (EventEnvelope | undefined)[] = [];
    // A read up to a position past the head waits for it (JetStream): none is there yet.
    const head = positions.length === 0 ? 0 : await log.head();
    for (const position of positions) {
      if (position > head) {
        out.push(undefined);
        continue;
      }
      let found: EventEnvelope | undefined;
      for await (const e of log.read({ after: asPosition(position - 1), to: position, limit: 1 })) if (e.position === position) found = e;
      out.push(found);
    }
    return out;
  };
}

/** For an index that has no log to read (one that folded nothing): says so if it is asked. */
export const NO_LOG: ReadAt = async (positions) => {
  if (positions.length === 0) return [];
  throw new Error(`no log to read positions ${positions.slice(0, 3).join(', ')} from: this index was made without one`);
};
