/**
 * Chaos runs: the small demo (3 problems, 4 rounds) as worker processes (two executors, two
 * judge shares, one process of every other role) on a 3-node R3 cluster with auth and TLS, each
 * server and each worker on a host of its own (network namespaces joined by veth links; on
 * loopback where they cannot be made, a partition being a server frozen by SIGSTOP), under faults
 * drawn from a seed (bench/chaos-schedule.ts): SIGKILL of a worker (the supervisor starts it
 * again), SIGKILL of a server started again seconds later, SIGSTOP then SIGCONT of a server, a
 * 10 s partition of a server's host. Each fault fires once the run has executed its number of
 * (program, test) pairs; after a server's fault the next waits for the replicas of every stream
 * (the log's, the task queues', the worker board's) to be current again.
 *
 * Each run passes when it completes with the in-process run's table (wall times aside), every
 * pair executed once, the singleton roles' commits those of the in-process run, and no worker
 * restarted but those killed. Prints a line per run and a table; exit status 1 when a run failed.
 *
 *   npm run chaos -- --runs 5 [--seed 1] [--rounds 4] [--faults 4]
 *   npm run bench -- chaos --runs 5        (the same)
 *
 * Run k uses seed S + k - 1: a failing run is repeated alone with `--runs 1 --seed <its seed>`.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { isDeepStrictEqual } from 'node:util';
import { runIdOf } from '../src/actors/run.js';
import type { RunConfig } from '../src/config/schema.js';
import type { EventEnvelope } from '../src/events/envelope.js';
import type { RoundRow } from '../src/projections/round-table.js';
import { readCluster, restartNode } from '../src/nats-ops/nats-server.js';
import { runWithWorkers } from '../src/workers/run-workers.js';
import { parseWorkerCounts, type WorkerRole } from '../src/workers/roles.js';
import type { WorkerChild, WorkerLauncher } from '../src/workers/supervisor.js';
import { smallConfig } from '../test/support/small-config.js';
import { startMachines, SERVERS, type Machines } from '../test/support/machines.js';
import { executionFacts, inProcessReference, singletonCommits, tableFigures } from '../test/support/run-facts.js';
import { runEvents } from '../test/support/run-log.js';
import { clusterReport, replicasCurrent, stallReport } from '../test/support/run-watch.js';
import { chaosSchedule, describeFault, type Fault } from './chaos-schedule.js';
import { flag } from './flags.js';

/** Short leases, beats and ack deadlines, as in test/workers/workers-machines.test.ts: hand-overs
 * happen within a small run. */
const WORKER_ARGS = ['--heartbeat-ms', '300', '--lease-ms', '3000', '--ack-wait-ms', '6000'];
const WORKERS = 'executor=2,judge=2';
const HOST_OF: Record<WorkerRole, readonly string[]> = {
  conductor: ['cond'],
  solver: ['solv'],
  adversary: ['adv'],
  executor: ['e1', 'e2'],
  judge: ['j1', 'j2'],
  learner: ['learn'],
};
/** A run that has not finished by then is stopped and reported as stalled (a run takes 1.5 to 4
 * minutes on 2 loaded cores). */
const STALL_MS = 600_000;

const figures = tableFigures;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pairsOf = (events: readonly EventEnvelope[]) =>
  events.filter((e) => e.type === 'ProgramExecuted').reduce((n, e) => n + (e.data as { pairs: readonly unknown[] }).pairs.length, 0);

interface Reference {
  rows: RoundRow[];
  commits: string[];
  pairs: number;
}

interface Applied {
  fault: Fault;
  /** Seconds from the run's start. */
  startS: number;
  endS: number;
  /** Pairs executed when it fired. */
  pairs: number;
  note: string;
}

interface RunResult {
  seed: number;
  where: string;
  wallS: number;
  applied: Applied[];
  notReached: Fault[];
  restarts: number;
  /** Workers started again because the log changed under them. */
  rereads: number;
  failures: string[];
}

/** `--name N` allowing 0 (a seed). */
function seedFlag(args: string[]): number {
  const i = args.indexOf('--seed');
  if (i < 0) return 1;
  const n = Number(args[i + 1]);
  if (!Number.isInteger(n) || n < 0) throw new Error('--seed needs an integer of at least 0');
  return n;
}

/** What differs between two tables, round by round and field by field. */
function tableDifference(got: ReturnType<typeof figures>, want: ReturnType<typeof figures>): string {
  if (got.length !== want.length) return `${got.length} rounds, the in-process run ${want.length}`;
  const out: string[] = [];
  got.forEach((row, i) => {
    const w = want[i] as Record<string, unknown>;
    for (const [k, v] of Object.entries(row))
      if (!isDeepStrictEqual(v, w[k])) out.push(`round ${i + 1} ${k}: ${JSON.stringify(v)}, in-process ${JSON.stringify(w[k])}`);
  });
  return out.join('; ');
}

function listDifference(got: readonly string[], want: readonly string[]): string {
  const missing = want.filter((c) => !got.includes(c));
  const extra = got.filter((c, i) => !want.includes(c) || got.indexOf(c) !== i);
  return `${missing.length} missing (${missing.slice(0, 3).join(', ')}), ${extra.length} extra (${extra.slice(0, 3).join(', ')})`;
}

async function reference(config: RunConfig, dir: string): Promise<Reference> {
  const { rows, commits, events } = await inProcessReference(config, dir);
  return { rows, commits, pairs: pairsOf(events) };
}

async function chaosRun(k: number, seed: number, config: RunConfig, root: string, ref: Reference, faults: number): Promise<RunResult> {
  const schedule = chaosSchedule(seed, {
    total: ref.pairs,
    faults,
    spacing: Math.floor(ref.pairs / (faults + 3)),
    tail: Math.floor(ref.pairs / (faults + 3)),
    servers: SERVERS,
    processes: { executor: 2, solver: 1, adversary: 1, judge: 2 },
  });
  const m: Machines = await startMachines({ tag: `c${process.pid % 1000}${k}`, clients: Object.values(HOST_OF).flat() });
  const natsDir = path.dirname(m.creds('admin'));
  const dir = path.join(root, `run-${k}`);
  const runId = runIdOf(config);
  const applied: Applied[] = [];
  const said: string[] = [];
  const failures: string[] = [];
  let pairs = 0;
  let done = false;
  const waiters: (() => void)[] = [];
  const wake = () => waiters.splice(0).forEach((w) => w());
  const reached = (at: number) =>
    new Promise<void>((resolve) => {
      const check = () => (pairs >= at || done ? resolve() : waiters.push(check));
      check();
    });
  let children: () => WorkerChild[] = () => [];
  const started = performance.now();
  const seconds = () => (performance.now() - started) / 1000;

  async function apply(f: Fault): Promise<string> {
    switch (f.kind) {
      case 'kill-worker': {
        // A worker being started again after an earlier fault is waited for.
        for (let i = 0; i < 50; i++) {
          const child = children().find((c) => c.role === f.role && c.slot === f.slot);
          if (child?.process.pid !== undefined) {
            child.process.kill('SIGKILL');
            return `pid ${child.process.pid}`;
          }
          await sleep(100);
        }
        return 'no such process running';
      }
      case 'kill-server': {
        const node = readCluster(natsDir).nodes.find((n) => n.name === f.server)!;
        process.kill(node.pid, 'SIGKILL');
        await sleep(f.downMs);
        await restartNode(natsDir, f.server);
        return `pid ${node.pid}`;
      }
      case 'stop-server': {
        const node = readCluster(natsDir).nodes.find((n) => n.name === f.server)!;
        process.kill(node.pid, 'SIGSTOP');
        try {
          await sleep(f.forMs);
        } finally {
          process.kill(node.pid, 'SIGCONT');
        }
        return `pid ${node.pid}`;
      }
      case 'partition':
        await m.partition(f.server, f.forMs);
        return m.lab ? 'link down' : 'frozen (loopback)';
    }
  }

  const notReached: Fault[] = [];
  /** The faults made so far, for the report of a run that stalls. */
  const made: string[] = [];
  const chaos = async () => {
    for (const f of schedule) {
      await reached(f.at);
      if (done) {
        notReached.push(f);
        continue;
      }
      const startS = seconds();
      const at = pairs;
      made.push(`${startS.toFixed(0)} s: ${describeFault(f)}`);
      let note: string;
      try {
        note = await apply(f);
        if (f.kind !== 'kill-worker') {
          const t = seconds();
          // The next fault on a cluster still catching up could take a quorum away: every stream's
          // replicas (the task queues' too) are waited for.
          await replicasCurrent(m, runId, { every: true })
            .then(() => (note += `; replicas current ${(seconds() - t).toFixed(1)} s later`))
            .catch((err: unknown) => (note += `; replicas not current: ${(err as Error).message}`));
        }
      } catch (err) {
        note = `could not be made: ${(err as Error).message}`;
        failures.push(`fault ${describeFault(f)} ${note}`);
      }
      applied.push({ fault: f, startS, endS: seconds(), pairs: at, note });
    }
  };

  let chaosDone: Promise<void> = Promise.resolve();
  const firstExit: { report: Promise<string> | null } = { report: null };
  const controller = new AbortController();
  const launch: WorkerLauncher = ({ role, slot }, command, args, options) => m.lab!.spawn(HOST_OF[role][slot]!, command, args, options);
  const stall = stallReport(m, STALL_MS, runId, path.join(dir, 'workers.log'), made);
  try {
    const run = runWithWorkers({
      signal: controller.signal,
      config,
      dir,
      location: m.servers(),
      credsFile: natsDir,
      counts: parseWorkerCounts(WORKERS),
      workerArgs: WORKER_ARGS,
      ...(m.lab ? { launch } : {}),
      say: (line) => {
        said.push(line);
        // What the cluster says when a worker first dies of itself, before the run goes on.
        if (/exited with status/.test(line) && firstExit.report === null)
          firstExit.report = clusterReport(m, runId).then((r) => `at ${seconds().toFixed(1)} s: ${line}\n${r}`);
      },
      onStarted: (list) => {
        children = list;
        chaosDone = chaos();
      },
      onProgress: (p) => {
        pairs = p.executions;
        wake();
      },
    });
    const outcome = await Promise.race([run, stall.report])
      .catch(async (err: unknown) => {
        controller.abort(err);
        await run.catch(() => undefined);
        throw err;
      })
      .finally(() => {
        stall.cancel();
        done = true;
        wake();
      })
      .catch((err: unknown) => {
        failures.push(`the run failed: ${(err as Error).message}`);
        return null;
      });
    await chaosDone;
    const wallS = seconds();
    const killed = applied.filter((a) => a.fault.kind === 'kill-worker' && a.note.startsWith('pid')).length;
    const restarts = said.filter((l) => /starting another/.test(l)).length;
    // Workers that read messages the cluster then dropped stop and are started again at once:
    // recovery, not a failure, but counted and shown.
    const rereads = said.filter((l) => /reads the log again/.test(l)).length;
    if (outcome) {
      if (!outcome.finished) failures.push('the run did not complete');
      const got = figures(outcome.rows);
      const want = figures(ref.rows);
      if (!isDeepStrictEqual(got, want)) failures.push(`table differs: ${tableDifference(got, want)}`);
      const events = await runEvents(m.servers(), outcome.runId, m.creds('admin'));
      const commits = singletonCommits(events);
      if (!isDeepStrictEqual(commits, ref.commits)) failures.push(`singleton commits differ: ${listDifference(commits, ref.commits)}`);
      const { problems } = executionFacts(events);
      if (problems.length > 0) failures.push(`executions: ${problems.slice(0, 5).join('; ')}${problems.length > 5 ? ` (${problems.length} in all)` : ''}`);
      if (restarts !== killed) failures.push(`${restarts} workers restarted, ${killed} killed: ${said.join(' | ')}`);
      // The table is checked against the log at the end of the run and rebuilt where it missed
      // events: a run that needed it is a failure here, though its table is right.
      const missed = /crucible run: ((?:the read models missed events|a read of the log came back short)[^\n]*)/.exec(
        readFileSync(path.join(dir, 'workers.log'), 'utf8'),
      );
      if (missed) failures.push(missed[1]!);
    }
    if (firstExit.report) failures.push(`the cluster when a worker first exited ${await firstExit.report}`);
    if (failures.length > 0) {
      failures.push(`the cluster at the end:\n${await clusterReport(m, runId)}`);
      // The servers' logs, kept with the run's directory.
      cpSync(natsDir, path.join(dir, 'nats'), { recursive: true, filter: (f) => !/\.(creds|key|pem)/.test(f) });
      try {
        const tail = readFileSync(path.join(dir, 'workers.log'), 'utf8').trimEnd().split('\n').slice(-30).join('\n');
        failures.push(`last lines of workers.log:\n${tail}`);
      } catch {
        // No workers.log: the run failed before its workers started.
      }
    }
    return { seed, where: m.where, wallS, applied, notReached, restarts, rereads, failures };
  } finally {
    await m.stop();
  }
}

function printRun(k: number, runs: number, r: RunResult): void {
  console.log(
    `run ${k}/${runs} (seed ${r.seed}): ${r.failures.length === 0 ? 'pass' : 'FAIL'}, ${r.wallS.toFixed(1)} s, ${r.restarts} workers restarted${r.rereads > 0 ? `, ${r.rereads} started again to read a log that changed under them` : ''}`,
  );
  for (const a of r.applied)
    console.log(`  ${a.startS.toFixed(1).padStart(6)} s to ${a.endS.toFixed(1).padStart(6)} s, at ${a.pairs} pairs: ${describeFault(a.fault)} (${a.note})`);
  for (const f of r.notReached) console.log(`  not reached (run complete first): ${describeFault(f)} at ${f.at} pairs`);
  for (const f of r.failures) console.log(`  FAILED: ${f}`);
}

export async function runBench(args: string[]): Promise<void> {
  const runs = flag(args, 'runs', 1);
  const seed = seedFlag(args);
  const rounds = flag(args, 'rounds', 4);
  const faults = flag(args, 'faults', 4);
  const root = mkdtempSync(path.join(os.tmpdir(), 'crucible-bench-chaos-'));
  let keep = false;
  try {
    const config = smallConfig(root, { rounds });
    const t0 = performance.now();
    const ref = await reference(config, path.join(root, 'in-process'));
    console.log(
      `chaos: the small demo (${rounds} rounds, ${ref.pairs} pairs) as workers ${WORKERS} on 3 nats-servers, ${faults} faults a run, ${os.availableParallelism()} cores; ` +
        `the in-process reference run took ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    const results: RunResult[] = [];
    for (let k = 1; k <= runs; k++) {
      const r = await chaosRun(k, seed + k - 1, config, root, ref, faults);
      if (k === 1) console.log(`  on ${r.where}`);
      printRun(k, runs, r);
      results.push(r);
    }
    console.log('');
    console.log(['run', 'seed', 'wall s', 'restarts', 'verdict', 'faults (s from start: fault)'].map((h, i) => (i < 5 ? h.padEnd(9) : h)).join(''));
    results.forEach((r, i) =>
      console.log(
        [
          String(i + 1).padEnd(9),
          String(r.seed).padEnd(9),
          r.wallS.toFixed(1).padEnd(9),
          String(r.restarts).padEnd(9),
          (r.failures.length === 0 ? 'pass' : 'FAIL').padEnd(9),
          r.applied.map((a) => `${a.startS.toFixed(0)}: ${describeFault(a.fault)}`).join('; '),
        ].join(''),
      ),
    );
    const failed = results.filter((r) => r.failures.length > 0).length;
    console.log(`${runs - failed} of ${runs} runs passed`);
    if (failed > 0) {
      process.exitCode = 1;
      console.log(`the failed runs' directories (workers.log, the servers' logs) are kept in ${root}`);
    }
    keep = failed > 0;
  } finally {
    if (!keep) rmSync(root, { recursive: true, force: true });
  }
}
