/**
 * Executions per second of the demo's first round with its actors as worker processes over
 * JetStream (1 and 2 executor processes, every other role one process), on loopback and across
 * network namespaces (the server, the singleton roles and each executor on a host of its own,
 * joined by veth links; where namespaces can be made: root and iproute2), beside the in-process
 * run of the same config on the same kind of server (the baseline, measured in this run at the
 * same settings), and the log's round trip per program (publish the task, claim it, append its
 * ProgramExecuted, ack) to one server and to a cluster of three with R3 streams, on loopback and
 * across namespaces.
 *
 * Executions/s counts the pairs the sandbox ran (not those answered from recorded verdicts) over
 * the execution phase: from the round's first ExecutionRequested to its last ProgramExecuted, by
 * the events' `at` (so process start-up is not counted; round seconds include it).
 *
 *   npm run bench -- workers [--problems 12] [--round-trips 200]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { loadConfigFile } from '../src/config/load.js';
import type { RunConfig } from '../src/config/schema.js';
import { runExperiment, type RunOutcome } from '../src/actors/run.js';
import { openRunLog } from '../src/events/open-log.js';
import { openJetStreamLog } from '../src/events/jetstream/jetstream-log.js';
import type { EventEnvelope } from '../src/events/envelope.js';
import { allPairResults } from '../src/projections/recorded-verdicts.js';
import { natsDown, natsUp, readCluster } from '../src/nats-ops/nats-server.js';
import { JetStreamTaskQueue } from '../src/events/jetstream/jetstream-tasks.js';
import { runWithWorkers } from '../src/workers/run-workers.js';
import { parseWorkerCounts } from '../src/workers/roles.js';
import type { WorkerLauncher } from '../src/workers/supervisor.js';
import { NetLab } from '../test/support/netlab.js';
import { flag } from './flags.js';

interface Figures {
  label: string;
  pairs: number;
  programs: number;
  phaseSeconds: number;
  roundSeconds: number;
}

async function figuresOf(label: string, location: string, outcome: RunOutcome): Promise<Figures> {
  const log = await openRunLog(location, outcome.runId, { create: false });
  const events: EventEnvelope[] = [];
  try {
    for await (const e of log.read({}, { runId: outcome.runId, types: ['ExecutionRequested', 'ProgramExecuted'] })) events.push(e);
  } finally {
    await log.close();
  }
  const first = Math.min(...events.filter((e) => e.type === 'ExecutionRequested').map((e) => Date.parse(e.at)));
  const last = Math.max(...events.filter((e) => e.type === 'ProgramExecuted').map((e) => Date.parse(e.at)));
  const pairs = allPairResults(events).filter((r) => !r.cached).length;
  return {
    label,
    pairs,
    programs: events.filter((e) => e.type === 'ProgramExecuted').length,
    phaseSeconds: (last - first) / 1000,
    roundSeconds: outcome.rows[0]?.seconds ?? Number.NaN,
  };
}

/** Where a run's server and worker processes live: here on loopback, or on hosts of a lab of
 * network namespaces (the server on its own host, the five singleton roles on one, each
 * executor process on a host of its own), each on its own address behind a veth link. */
interface Placement {
  name: string;
  /** Servers of a fresh cluster of `nodes`. */
  up(dir: string, nodes: 1 | 3): Promise<void>;
  launch?: WorkerLauncher;
}

const loopback: Placement = { name: 'loopback', up: async (dir, nodes) => void (await natsUp({ nodes, dir })) };

function namespaces(lab: NetLab): Placement {
  return {
    name: 'namespaces',
    up: async (dir, nodes) => {
      const hosts = ['n1', 'n2', 'n3'].slice(0, nodes).map((n) => ({ address: lab.host(n).address, launcher: lab.launcher(n) }));
      await natsUp({ nodes, dir, hosts });
    },
    launch: ({ role, slot }, command, args, options) => lab.spawn(role === 'executor' ? `e${slot + 1}` : 'roles', command, args, options),
  };
}

/** A fresh cluster for each measurement (each run's streams to itself). */
async function onFreshServers<T>(root: string, name: string, where: Placement, nodes: 1 | 3, f: (url: string) => Promise<T>): Promise<T> {
  const dir = path.join(root, `nats-${name}`);
  await where.up(dir, nodes);
  try {
    return await f(readCluster(dir).urls.join(','));
  } finally {
    await natsDown(dir).catch(() => undefined);
  }
}

/** Publish, claim, append a ProgramExecuted-sized commit, ack: the log's part of one program. */
export async function roundTrip(url: string, n: number): Promise<number> {
  const log = await openJetStreamLog({ servers: url.split(','), stream: 'BENCH_RT', subjectPrefix: 'bench.rt' });
  try {
    const queue = await JetStreamTaskQueue.open(log, { name: 'programs' });
    const data = { queue: 'q', commitId: 'c', deliveries: 1, reason: 'x'.repeat(400) };
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      await queue.publish(`rt/${i}`, JSON.stringify({ requestId: 'r', programHash: String(i) }));
      const [task] = await queue.claim(1, 1000);
      await log.append('executor', [{ type: 'WorkAbandoned', runId: 'bench', data }], { commitId: `rt/${i}` });
      await task!.ack();
    }
    return (performance.now() - t0) / n;
  } finally {
    await log.close();
  }
}

export async function runBench(args: string[]): Promise<void> {
  const problems = flag(args, 'problems', 12);
  const trips = flag(args, 'round-trips', 200);
  const root = mkdtempSync(path.join(os.tmpdir(), 'crucible-bench-workers-'));
  const netns = NetLab.available();
  const lab = netns.ok ? new NetLab(`b${process.pid % 1000}`) : null;
  try {
    const placements: Placement[] = [loopback];
    if (lab) {
      for (const h of ['n1', 'n2', 'n3', 'roles', 'e1', 'e2']) lab.addHost(h);
      lab.attachHere();
      placements.push(namespaces(lab));
    }
    const config: RunConfig = loadConfigFile('configs/demo.yaml', {
      overrides: ['rounds=1', `dataset.limit=${problems}`, `sampling.problemsPerRound=${problems}`, `dir=${root}`],
    });
    const cacheDir = path.join(os.tmpdir(), 'crucible-bench-catalog');
    console.log(`workers: the demo's first round, ${problems} problems, ${os.availableParallelism()} cores; a fresh single nats-server per run`);
    console.log(
      lab
        ? '  namespaces: the server, the five singleton roles and each executor process on hosts of their own (network namespaces joined by veth links); loopback: every process here'
        : `  no namespaces here (${netns.reason}): loopback only`,
    );
    const rows: Figures[] = [];
    rows.push(
      await onFreshServers(root, 'in-process', loopback, 1, async (url) =>
        figuresOf('in-process (baseline)', url, await runExperiment({ config, dir: path.join(root, 'in-process'), log: url, cacheDir })),
      ),
    );
    for (const where of placements) {
      for (const executors of [1, 2]) {
        const name = `${where.name}-${executors}`;
        rows.push(
          await onFreshServers(root, name, where, 1, async (url) => {
            const started = performance.now();
            const outcome = await runWithWorkers({
              config,
              dir: path.join(root, name),
              location: url,
              counts: parseWorkerCounts(`executor=${executors}`),
              cacheDir,
              ...(where.launch ? { launch: where.launch } : {}),
            });
            if (!outcome.finished) throw new Error(`the run with ${executors} executor processes on ${where.name} did not finish`);
            const f = await figuresOf(`${where.name}: ${executors} executor${executors > 1 ? 's' : ''} (+5 roles)`, url, outcome);
            console.log(`  ${f.label}: whole command ${((performance.now() - started) / 1000).toFixed(1)} s (process start-up included)`);
            return f;
          }),
        );
      }
    }
    const base = rows[0]!;
    const rate = (f: Figures) => f.pairs / f.phaseSeconds;
    console.log('');
    console.log(
      [
        'run'.padEnd(34),
        'pairs run'.padStart(10),
        'programs'.padStart(9),
        'exec phase s'.padStart(13),
        'round s'.padStart(8),
        'pairs/s'.padStart(8),
        'vs baseline'.padStart(12),
      ].join(''),
    );
    for (const f of rows) {
      console.log(
        [
          f.label.padEnd(34),
          String(f.pairs).padStart(10),
          String(f.programs).padStart(9),
          f.phaseSeconds.toFixed(1).padStart(13),
          f.roundSeconds.toFixed(1).padStart(8),
          rate(f).toFixed(1).padStart(8),
          `${(rate(f) / rate(base)).toFixed(2)}x`.padStart(12),
        ].join(''),
      );
    }
    const pairsPerProgram = rows[1]!.pairs / Math.max(1, rows[1]!.programs);
    console.log('');
    console.log(`log round trip per program (publish task, claim, append ProgramExecuted, ack; ${trips} in a row), from this process:`);
    const trip = async (where: Placement, nodes: 1 | 3) => {
      const ms = await onFreshServers(root, `rt-${where.name}-${nodes}`, where, nodes, (url) => roundTrip(url, trips));
      console.log(
        `  ${`${where.name}, ${nodes === 1 ? 'one server (R1)' : 'three servers (R3)'}`.padEnd(36)}${ms.toFixed(2).padStart(7)} ms = ${(ms / pairsPerProgram).toFixed(3)} ms per (program, test)`,
      );
    };
    for (const where of placements) {
      await trip(where, 1);
      await trip(where, 3);
    }
    console.log(
      `  at the round's ${pairsPerProgram.toFixed(1)} pairs per program; the sandbox spends ${((1000 * base.phaseSeconds) / base.pairs).toFixed(2)} ms of wall time per pair in-process`,
    );
  } finally {
    lab?.destroy();
    rmSync(root, { recursive: true, force: true });
  }
}
