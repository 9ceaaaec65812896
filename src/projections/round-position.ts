/**
 * Where a round ends in a run's log: the stop position of `replay --round k` and
 * `ablate --round k`, the state as it stood after round k.
 */
import type { EventData } from '../events/catalog.js';
import type { EventLog, Position } from '../events/log.js';

/** The position of round `round`'s RoundCompleted event (null: the round was not completed). */
export async function positionAfterRound(log: EventLog, runId: string | undefined, round: number): Promise<Position | null> {
  for await (const e of log.read({}, runId !== undefined ? { runId, types: ['RoundCompleted'] } : { types: ['RoundCompleted'] })) {
    if ((e.data as EventData<'RoundCompleted'>).round === round) return e.position;
  }
  return null;
}
