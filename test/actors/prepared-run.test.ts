/**
 * RunOptions.prepared: a run takes its problems and policy backend from the caller instead of
 * the config's dataset (what `bench scale` does with generated problems and its seeded stand-in
 * policy). Real SQLite log; the benchmark's stand-in sandbox, since what is checked here is which
 * problems and policy the run used, not verdicts.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { runExperiment } from '../../src/actors/run.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import type { EventData } from '../../src/events/catalog.js';
import { InstantVerdictsForBenchmark } from '../../bench/orchestration.js';
import { standInRun } from '../../bench/scale-policy.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'crucible-prepared-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('a run with prepared problems and policy', () => {
  it('schedules the given problems, samples from the given backend and finishes', async () => {
    const config = parseConfig({
      name: 'prepared',
      seed: 2,
      rounds: 2,
      dir: root,
      dataset: { format: 'demo' },
      sampling: { problemsPerRound: 3, groupSize: 2, suitesPerProgram: 2, suiteSize: 3, whiteBox: false },
      selection: { testSamples: 'all' },
    });
    const prepared = standInRun(3, 2);
    const outcome = await runExperiment({ config, cacheDir: null, sandbox: new InstantVerdictsForBenchmark(), prepared });
    expect(outcome.finished).toBe(true);
    expect(outcome.rows.map((r) => r.round)).toEqual([1, 2]);
    const log = await openSqliteLog(path.join(outcome.dir, 'log.db'), { create: false });
    const started: EventData<'RunStarted'>[] = [];
    const samplers = new Set<string>();
    const programs = new Set<string>();
    for await (const e of log.read({}, { types: ['RunStarted', 'SolutionSampled'] })) {
      if (e.type === 'RunStarted') started.push(e.data as EventData<'RunStarted'>);
      else {
        const d = e.data as EventData<'SolutionSampled'>;
        samplers.add(d.policy.name);
        programs.add(d.programHash);
      }
    }
    await log.close();
    expect(started[0]!.problems.map((p) => p.problemId)).toEqual(prepared.problems.map((p) => p.id));
    expect([...samplers]).toEqual(['stand-in-code']);
    // The stand-in draws a fresh program at every sample: 2 rounds x 3 problems x 2 programs.
    expect(programs.size).toBe(12);
  });
});
