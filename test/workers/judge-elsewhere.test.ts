/**
 * A SIGKILLed judge replaced on another machine with no local files: the replacement starts
 * from the judge's latest snapshot on the cluster (not from the start of the log), and the run
 * completes with the in-process table, every (program, test) pair once, the same commits.
 *
 * Each worker runs in a network namespace of its own around a 3-node cluster (auth and TLS);
 * where namespaces cannot be made the same test runs on loopback and says so in its name.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runIdOf } from '../../src/actors/run.js';
import type { RoundRow } from '../../src/projections/round-table.js';
import { openRunLog } from '../../src/events/open-log.js';
import type { JetStreamEventLog } from '../../src/events/jetstream/jetstream-log.js';
import { JetStreamSnapshotStore } from '../../src/events/jetstream/jetstream-snapshots.js';
import { runWithWorkers } from '../../src/workers/run-workers.js';
import { parseWorkerCounts, type WorkerRole } from '../../src/workers/roles.js';
import type { WorkerChild, WorkerLauncher } from '../../src/workers/supervisor.js';
import type { RunConfig } from '../../src/config/schema.js';
import { smallConfig } from '../support/small-config.js';
import { clusterWarnings, machinesAvailable, startMachines, type Machines } from '../support/machines.js';
import { executionFacts, inProcessReference, singletonCommits, tableFigures } from '../support/run-facts.js';
import { runEvents as eventsOf } from '../support/run-log.js';
import { until } from '../support/until.js';

/** Snapshots every 40 folded events, so that the judge has one on the cluster early. */
const WORKER_ARGS = ['--heartbeat-ms', '300', '--lease-ms', '3000', '--ack-wait-ms', '6000', '--snapshot-every', '40'];
/** The judge first on `judge`, its replacement on `judge2`; every other role on a host of its own. */
const HOST_OF: Record<WorkerRole, readonly string[]> = {
  conductor: ['cond'],
  solver: ['solv'],
  adversary: ['adv'],
  executor: ['e1'],
  judge: ['judge', 'judge2'],
  learner: ['learn'],
};

const { where } = machinesAvailable();
let m: Machines;
let config: RunConfig;
let reference: { rows: RoundRow[]; commits: string[] };

beforeAll(async () => {
  m = await startMachines({ tag: `j${process.pid % 10000}`, clients: Object.values(HOST_OF).flat() });
  config = smallConfig(m.dir, { rounds: 4 });
  reference = await inProcessReference(config, path.join(m.dir, 'in-process'));
}, 120_000);

afterAll(async () => {
  await m?.stop();
});

describe(`a judge replaced on another machine (${where})`, () => {
  it('starts from its snapshot on the cluster with no local files, and the run has the in-process table, every pair once', async () => {
    const natsDir = path.dirname(m.creds('admin'));
    const dir = path.join(m.dir, 'workers');
    const judges: { pid: number; host: string; fresh: boolean }[] = [];
    const launch: WorkerLauncher = ({ role }, command, args, options) => {
      let host = HOST_OF[role][0]!;
      let argv = [...args];
      if (role === 'judge') {
        host = HOST_OF.judge[Math.min(judges.length, 1)]!;
        // The replacement's machine has no run directory: its snapshot file is one nobody made.
        if (judges.length > 0) argv = argv.map((a, i) => (argv[i - 1] === '--snapshots' ? path.join(m.dir, `judge-${judges.length}`, 'snapshots.db') : a));
      }
      const child = m.lab ? m.lab.spawn(host, command, argv, options) : spawn(command, argv, options);
      if (role === 'judge') judges.push({ pid: child.pid!, host, fresh: !existsSync(path.dirname(argv[argv.indexOf('--snapshots') + 1]!)) });
      return child;
    };
    const said: string[] = [];
    let children: () => WorkerChild[] = () => [];
    let killedAt = -1;
    let watcher: Promise<void> = Promise.resolve();
    const controller = new AbortController();
    const run = runWithWorkers({
      signal: controller.signal,
      config,
      dir,
      location: m.servers(),
      credsFile: natsDir,
      counts: parseWorkerCounts('executor=1'),
      workerArgs: WORKER_ARGS,
      launch,
      say: (line) => said.push(line),
      onStarted: (list) => {
        children = list;
        watcher = (async () => {
          const log = (await openRunLog(m.servers(), runIdOf(config), { create: false, credsFile: m.creds('admin') })) as JetStreamEventLog;
          try {
            const store = await JetStreamSnapshotStore.open(log);
            // Once the judge's snapshot is on the cluster (and the run still under way): SIGKILL.
            const head = await until("the judge's snapshot on the cluster", 120_000, async () => (await store.head('judge')) ?? undefined).catch(
              (err: Error) => {
                const tail = readFileSync(path.join(dir, 'workers.log'), 'utf8').trimEnd().split('\n').slice(-40).join('\n');
                throw new Error(`${err.message}; last lines of workers.log:\n${tail}`);
              },
            );
            killedAt = head.position;
            const judge = children().find((c) => c.role === 'judge')!;
            judge.process.kill('SIGKILL');
          } finally {
            await log.close();
          }
        })();
      },
    });
    const timer = setTimeout(() => controller.abort(new Error('the run did not finish in 200 s')), 200_000);
    const outcome = await run.finally(() => clearTimeout(timer));
    await watcher;
    expect(outcome.finished).toBe(true);
    expect(killedAt).toBeGreaterThan(0);
    expect(tableFigures(outcome.rows)).toEqual(tableFigures(reference.rows));
    const events = await eventsOf(m.servers(), outcome.runId, m.creds('admin'));
    expect(singletonCommits(events)).toEqual(reference.commits);
    expect(executionFacts(events).problems).toEqual([]);

    // One replacement, on the other machine, from a snapshot file that did not exist before it.
    expect(said).toEqual([...clusterWarnings(m), `judge worker (pid ${judges[0]!.pid}) was killed (SIGKILL): starting another`]);
    expect(judges.map((j) => j.host)).toEqual(['judge', 'judge2']);
    expect(judges.map((j) => j.fresh)).toEqual([false, true]);
    const workersLog = readFileSync(path.join(dir, 'workers.log'), 'utf8');
    const lines = workersLog.split('\n').filter((l) => l.includes(`(pid ${judges[1]!.pid}):`));
    const took = lines.map((l) => /took the cluster's snapshot of judge at log position (\d+)/.exec(l)).find((x) => x !== null);
    expect(took, lines.join('\n')).toBeDefined();
    expect(Number(took![1])).toBeGreaterThan(0);
    const started = lines.map((l) => /started from its snapshot at position (\d+): (\d+) events folded/.exec(l)).find((x) => x !== null);
    expect(started, lines.join('\n')).toBeDefined();
    // It folded only what came after the snapshot, not the log from its start.
    expect(events.filter((e) => Number(e.position) <= Number(started![1])).length).toBeGreaterThan(0);
    expect(lines.at(-1)).toMatch(/: run complete; \d+ commits written/);
  }, 300_000);
});
