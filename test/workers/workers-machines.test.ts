/**
 * The demo as worker processes on many machines: a 3-node R3 cluster (auth and TLS) with each
 * server in its own network namespace, and every worker in a namespace of its own (the two
 * executors on two different machines), all joined by veth links to one switch. Mid-run the
 * server of a busy executor is SIGKILLed and restarted, then another server that workers talk
 * to is cut off for 10 s and healed. The workers notice by their pings (a cut link closes
 * nothing) or by the closed socket, go on through another server, and the run completes with
 * the table of the in-process run exactly, every (program, test) pair once, no commit lost or
 * doubled, and no worker restarted.
 *
 * Where namespaces cannot be made (not root, no iproute2, CRUCIBLE_NO_NETNS=1), the same test
 * runs on loopback and says so in its name; the cut is then a server frozen by SIGSTOP.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runIdOf } from '../../src/actors/run.js';
import type { RoundRow } from '../../src/projections/round-table.js';
import { readCluster, restartNode, type NatsNode } from '../../src/nats-ops/nats-server.js';
import { runWithWorkers } from '../../src/workers/run-workers.js';
import { parseWorkerCounts, type WorkerRole } from '../../src/workers/roles.js';
import { runStatus } from '../../src/workers/status.js';
import type { WorkerLauncher } from '../../src/workers/supervisor.js';
import type { RunConfig } from '../../src/config/schema.js';
import { smallConfig } from '../support/small-config.js';
import { clusterWarnings, machinesAvailable, startMachines, type Machines } from '../support/machines.js';
import { executionFacts, inProcessReference, singletonCommits, tableFigures } from '../support/run-facts.js';
import { runEvents as eventsOf } from '../support/run-log.js';
import { until } from '../support/until.js';
import { replicasCurrent, stallReport } from '../support/run-watch.js';

/** Short leases, beats and ack deadlines, so that hand-overs happen within the test. The ping
 * settings are the defaults: what the test shows is what a user gets. */
const WORKER_ARGS = ['--heartbeat-ms', '300', '--lease-ms', '3000', '--ack-wait-ms', '6000'];
/** One machine per worker process: the executors on e1 and e2, every other role on its own. */
const HOST_OF: Record<WorkerRole, readonly string[]> = {
  conductor: ['cond'],
  solver: ['solv'],
  adversary: ['adv'],
  executor: ['e1', 'e2'],
  judge: ['judge'],
  learner: ['learn'],
};

const { where } = machinesAvailable();
let m: Machines;
let config: RunConfig;
let reference: { rows: RoundRow[]; commits: string[] };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  m = await startMachines({ tag: `w${process.pid % 10000}`, clients: Object.values(HOST_OF).flat() });
  config = smallConfig(m.dir, { rounds: 4 });
  reference = await inProcessReference(config, path.join(m.dir, 'in-process'));
}, 120_000);

afterAll(async () => {
  await m?.stop();
});

/** The server each worker process talks to now, from the lines workers write (by pid). */
function serversOfWorkers(workersLog: string): Map<number, { role: string; server: string }> {
  const out = new Map<number, { role: string; server: string }>();
  for (const [, role, pid, server] of workersLog.matchAll(/crucible worker (\w+) \(pid (\d+)\): (?:connected|reconnected) to (\S+)/g))
    out.set(Number(pid), { role: role!, server: server! });
  return out;
}

const nodeAt = (nodes: readonly NatsNode[], server: string) => nodes.find((n) => server.endsWith(`:${n.port}`));

describe(`a run as worker processes on many machines (${where})`, () => {
  it('survives a SIGKILLed server and a 10 s partition of another: the in-process table, every pair once, no event lost or doubled, no worker restarted', async () => {
    const natsDir = path.dirname(m.creds('admin'));
    const dir = path.join(m.dir, 'workers');
    const launch: WorkerLauncher = ({ role, slot }, command, args, options) =>
      m.lab ? m.lab.spawn(HOST_OF[role][slot]!, command, args, options) : spawn(command, args, options);
    const faults: string[] = [];
    const said: string[] = [];
    let watcher: Promise<void> = Promise.resolve();
    let cut = '';
    let killed = '';
    let killedExecutor = 0;
    const stall = stallReport(m, 180_000, runIdOf(config), path.join(dir, 'workers.log'), faults);
    const controller = new AbortController();
    const run = runWithWorkers({
      signal: controller.signal,
      config,
      dir,
      location: m.servers(),
      credsFile: natsDir,
      counts: parseWorkerCounts('executor=2'),
      workerArgs: WORKER_ARGS,
      launch,
      say: (line) => said.push(line),
      onStarted: () => {
        watcher = (async () => {
          const runId = runIdOf(config);
          const status = () => runStatus(m.servers(), runId, { credsFile: m.creds('admin') });
          // Status answers within its bound or says it could not reach the log (a server just
          // killed, a loaded machine): asked again until it answers.
          const statusNow = () => until('the run status', 60_000, status);
          const workersLog = () => readFileSync(path.join(dir, 'workers.log'), 'utf8');
          // 1. SIGKILL the server of an executor running programs, and start it again 2 s later.
          const seen = await until('an executor running a program', 120_000, async () => {
            const now = await status();
            return now.completed ? 'completed' : now.workers.find((w) => w.role === 'executor' && !w.gone && w.running > 0);
          });
          if (seen === 'completed') return;
          const busy = seen;
          const node = nodeAt(readCluster(natsDir).nodes, serversOfWorkers(workersLog()).get(busy.pid)!.server)!;
          if ((await statusNow()).completed) return;
          killed = node.name;
          killedExecutor = busy.pid;
          process.kill(node.pid, 'SIGKILL');
          faults.push(`killed ${killed}`);
          await sleep(2000);
          await restartNode(natsDir, killed);
          await replicasCurrent(m, runId);
          // 2. Cut off another server that workers talk to for 10 s, and heal it.
          const nodes = readCluster(natsDir).nodes;
          const talkedTo = [...serversOfWorkers(workersLog()).values()].map((w) => nodeAt(nodes, w.server)!.name).filter((n) => n !== killed);
          cut = talkedTo[0]!;
          if ((await statusNow()).completed) return;
          faults.push(`cut ${cut}`);
          await m.partition(cut, 10_000);
        })();
      },
    });
    // A stalled run is stopped before the test fails: no supervisor restarts workers into a lab
    // that afterAll takes down.
    const outcome = await Promise.race([run, stall.report])
      .catch(async (err: unknown) => {
        controller.abort(err);
        await run.catch(() => undefined);
        throw err;
      })
      .finally(stall.cancel);
    await watcher;
    expect(outcome.finished).toBe(true);
    // Both faults happened while the run was going on.
    expect(faults).toEqual([`killed ${killed}`, `cut ${cut}`]);

    expect(tableFigures(outcome.rows)).toEqual(tableFigures(reference.rows));
    const events = await eventsOf(m.servers(), outcome.runId, m.creds('admin'));
    expect(singletonCommits(events)).toEqual(reference.commits);
    expect(executionFacts(events).problems).toEqual([]);

    const workersLog = readFileSync(path.join(dir, 'workers.log'), 'utf8');
    // No worker died: each went on through another server (a server without the replicas' fix
    // is said first).
    expect(said).toEqual(clusterWarnings(m));
    const lines = (pid: number) => workersLog.split('\n').filter((l) => l.includes(`(pid ${pid}):`));
    // The executor whose server was killed lost it, reconnected to another, and finished the run.
    const nodes = readCluster(natsDir).nodes;
    const killedNode = nodes.find((n) => n.name === killed)!;
    const after = lines(killedExecutor);
    expect(after.some((l) => new RegExp(`lost its server \\S+:${killedNode.port}$`).test(l))).toBe(true);
    const reconnected = after.map((l) => /reconnected to (\S+)$/.exec(l)?.[1]).filter((s): s is string => s !== undefined);
    expect(reconnected.some((s) => !s.endsWith(`:${killedNode.port}`))).toBe(true);
    expect(after.at(-1)).toMatch(/: run complete; \d+ commits written/);
    // Workers that talked to the cut server noticed by their pings and went on through another.
    const cutPort = nodes.find((n) => n.name === cut)!.port;
    expect(workersLog).toMatch(/its server stopped answering pings/);
    expect(workersLog).toMatch(new RegExp(`lost its server \\S+:${cutPort}\\n`));
  }, 240_000);
});
