/** Typed access to the data of log events inside machines and effect runners. */
import type { EventEnvelope } from '../events/envelope.js';
import type { EventData, EventType } from '../events/catalog.js';
import { RunConfig } from '../config/schema.js';

export function dataOf<T extends EventType>(envelope: EventEnvelope, type: T): EventData<T> {
  if (envelope.type !== type) {
    throw new Error(`expected a ${type} event at position ${envelope.position}, got ${envelope.type}`);
  }
  return envelope.data as EventData<T>;
}

/** The run's config as recorded in RunStarted (validated again: it crossed a boundary). */
export function configOf(envelope: EventEnvelope): RunConfig {
  return RunConfig.parse(dataOf(envelope, 'RunStarted').config);
}
