/**
 * Events per (run, type): the smallest useful projection. `crucible replay` can show it as a
 * summary, the log benchmark replays into it, and the runner's tests use it.
 */
import { add } from './readmodel.js';
import type { RowProjection } from './runner.js';

export interface EventCountRow {
  run_id: string;
  type: string;
  events: number;
}

export const eventCounts: RowProjection = {
  name: 'event-counts',
  version: 1,
  tables: {
    event_counts: { columns: { run_id: 'text', type: 'text', events: 'integer' }, key: ['run_id', 'type'] },
  },
  apply: (e) => [add('event_counts', { run_id: e.runId, type: e.type }, { events: 1 })],
};
