/**
 * Restart time of actors at the end of a run, from their latest snapshot against from the start
 * of the log (the baseline, measured in the same process on the same log). The run is the
 * orchestration benchmark's (demo set, the whole actor loop, a SQLite log) with verdicts from
 * InstantVerdictsForBenchmark, taking actor snapshots every `--every` folded events.
 *
 *   npm run bench -- restart [--rounds 8] [--problems 24] [--every 5000] [--repeat 3]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseConfig } from '../src/config/load.js';
import { SNAPSHOTS_FILE, runExperiment } from '../src/actors/run.js';
import { ActorRuntime, stateSchemasOf, type RestartReport } from '../src/actors/runtime.js';
import { SqliteSnapshotTable, decodeBody } from '../src/actors/snapshots.js';
import { checkStoredState } from '../src/actors/snapshot-schema.js';
import { conductor } from '../src/actors/conductor.js';
import { solver } from '../src/actors/solver.js';
import { adversary } from '../src/actors/adversary.js';
import { executor } from '../src/actors/executor.js';
import { judge } from '../src/actors/judge.js';
import { learner } from '../src/actors/learner.js';
import { openSqliteLog } from '../src/events/sqlite/sqlite-log.js';
import { InstantVerdictsForBenchmark } from './orchestration.js';
import { flag } from './flags.js';

const ACTORS = [conductor, solver, adversary, executor, judge, learner];

export async function runBench(args: string[]): Promise<void> {
  const rounds = flag(args, 'rounds', 8);
  const problems = flag(args, 'problems', 24);
  const every = flag(args, 'every', 5000);
  const repeat = flag(args, 'repeat', 3);
  const root = mkdtempSync(path.join(os.tmpdir(), 'crucible-bench-restart-'));
  try {
    const config = parseConfig({
      name: 'bench-restart',
      seed: 1,
      rounds,
      dir: root,
      dataset: { format: 'demo', limit: problems },
      sampling: { problemsPerRound: problems, groupSize: 8, suitesPerProgram: 2, suiteSize: 8, whiteBox: false },
      selection: { testSamples: 'all' },
    });
    const cacheDir = path.join(os.tmpdir(), 'crucible-bench-catalog');
    const started = performance.now();
    const outcome = await runExperiment({ config, cacheDir, sandbox: new InstantVerdictsForBenchmark(), snapshotEvery: every });
    const runSeconds = (performance.now() - started) / 1000;

    const log = await openSqliteLog(path.join(outcome.dir, 'log.db'), { create: false });
    const table = new SqliteSnapshotTable(path.join(outcome.dir, SNAPSHOTS_FILE), outcome.runId);
    const head = await log.head();
    console.log(
      `restart: ${rounds} rounds x ${problems} problems, ${head} events in the log (run took ${runSeconds.toFixed(1)} s, snapshots every ${every} events)`,
    );
    /** Best of `repeat` starts of a runtime holding `actors`, with or without the snapshot table. */
    const time = async (actors: typeof ACTORS, withSnapshots: boolean) => {
      let best = Number.POSITIVE_INFINITY;
      let reports: RestartReport[] = [];
      for (let k = 0; k < repeat; k++) {
        const got: RestartReport[] = [];
        // Starting runs no effect: no environment is needed.
        const runtime = new ActorRuntime(log, outcome.runId, null as never, actors as never, {
          ...(withSnapshots ? { snapshots: { table, every: 0 } } : {}),
          onRestart: (r) => got.push(r),
        });
        const t = performance.now();
        await runtime.start();
        best = Math.min(best, performance.now() - t);
        reports = got;
      }
      return { ms: best, folded: reports.reduce((n, r) => n + r.eventsFolded, 0), from: reports.map((r) => r.from) };
    };
    const checked = checkingCost(table, repeat);
    console.log(
      `  judge snapshot: ${(checked.bytes / 1024).toFixed(0)} KiB body (${checked.open} problems open); JSON.parse ${checked.parseMs.toFixed(1)} ms, checking it against its schemas ${checked.checkMs.toFixed(1)} ms`,
    );
    for (const [label, actors] of [
      ['judge', [judge]],
      ['all six actors', ACTORS],
    ] as const) {
      const snap = await time(actors as never, true);
      const zero = await time(actors as never, false);
      console.log(`  ${label}: from its snapshot ${snap.ms.toFixed(0)} ms (${snap.folded} events folded after position ${Math.min(...snap.from)})`);
      console.log(`  ${label}: baseline, from the start ${zero.ms.toFixed(0)} ms (${zero.folded} events folded)  -> ${(zero.ms / snap.ms).toFixed(1)}x`);
    }
    table.close();
    await log.close();
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

/** What a restore of the Judge's latest snapshot spends reading its body and checking it against
 * the Judge's schemas (context and index), best of `repeat`. */
function checkingCost(table: SqliteSnapshotTable, repeat: number) {
  const stored = table.latest('judge');
  if (!stored) throw new Error('the run left no snapshot of the judge');
  let parseMs = Number.POSITIVE_INFINITY;
  let checkMs = Number.POSITIVE_INFINITY;
  let open = 0;
  for (let k = 0; k < repeat; k++) {
    const t0 = performance.now();
    // Inflated (a large body is stored deflated) and parsed: what a restore reads.
    const body = JSON.parse(decodeBody(stored.body)) as { machine: { children: object }; index: unknown };
    const t1 = performance.now();
    const checked = checkStoredState('judge', stateSchemasOf(judge as never), body);
    const t2 = performance.now();
    if (!checked.ok) throw new Error(`the judge's snapshot does not match its schemas: ${checked.reason}`);
    parseMs = Math.min(parseMs, t1 - t0);
    checkMs = Math.min(checkMs, t2 - t1);
    open = Object.keys(body.machine.children).length;
  }
  return { bytes: stored.body.byteLength, open, parseMs, checkMs };
}
