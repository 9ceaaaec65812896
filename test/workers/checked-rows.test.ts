/** The round table a workers run reports is checked against one read of the log: read models
 * that missed events (a catch-up answered short while servers failed) are rebuilt, and it is said. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { LOG_FILE, runExperiment, type RunOutcome } from '../../src/actors/run.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import type { EventLog, ReadFilter, ReadRange } from '../../src/events/log.js';
import { ProjectionRunner } from '../../src/projections/runner.js';
import { RUN_PROJECTIONS } from '../../src/projections/run-views.js';
import { checkedRoundRows } from '../../src/workers/checked-rows.js';
import { smallConfig } from '../support/small-config.js';

let dir: string;
let run: RunOutcome;
beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'crucible-checked-rows-'));
  run = await runExperiment({ config: smallConfig(dir, { rounds: 3 }), dir: path.join(dir, 'run') });
  expect(run.finished).toBe(true);
}, 120_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The log, whose reads leave out round 1's and round 2's events while `short` is on (or for
 * the next `reads` reads). */
function readingShort(log: EventLog, state: { short: boolean; reads?: number }): EventLog {
  let shortRead = false;
  const dropped = (e: EventEnvelope) => (state.short || shortRead) && [1, 2].includes((e.data as { round?: number }).round ?? 0);
  return new Proxy(log, {
    get(target, p) {
      if (p === 'readPages') return undefined;
      if (p === 'read')
        return async function* (range?: ReadRange, filter?: ReadFilter) {
          shortRead = (state.reads ?? 0) > 0;
          if (shortRead) state.reads! -= 1;
          for await (const e of target.read(range, filter)) if (!dropped(e)) yield e;
        };
      const v = Reflect.get(target, p, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

it('read models that missed rounds are rebuilt from the log, and it is said; whole ones are left as they are', async () => {
  const log = await openSqliteLog(path.join(run.dir, LOG_FILE), { readOnly: true });
  try {
    const state = { short: true };
    const faulty = readingShort(log, state);
    const views = await ProjectionRunner.open({ log: faulty, readModel: path.join(dir, 'views.db'), projections: RUN_PROJECTIONS, runId: run.runId });
    try {
      await views.catchUp();
      state.short = false;
      const said: string[] = [];
      const rows = await checkedRoundRows(views, faulty, run.runId, (l) => said.push(l));
      expect(rows).toEqual(run.rows);
      expect(said).toEqual(["the read models missed events the log holds (their round table: rounds 3; the log's: rounds 1, 2, 3); rebuilt from the log"]);
      // Checked again: whole now, nothing said.
      expect(await checkedRoundRows(views, faulty, run.runId, (l) => said.push(l))).toEqual(run.rows);
      expect(said.length).toBe(1);
    } finally {
      await views.close();
    }
  } finally {
    await log.close();
  }
});

it('a read of the log that comes back short does not replace whole read models: read again, they stand, and it is said', async () => {
  const log = await openSqliteLog(path.join(run.dir, LOG_FILE), { readOnly: true });
  try {
    const state = { short: false, reads: 0 };
    const faulty = readingShort(log, state);
    const views = await ProjectionRunner.open({ log: faulty, readModel: path.join(dir, 'views-2.db'), projections: RUN_PROJECTIONS, runId: run.runId });
    try {
      await views.catchUp();
      state.reads = 1;
      const said: string[] = [];
      expect(await checkedRoundRows(views, faulty, run.runId, (l) => said.push(l))).toEqual(run.rows);
      expect(said).toEqual(['a read of the log came back short (rounds 3); read again, it agrees with the read models, which stand']);
    } finally {
      await views.close();
    }
  } finally {
    await log.close();
  }
});
