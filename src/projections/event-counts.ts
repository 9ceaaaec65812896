/**
 * Events per (run, type): the smallest useful projection. `crucible replay` can show it as a
 * summary, the log benchmark replays into it, and the runner's tests use it.
 */
import { add, merge } from './readmodel.js';
import type { RowProjection } from './runner.js';

export interface EventCountRow {
  run_id: string;
  type: string;
  events: number;
  last_position: number;
}

export const eventCounts: RowProjection = {
  name: 'event-counts',
  version: 1,
  tables: {
    event_counts: {
      columns: { run_id: 'text', type: 'text', events: 'integer', last_position: 'integer' },
      key: ['run_id', 'type'],
    },
  },
  apply: (e) => {
    const key = { run_id: e.runId, type: e.type };
    return [add('event_counts', key, { events: 1 }), merge('event_counts', { ...key, last_position: e.position })];
  },
};
