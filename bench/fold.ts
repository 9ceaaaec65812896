/**
 * The actors' fold on a recorded run: each actor rebuilt from position 0 of a run's SQLite log
 * (no snapshot, no effect), CPU and wall time per event folded and per execution result, beside
 * the log's own read of the same events (the baseline, in the same process). The fold's cost is
 * what a restart without a snapshot pays and what a singleton actor spends per result.
 *
 *   npm run bench -- fold --dir RUN_DIR [--actors judge,learner] [--repeat 3]
 *
 * RUN_DIR is a run directory holding `log.db` (e.g. one `bench scale --dir D` kept).
 */
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { LOG_FILE } from '../src/actors/run.js';
import { ActorRuntime } from '../src/actors/runtime.js';
import { conductor } from '../src/actors/conductor.js';
import { solver } from '../src/actors/solver.js';
import { adversary } from '../src/actors/adversary.js';
import { executor } from '../src/actors/executor.js';
import { judge } from '../src/actors/judge.js';
import { learner } from '../src/actors/learner.js';
import { openSqliteLog } from '../src/events/sqlite/sqlite-log.js';
import type { EventLog } from '../src/events/log.js';
import { flag } from './flags.js';

const ACTORS = { conductor, solver, adversary, executor, judge, learner };

const cpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

export type ActorName = keyof typeof ACTORS;

/** One actor rebuilt from position 0 of `log` (no snapshot, no effect): CPU and wall seconds, and
 * the events it folded. */
export async function foldFromStart(log: EventLog, runId: string, name: ActorName): Promise<{ cpu: number; wall: number; folded: number }> {
  let folded = 0;
  const runtime = new ActorRuntime(log, runId, null as never, [ACTORS[name]] as never, { onRestart: (r) => (folded = r.eventsFolded) });
  const t = performance.now();
  const c = cpu();
  await runtime.start();
  return { wall: (performance.now() - t) / 1000, cpu: cpu() - c, folded };
}

/** The run directory given, or the one run directory inside it (a `bench scale --dir` root). */
function runDirOf(dir: string): string {
  if (existsSync(path.join(dir, LOG_FILE))) return dir;
  const inside = readdirSync(dir, { withFileTypes: true }).filter((d) => d.isDirectory() && existsSync(path.join(dir, d.name, LOG_FILE)));
  if (inside.length !== 1) throw new Error(`${dir}: not a run directory (no ${LOG_FILE}), nor a folder holding exactly one`);
  return path.join(dir, inside[0]!.name);
}

export async function runBench(args: string[]): Promise<void> {
  const dirAt = args.indexOf('--dir');
  if (dirAt < 0 || !args[dirAt + 1]) throw new Error('fold needs --dir: the run directory whose log to fold');
  const dir = runDirOf(path.resolve(args[dirAt + 1]!));
  const repeat = flag(args, 'repeat', 3);
  const actorsAt = args.indexOf('--actors');
  const names = actorsAt >= 0 ? args[actorsAt + 1]!.split(',') : ['judge'];
  for (const n of names) if (!(n in ACTORS)) throw new Error(`--actors: no actor named ${n} (${Object.keys(ACTORS).join(', ')})`);
  const log = await openSqliteLog(path.join(dir, LOG_FILE), { create: false, readOnly: true });
  try {
    let runId = '';
    let events = 0;
    let results = 0;
    // The baseline: the log's own read of every event (decode, checksums), no fold.
    const readOnce = async () => {
      const t = performance.now();
      const c = cpu();
      events = 0;
      results = 0;
      for await (const page of log.readPages!()) {
        for (const e of page) {
          runId ||= e.runId;
          events++;
          if (e.type === 'ProgramExecuted') results += (e.data as { pairs: unknown[] }).pairs.length;
        }
      }
      return { wall: (performance.now() - t) / 1000, cpu: cpu() - c };
    };
    const best = (xs: { wall: number; cpu: number }[]) => ({ wall: Math.min(...xs.map((x) => x.wall)), cpu: Math.min(...xs.map((x) => x.cpu)) });
    const reads = [];
    for (let i = 0; i < repeat; i++) reads.push(await readOnce());
    const read = best(reads);
    console.log(`fold: ${dir}: ${events} events, ${results} execution results; best of ${repeat}`);
    console.log(
      `  baseline, the log's read alone: ${((read.cpu * 1e6) / events).toFixed(1)} us CPU per event, ${((read.cpu * 1e6) / results).toFixed(2)} us per result (wall ${read.wall.toFixed(2)} s)`,
    );
    for (const name of names) {
      const runs = [];
      for (let i = 0; i < repeat; i++) runs.push(await foldFromStart(log, runId, name as ActorName));
      const f = best(runs);
      const folded = runs[0]!.folded;
      const own = f.cpu - read.cpu;
      console.log(
        `  ${name} from position 0: ${((f.cpu * 1e6) / results).toFixed(2)} us CPU per result, ${folded} events folded (${((f.cpu * 1e6) / Math.max(1, folded)).toFixed(1)} us per event; wall ${f.wall.toFixed(2)} s) -> the fold beyond the read: ${((own * 1e6) / results).toFixed(2)} us per result`,
      );
    }
  } finally {
    await log.close();
  }
}
