/**
 * A run of Code-A1's shape (per step: 256 problems x 8 programs x 8 suites x 8 tests) through
 * the real actors, SQLite log and read models, for as many steps as `--fraction` of a
 * 15M-result run. Verdicts come from InstantVerdictsForBenchmark (a seeded stand-in sandbox: a
 * hash of program and test, no process started); problems are generated and programs and tests
 * come from SeededStandInPolicyForBenchmark (scale-policy.ts), which draws fresh ones at every
 * sample, so the results are executed, as a model's would be, not reused. Steps are counted
 * from the nominal 256 x 8 x 8 x 8 results; the figures are over the results the run recorded
 * (the reference's oracle runs and held-out runs included).
 *
 * Figures, each beside a baseline measured in the same run on the same rows:
 *  - log bytes per execution result (the log file over the run's results);
 *  - append results/s of the whole actor loop, against raw inserts of the same event bytes
 *    into a plain SQLite table at the same durability;
 *  - replay results/s into the read models the run keeps and into all of them (answer
 *    selection too, which reports build on demand), against a raw SELECT + JSON.parse of the
 *    same rows;
 *  - Judge restart at the end, from its snapshot and from position 0 (snapshotting as it folds,
 *    as a restart without a usable snapshot does).
 *
 *   npm run bench -- scale [--fraction 0.1] [--problems 256] [--snapshot-every 20000] [--dir D]
 *   npm run bench -- scale --log nats [--nodes 3]|nats://HOST:PORT[,...] [--creds FILE] [--fraction F] [--problems P] [--snapshot-every N]
 *
 * `--dir D` runs in D and keeps it: a run stopped there (a full-size run takes hours) is resumed
 * from its log by the same command, and the loop's figures then cover the resumed part only;
 * `--dir D --measure` takes the other figures of the run in D as it stands, without running it on.
 * `--log` makes the run's log a JetStream stream, on one nats-server the bench starts (`nats`; three
 * with `--nodes 3`) or on a running server or cluster (`--creds` its admin's credentials), with the
 * raw nats.js client as the baselines (scale-jetstream.ts).
 */
import { mkdirSync, mkdtempSync, rmSync, statSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import v8 from 'node:v8';
import vm from 'node:vm';
import Database from 'better-sqlite3';
import { parseConfig } from '../src/config/load.js';
import type { RunConfig } from '../src/config/schema.js';
import { DEFAULT_SNAPSHOT_EVERY, LOG_FILE, SNAPSHOTS_FILE, runExperiment, runIdOf } from '../src/actors/run.js';
import { flag } from './flags.js';
import { bytesWritten } from './storage.js';
import { ActorRuntime, type RestartReport } from '../src/actors/runtime.js';
import type { RunEnv } from '../src/actors/env.js';
import { SqliteSnapshotTable } from '../src/actors/snapshots.js';
import { judge } from '../src/actors/judge.js';
import { openSqliteLog } from '../src/events/sqlite/sqlite-log.js';
import { catalog } from '../src/events/catalog.js';
import { dataText } from '../src/events/sqlite/stored-data.js';
import { ProjectionRunner } from '../src/projections/runner.js';
import { KEPT_RUN_PROJECTIONS, RUN_PROJECTIONS } from '../src/projections/run-views.js';
import { InstantVerdictsForBenchmark } from './orchestration.js';
import { standInRun } from './scale-policy.js';
import { parseScaleLog } from './scale-log.js';
import { useWal } from '../src/core/sqlite-wal.js';

export const FULL_RUN_RESULTS = 15_000_000;
export const PROGRAMS = 8;
export const SUITES = 8;
export const TESTS = 8;
export const PROBLEMS = 256;

export function fraction(args: string[]): number {
  const i = args.indexOf('--fraction');
  if (i < 0) return 0.1;
  const f = Number(args[i + 1]);
  if (!Number.isFinite(f) || f <= 0 || f > 1) throw new Error(`--fraction needs a number in (0, 1], got "${args[i + 1] ?? ''}"`);
  return f;
}

/** A full garbage collection, so the heap printed per step is what the run retains, not what it
 * has yet to collect (V8's gc function, exposed for this process without a command-line flag). */
export function collector(): () => void {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

/** After each step: the heap once collected (what the run keeps in memory as it grows), the
 * entries the Judge's verdict index and the Executor's cache hold (see heldEntries), and the bytes
 * this process wrote to storage in the step per result the step recorded (flat over a run whose
 * writes do not grow with it). */
export function stepPrinter(t0: number): {
  onStep: (runtime: ActorRuntime<RunEnv>, p: { round: number; rounds: number; executions: number }) => void;
  heapPerStep: number[];
} {
  const gc = collector();
  let lastRound = 0;
  let last = { written: bytesWritten(), executions: 0 };
  const heapPerStep: number[] = [];
  const onStep = (runtime: ActorRuntime<RunEnv>, { round, rounds, executions }: { round: number; rounds: number; executions: number }) => {
    if (round === lastRound) return;
    lastRound = round;
    const written = bytesWritten();
    const stepWrites =
      written !== null && last.written !== null && executions > last.executions
        ? `; wrote ${Math.round((written - last.written) / (executions - last.executions))} bytes to storage per result of the step`
        : '';
    last = { written, executions };
    gc();
    const m = process.memoryUsage();
    heapPerStep.push(m.heapUsed);
    const held = (name: string) => (runtime.indexOf(name) as { heldEntries?: number } | undefined)?.heldEntries ?? 0;
    console.log(
      `  step ${round}/${rounds}: heap ${(m.heapUsed / 1e6).toFixed(0)} MB after a full collection (rss ${(m.rss / 1e6).toFixed(0)} MB; judge ${held('judge')}, executor ${held('executor')} entries held${stepWrites}), ${((performance.now() - t0) / 1000).toFixed(0)} s`,
    );
  };
  return { onStep, heapPerStep };
}

/** The 8 event types that take most bytes per result, then the rest together. */
export function printBytesByType(byType: Iterable<[string, { events: number; row: number; data: number }]>, results: number, heading: string): void {
  const types = [...byType].sort((a, b) => b[1].row - a[1].row);
  console.log(`  bytes per result by event type (${heading}):`);
  for (const [type, t] of types.slice(0, 8)) {
    console.log(
      `    ${type.padEnd(22)} ${String(t.events).padStart(8)} events  row ${(t.row / results).toFixed(1).padStart(6)}  data ${(t.data / results).toFixed(1).padStart(6)}`,
    );
  }
  const others = types.slice(8).reduce((n, [, t]) => n + t.row, 0);
  if (others > 0) console.log(`    (other types)                          row ${(others / results).toFixed(1).padStart(6)}`);
}

export function printHeapGrowth(heapPerStep: readonly number[]): void {
  // From step 2 on: step 1 also fills the run's bounded caches (parsed tests, recent blobs).
  if (heapPerStep.length >= 3)
    console.log(
      `  heap after a full collection grows ${((heapPerStep.at(-1)! - heapPerStep[1]!) / (heapPerStep.length - 2) / 1e6).toFixed(1)} MB per step from step 2 to ${heapPerStep.length}`,
    );
}

const fileBytes = (p: string) => (existsSync(p) ? statSync(p).size : 0);

/** The config of a run of Code-A1's shape for `fraction` of a 15M-result run: `steps` rounds of
 * `problems` x 8 programs x 8 suites x 8 tests, black-box, every test sample trained. */
export function scaleConfig(fraction: number, problems: number, dir: string): { config: RunConfig; steps: number } {
  if (!Number.isFinite(fraction) || fraction <= 0 || fraction > 1) throw new Error(`the fraction must be a number in (0, 1], got ${fraction}`);
  const perStep = problems * PROGRAMS * SUITES * TESTS;
  const steps = Math.max(1, Math.round((fraction * FULL_RUN_RESULTS) / perStep));
  const config = parseConfig({
    name: 'bench-scale',
    seed: 1,
    rounds: steps,
    dir,
    log: { synchronous: 'full' },
    // Not read: the problems and policy are the benchmark's own (given to the run as prepared).
    dataset: { format: 'demo' },
    sampling: { problemsPerRound: problems, groupSize: PROGRAMS, suitesPerProgram: SUITES, suiteSize: TESTS, whiteBox: false },
    selection: { testSamples: 'all' },
  });
  return { config, steps };
}

export async function runBench(args: string[]): Promise<void> {
  const where = parseScaleLog(args);
  // On JetStream: the same run, its own figures and baselines (loaded only then).
  if (where.kind !== 'sqlite') return (await import('./scale-jetstream.js')).runJetStreamScale(args, where);
  const f = fraction(args);
  const problems = flag(args, 'problems', PROBLEMS);
  const dirAt = args.indexOf('--dir');
  if (dirAt >= 0 && !args[dirAt + 1]) throw new Error('--dir needs a folder');
  const keep = dirAt >= 0 || process.env.CRUCIBLE_BENCH_KEEP === '1';
  const measureOnly = args.includes('--measure');
  if (measureOnly && dirAt < 0) throw new Error('--measure needs --dir: the folder of the run to measure');
  const root = dirAt >= 0 ? path.resolve(args[dirAt + 1]!) : mkdtempSync(path.join(os.tmpdir(), 'crucible-bench-scale-'));
  mkdirSync(root, { recursive: true });
  try {
    const { config, steps } = scaleConfig(f, problems, root);
    const cpu = () => {
      const u = process.cpuUsage();
      return (u.user + u.system) / 1e6;
    };
    // A run resumed in --dir: the loop's figures count only what this process records.
    const head = (() => {
      const file = path.join(root, runIdOf(config), LOG_FILE);
      if (!existsSync(file)) return 0;
      const db = new Database(file, { readonly: true });
      try {
        return (db.prepare('SELECT MAX(position) FROM events').pluck().get() as number | null) ?? 0;
      } finally {
        db.close();
      }
    })();
    if (head > 0) console.log(`  ${measureOnly ? 'measuring' : 'resuming'} the run in ${root} after position ${head}`);
    const t0 = performance.now();
    const w0 = bytesWritten();
    const c0 = cpu();
    const { onStep, heapPerStep } = stepPrinter(t0);
    const snapshotEvery = flag(args, 'snapshot-every', DEFAULT_SNAPSHOT_EVERY);
    const outcome = measureOnly
      ? { runId: runIdOf(config), dir: path.join(root, runIdOf(config)) }
      : await runExperiment({
          config,
          cacheDir: null,
          snapshotEvery,
          sandbox: new InstantVerdictsForBenchmark(),
          prepared: standInRun(problems, config.seed),
          onStep,
        });
    const runSeconds = (performance.now() - t0) / 1000;
    const runCpu = cpu() - c0;
    const w1 = bytesWritten();
    const logPath = path.join(outcome.dir, LOG_FILE);
    const logBytes = fileBytes(logPath) + fileBytes(`${logPath}-wal`);
    // Snapshots (bodies and side rows) as the run left them, before the restarts below open the file.
    const snapPath = path.join(outcome.dir, SNAPSHOTS_FILE);
    const snapBytes = fileBytes(snapPath) + fileBytes(`${snapPath}-wal`);

    const perSec = (s: number) => Math.round(results / s).toLocaleString('en');
    // Extrapolated to the whole run by steps, not by results: a step records about three results
    // per nominal pair (the reference's oracle runs, held-out and kill pairs besides the rewards).
    const toFull = (s: number) => ((s * fullScale) / 60).toFixed(1);
    const fullSteps = Math.max(1, Math.round(FULL_RUN_RESULTS / (problems * PROGRAMS * SUITES * TESTS)));
    const columns = 'position, id, commit_id, stream, type, v, run_id, causation_id, correlation_id, at, data, sum';
    // The stored rows, as the log holds them, read a row at a time (a full-size log does not fit
    // in the heap), and each figure printed once measured (a full-size run's end takes minutes).
    const db = new Database(logPath, { readonly: true });
    // Pages per table and index (SQLite's dbstat), so the bytes outside the events show too.
    const pages = db.prepare('SELECT name, SUM(pgsize) AS bytes FROM dbstat GROUP BY name ORDER BY bytes DESC').all() as { name: string; bytes: number }[];
    let events = 0;
    let results = 0;
    /** Results recorded by this process (all of them unless resumed). */
    let resultsHere = 0;
    let reused = 0;
    let dataBytes = 0;
    /** Problem-rounds evaluated: the steps the log holds, times the problems of a step. */
    let evaluated = 0;
    // Bytes per event type: the stored row (envelope columns and data) and its data alone.
    const byType = new Map<string, { events: number; row: number; data: number }>();
    for (const r of db.prepare(`SELECT ${columns} FROM events ORDER BY position`).raw().iterate() as Iterable<unknown[]>) {
      events++;
      // The stored column (deflated or text) is what the file holds; the text is what is parsed.
      const dataLen = Buffer.byteLength(r[10] as string | Buffer);
      dataBytes += dataLen;
      let rowLen = 0;
      for (const col of r) rowLen += typeof col === 'string' || Buffer.isBuffer(col) ? Buffer.byteLength(col) : 8;
      const t = byType.get(r[4] as string) ?? { events: 0, row: 0, data: 0 };
      t.events++;
      t.row += rowLen;
      t.data += dataLen;
      byType.set(r[4] as string, t);
      const stored = () => catalog.fromStored(r[4] as string, JSON.parse(dataText(r[10] as string | Buffer)), {});
      const got = r[4] === 'ProgramExecuted' ? (stored() as { pairs: unknown[] }).pairs.length : r[4] === 'ExecutionCompleted' ? 1 : 0;
      results += got;
      if (r[4] === 'ProblemEvaluated') evaluated++;
      if ((r[0] as number) > head) resultsHere += got;
      else if (r[4] === 'ExecutionRequested') reused += (stored() as { reused: unknown[] }).reused.length / 2;
    }
    if (results === 0 || evaluated === 0) throw new Error('the run recorded no execution results or evaluated no problem');
    const stepsInLog = evaluated / problems;
    /** The whole run (fullSteps steps) over the run measured. */
    const fullScale = fullSteps / stepsInLog;
    const nominalPairs = evaluated * PROGRAMS * SUITES * TESTS;
    console.log(
      `scale: fraction ${f} of a ${FULL_RUN_RESULTS.toLocaleString('en')}-pair run (${fullSteps} steps): ${steps} steps x ${problems} problems x ${PROGRAMS} programs x ${SUITES} suites x ${TESTS} tests; the log holds ${stepsInLog.toFixed(2)} steps`,
    );
    console.log(
      `  ${events} events, ${results} execution results (${(results / nominalPairs).toFixed(2)} per nominal pair; and ${reused} pairs answered from recorded verdicts; stand-in sandbox InstantVerdictsForBenchmark, SeededStandInPolicyForBenchmark)${measureOnly ? '' : `; run ${runSeconds.toFixed(1)} s`}`,
    );
    console.log(
      `  log size: ${(logBytes / results).toFixed(1)} bytes per result (${(logBytes / 1e6).toFixed(1)} MB; event data alone ${(dataBytes / results).toFixed(1)} bytes per result; ${(logBytes / nominalPairs).toFixed(1)} per nominal pair) -> ${((logBytes * fullScale) / 1e9).toFixed(2)} GB at fraction 1`,
    );
    console.log(
      `  bytes per result by table or index: ${pages
        .filter((p) => p.bytes / results >= 0.5)
        .map((p) => `${p.name} ${(p.bytes / results).toFixed(1)}`)
        .join(', ')}`,
    );
    printBytesByType(byType, results, 'row = envelope columns + data; data alone');
    printHeapGrowth(heapPerStep);

    // Baseline: the same rows inserted raw (one transaction per 64 rows, synchronous FULL, WAL),
    // read from the log in pages of 64 beforehand so that only the inserts are timed.
    const rawPath = path.join(root, 'raw.db');
    const raw = new Database(rawPath);
    useWal(raw);
    raw.pragma('synchronous = FULL');
    raw.exec(
      'CREATE TABLE events (position INTEGER PRIMARY KEY, id TEXT, commit_id TEXT, stream TEXT, type TEXT, v INTEGER, run_id TEXT, causation_id TEXT, correlation_id TEXT, at TEXT, data TEXT, sum TEXT)',
    );
    const ins = raw.prepare('INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)');
    const insertMany = raw.transaction((batch: unknown[][]) => {
      for (const r of batch) ins.run(...r);
    });
    const page = db.prepare(`SELECT ${columns} FROM events WHERE position > ? ORDER BY position LIMIT 64`).raw();
    let rawAppendSeconds = 0;
    let rawAppendCpu = 0;
    for (let after = -1; ;) {
      const batch = page.all(after) as unknown[][];
      if (batch.length === 0) break;
      after = batch.at(-1)![0] as number;
      const t = performance.now();
      const c = cpu();
      insertMany(batch);
      rawAppendSeconds += (performance.now() - t) / 1000;
      rawAppendCpu += cpu() - c;
    }
    raw.close();
    db.close();
    rmSync(rawPath, { force: true });
    const here = (s: number) => Math.round(resultsHere / s).toLocaleString('en');
    // A run already complete in --dir records nothing when run again: no loop figures then.
    if (measureOnly || resultsHere === 0) console.log(`  raw inserts of the same rows: ${perSec(rawAppendSeconds)} results/s (CPU: ${perSec(rawAppendCpu)})`);
    else
      console.log(
        `  append, whole actor loop${head > 0 ? ` (the resumed part: ${resultsHere} results)` : ''}: ${here(runSeconds)} results/s (CPU: ${here(runCpu)} results/s, ${((runCpu * 1e6) / resultsHere).toFixed(1)} us per result${w0 === null || w1 === null ? '' : `; ${((w1 - w0) / resultsHere).toFixed(0)} bytes written to storage per result`})   baseline, raw inserts of the same rows: ${perSec(rawAppendSeconds)} results/s (CPU: ${perSec(rawAppendCpu)})`,
      );

    // Replay from position 0 into a fresh file: the read models the run keeps, then every one
    // (answer selection too, which a report builds on demand), as `crucible replay` does.
    const log = await openSqliteLog(logPath, { create: false });
    const replayed = path.join(root, 'replayed-views.db');
    const replay = async (projections: typeof RUN_PROJECTIONS) => {
      for (const suffix of ['', '-wal', '-shm']) rmSync(replayed + suffix, { force: true });
      const t = performance.now();
      const c = cpu();
      const views = await ProjectionRunner.replayInto(replayed, { log, projections, runId: outcome.runId });
      const seconds = (performance.now() - t) / 1000;
      const cpuSeconds = cpu() - c;
      await views.close();
      return { seconds, cpuSeconds, bytes: fileBytes(replayed) + fileBytes(`${replayed}-wal`) };
    };
    const kept = await replay(KEPT_RUN_PROJECTIONS);
    const { seconds: replaySeconds, cpuSeconds: replayCpu, bytes: viewBytes } = await replay(RUN_PROJECTIONS);

    // Baseline: SELECT the same rows and JSON.parse each one's data (inflated where it is stored deflated).
    const ro = new Database(logPath, { readonly: true });
    const tRead = performance.now();
    const cRead = cpu();
    let parsed = 0;
    for (const r of ro.prepare('SELECT position, type, data, sum FROM events ORDER BY position').raw().iterate() as Iterable<unknown[]>) {
      if (JSON.parse(dataText(r[2] as string | Buffer)) !== null) parsed++;
    }
    const rawReadSeconds = (performance.now() - tRead) / 1000;
    const rawReadCpu = cpu() - cRead;
    ro.close();
    // The log's own read (decode, checksums, upcasting) with no read model: what replay costs
    // before any projection runs, and the read models' size beside the log's.
    const tDecode = performance.now();
    const cDecode = cpu();
    let decoded = 0;
    for await (const page of log.readPages!()) decoded += page.length;
    const decodeSeconds = (performance.now() - tDecode) / 1000;
    const decodeCpu = cpu() - cDecode;
    console.log(
      `  replay into the read models the run keeps (${KEPT_RUN_PROJECTIONS.map((p) => p.name).join(', ')}): ${perSec(kept.seconds)} results/s (CPU: ${perSec(kept.cpuSeconds)}) -> ${(rawReadSeconds / kept.seconds).toFixed(2)}x of raw (CPU: ${(rawReadCpu / kept.cpuSeconds).toFixed(2)}x); ${(kept.bytes / results).toFixed(1)} bytes per result`,
    );
    console.log(
      `  replay into all run read models (answer selection too, built on demand by reports): ${perSec(replaySeconds)} results/s (${Math.round(events / replaySeconds)} events/s; ${toFull(replaySeconds)} min at fraction 1; CPU: ${perSec(replayCpu)} results/s, ${toFull(replayCpu)} min)   baseline, raw SELECT + JSON.parse: ${perSec(rawReadSeconds)} results/s (CPU: ${perSec(rawReadCpu)}; ${parsed} rows) -> ${(rawReadSeconds / replaySeconds).toFixed(2)}x of raw (CPU: ${(rawReadCpu / replayCpu).toFixed(2)}x)`,
    );
    console.log(
      `  the log's own read (decode, checksums), no read model: ${perSec(decodeSeconds)} results/s (CPU: ${perSec(decodeCpu)}; ${decoded} events) -> ${(rawReadSeconds / decodeSeconds).toFixed(2)}x of raw (CPU: ${(rawReadCpu / decodeCpu).toFixed(2)}x); the read models replayed: ${(viewBytes / results).toFixed(1)} bytes per result (${(viewBytes / 1e6).toFixed(1)} MB; the log ${(logBytes / results).toFixed(1)})`,
    );

    // Judge restart at the end: from its snapshot, and from position 0 (baseline, last: at full
    // size it folds the whole log). The baseline is what a restart without a usable snapshot does:
    // it snapshots as it folds, into a file of its own, so its index holds one interval at a time.
    const table = new SqliteSnapshotTable(path.join(outcome.dir, SNAPSHOTS_FILE), outcome.runId);
    const refoldFile = path.join(outcome.dir, 'refold-snapshots.db');
    const restart = async (withSnapshots: boolean) => {
      const got: RestartReport[] = [];
      rmSync(refoldFile, { force: true });
      const refoldTable = withSnapshots ? null : new SqliteSnapshotTable(refoldFile, outcome.runId);
      const runtime = new ActorRuntime(log, outcome.runId, null as never, [judge] as never, {
        snapshots: refoldTable ? { table: refoldTable, every: snapshotEvery } : { table, every: 0 },
        onRestart: (r) => got.push(r),
      });
      const t = performance.now();
      const w = bytesWritten();
      try {
        await runtime.start();
      } finally {
        refoldTable?.close();
        for (const suffix of ['', '-wal', '-shm']) rmSync(refoldFile + suffix, { force: true });
      }
      const held = (runtime.indexOf('judge') as { heldEntries?: number } | undefined)?.heldEntries ?? 0;
      const after = bytesWritten();
      return { ms: performance.now() - t, folded: got.reduce((n, r) => n + r.eventsFolded, 0), held, written: w === null || after === null ? null : after - w };
    };
    const snapDb = new Database(snapPath, { readonly: true });
    const snapshotSizes = snapDb.prepare('SELECT actor, length(body) AS bytes, position FROM actor_snapshots ORDER BY bytes DESC').all() as {
      actor: string;
      bytes: number;
      position: number;
    }[];
    // Its pages by table (side rows, bodies) and those free (left by bodies replaced since).
    const snapPages = snapDb.prepare('SELECT name, SUM(pgsize) AS bytes FROM dbstat GROUP BY name ORDER BY bytes DESC').all() as {
      name: string;
      bytes: number;
    }[];
    snapPages.push({
      name: 'free pages',
      bytes: (snapDb.pragma('freelist_count', { simple: true }) as number) * (snapDb.pragma('page_size', { simple: true }) as number),
    });
    snapDb.close();
    console.log(
      `  snapshots.db: ${(snapBytes / results).toFixed(1)} bytes per result (${(snapBytes / 1e6).toFixed(1)} MB, file and WAL) -> ${((snapBytes * fullScale) / 1e9).toFixed(2)} GB at fraction 1; by table: ${snapPages
        .filter((p) => p.bytes / results >= 0.5)
        .map((p) => `${p.name} ${(p.bytes / results).toFixed(1)}`)
        .join(', ')}`,
    );
    console.log(`  snapshots: ${snapshotSizes.map((x) => `${x.actor} ${(x.bytes / 1e6).toFixed(1)} MB at ${x.position}`).join(', ')}`);
    const fromSnapshot = await restart(true);
    console.log(`  Judge restart at the end: from its snapshot ${fromSnapshot.ms.toFixed(0)} ms (${fromSnapshot.folded} events folded)`);
    const fromZero = await restart(false);
    console.log(
      `  baseline, Judge restart from position 0 (a snapshot every ${snapshotEvery} positions as it folds): ${fromZero.ms.toFixed(0)} ms (${fromZero.folded} events; ${fromZero.held} entries held at its end; ${fromZero.written === null ? 'storage writes not known here' : `${(fromZero.written / 1e6).toFixed(0)} MB written to storage`})`,
    );
    table.close();
    await log.close();
  } finally {
    // --dir, or CRUCIBLE_BENCH_KEEP=1, keeps the run's files to look into (their folder is printed).
    if (keep) console.log(`  kept: ${root}`);
    else rmSync(root, { recursive: true, force: true });
  }
}
