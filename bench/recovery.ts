/**
 * Recovery after SIGKILL, with the demo as worker processes around a 3-node cluster on
 * loopback (R3 streams): in one run, an executor is SIGKILLed while programs run, then the
 * judge, then the nats-server most workers talk to (started again 2 s later). Per fault: when
 * the supervisor's replacement started, folded and appended its first commit (from the
 * timestamped lines of workers.log), and the longest wait between two appends to the log after
 * the fault. The baseline is the same run without faults, measured in this run at the same
 * settings: its longest wait between appends and its wall time. Each ack wait given is one pair
 * of runs (a claimed program whose executor died waits that long for another executor).
 *
 *   npm run bench -- recovery [--problems 6] [--rounds 3] [--ack-wait-ms 30000,10000] [--lease-ms 6000]
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { loadConfigFile } from '../src/config/load.js';
import type { RunConfig } from '../src/config/schema.js';
import { runIdOf } from '../src/actors/run.js';
import { openRunLog } from '../src/events/open-log.js';
import { natsDown, natsUp, readCluster, restartNode } from '../src/nats-ops/nats-server.js';
import { runWithWorkers } from '../src/workers/run-workers.js';
import { parseWorkerCounts } from '../src/workers/roles.js';
import type { WorkerChild } from '../src/workers/supervisor.js';
import { flag } from './flags.js';

function list(args: string[], name: string, fallback: number[]): number[] {
  const i = args.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const xs = String(args[i + 1] ?? '')
    .split(',')
    .map(Number);
  if (xs.length === 0 || !xs.every((n) => Number.isInteger(n) && n > 0)) throw new Error(`--${name} needs positive integers separated by commas`);
  return xs;
}

interface Line {
  at: number;
  role: string;
  pid: number;
  text: string;
}

const LINE = /^(\S+) crucible worker (\w+) \(pid (\d+)\): (.*)$/;
function workerLines(file: string): Line[] {
  const out: Line[] = [];
  for (const l of readFileSync(file, 'utf8').split('\n')) {
    const m = LINE.exec(l);
    if (m) out.push({ at: Date.parse(m[1]!), role: m[2]!, pid: Number(m[3]), text: m[4]! });
  }
  return out;
}

interface FaultFigures {
  fault: string;
  killedAt: number;
  /** Seconds from the kill: the replacement started, folded, first commit (null: none seen). */
  started: number | null;
  folded: number | null;
  firstCommit: number | null;
  /** Longest wait between two appends from the kill to the next fault (s). */
  longestGap: number;
}

interface RunFigures {
  wall: number;
  longestGap: number;
  faults: FaultFigures[];
}

/** Commit times of the run's log (one per distinct commit), in order. */
async function commitTimes(url: string, runId: string): Promise<number[]> {
  const log = await openRunLog(url, runId, { create: false });
  try {
    const seen = new Set<string>();
    const out: number[] = [];
    for await (const e of log.read({}, { runId })) {
      if (seen.has(e.commitId)) continue;
      seen.add(e.commitId);
      out.push(Date.parse(e.at));
    }
    return out;
  } finally {
    await log.close();
  }
}

function longestGap(times: readonly number[], from = -Infinity, to = Infinity): number {
  let best = 0;
  for (let i = 1; i < times.length; i++) if (times[i]! > from && times[i - 1]! < to) best = Math.max(best, times[i]! - Math.max(times[i - 1]!, from));
  return best / 1000;
}

async function oneRun(root: string, name: string, config: RunConfig, ackWaitMs: number, leaseMs: number, faulted: boolean): Promise<RunFigures> {
  const natsDir = path.join(root, `${name}-nats`);
  const cluster = await natsUp({ nodes: 3, dir: natsDir });
  const url = cluster.urls.join(',');
  const dir = path.join(root, name);
  const kills: { fault: string; at: number; pid: number | null }[] = [];
  let children: () => WorkerChild[] = () => [];
  let executions = 0;
  let round = 0;
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const waitFor = async (what: string, ok: () => boolean, ms = 120_000) => {
    const deadline = Date.now() + ms;
    while (!ok()) {
      if (Date.now() > deadline) throw new Error(`${name}: timed out waiting for ${what}`);
      await sleep(50);
    }
  };
  const kill = (role: string) => {
    const child = children().find((c) => c.role === role);
    if (!child?.process.pid) return;
    kills.push({ fault: `SIGKILL ${role}`, at: Date.now(), pid: child.process.pid });
    child.process.kill('SIGKILL');
  };
  let faults: Promise<void> = Promise.resolve();
  const started = performance.now();
  try {
    const outcome = await runWithWorkers({
      config,
      dir,
      location: url,
      counts: parseWorkerCounts('executor=1'),
      workerArgs: ['--ack-wait-ms', String(ackWaitMs), '--lease-ms', String(leaseMs)],
      cacheDir: path.join(os.tmpdir(), 'crucible-bench-catalog'),
      onProgress: (p) => {
        executions = p.executions;
        round = p.round;
      },
      onStarted: (list) => {
        children = list;
        if (!faulted) return;
        faults = (async () => {
          await waitFor('programs run', () => executions >= 5);
          kill('executor');
          await waitFor('round 1', () => round >= 1);
          await sleep(1000);
          kill('judge');
          await waitFor('round 2', () => round >= 2);
          // The server with the most workers on it: the first of the cluster (workers are
          // given the servers in order).
          const node = readCluster(natsDir).nodes[0]!;
          kills.push({ fault: `SIGKILL nats-server ${node.name}`, at: Date.now(), pid: null });
          process.kill(node.pid, 'SIGKILL');
          await sleep(2000);
          await restartNode(natsDir, node.name);
        })().catch((err: unknown) => console.log(`  ${name}: a fault was not made: ${(err as Error).message}`));
      },
    });
    await faults;
    const wall = (performance.now() - started) / 1000;
    if (!outcome.finished) throw new Error(`${name}: the run did not finish`);
    const times = await commitTimes(url, outcome.runId);
    const lines = faulted ? workerLines(path.join(dir, 'workers.log')) : [];
    const figures: FaultFigures[] = kills.map((k, i) => {
      const next = kills[i + 1]?.at ?? Infinity;
      const role = k.fault.startsWith('SIGKILL nats') ? null : k.fault.slice('SIGKILL '.length);
      // The replacement: the first worker of the role to start after the kill.
      const first = role === null ? undefined : lines.find((l) => l.role === role && l.at >= k.at && l.pid !== k.pid && l.text.startsWith('connected to'));
      const mine = first ? lines.filter((l) => l.pid === first.pid) : [];
      const since = (re: RegExp) => {
        const l = mine.find((x) => re.test(x.text));
        return l ? (l.at - k.at) / 1000 : null;
      };
      return {
        fault: k.fault,
        killedAt: k.at,
        started: first ? (first.at - k.at) / 1000 : null,
        folded: since(/^started: /),
        firstCommit: since(/^first commit appended/),
        longestGap: longestGap(times, k.at, next),
      };
    });
    return { wall, longestGap: longestGap(times), faults: figures };
  } finally {
    await natsDown(natsDir).catch(() => undefined);
  }
}

export async function runBench(args: string[]): Promise<void> {
  const problems = flag(args, 'problems', 6);
  const rounds = flag(args, 'rounds', 3);
  const ackWaits = list(args, 'ack-wait-ms', [30_000, 10_000]);
  const leaseMs = flag(args, 'lease-ms', 6000);
  const root = mkdtempSync(path.join(os.tmpdir(), 'crucible-bench-recovery-'));
  try {
    const config: RunConfig = loadConfigFile('configs/demo.yaml', {
      overrides: [`rounds=${rounds}`, `dataset.limit=${problems}`, `sampling.problemsPerRound=${problems}`, `dir=${root}`],
    });
    console.log(
      `recovery: the demo (${problems} problems, ${rounds} rounds) as workers (1 executor, 5 singleton roles) on a 3-node loopback cluster, lease ${leaseMs} ms; ${os.availableParallelism()} cores, load ${os.loadavg()[0]!.toFixed(1)}`,
    );
    console.log(`run id ${runIdOf(config)}; seconds from each SIGKILL; "longest wait": between two appends to the log, from the fault to the next one`);
    const fmt = (x: number | null) => (x === null ? '-' : x.toFixed(1)).padStart(9);
    for (const ackWaitMs of ackWaits) {
      const base = await oneRun(root, `base-${ackWaitMs}`, config, ackWaitMs, leaseMs, false);
      const run = await oneRun(root, `faults-${ackWaitMs}`, config, ackWaitMs, leaseMs, true);
      console.log('');
      console.log(`ack wait ${ackWaitMs} ms:`);
      console.log(['  fault'.padEnd(32), 'started'.padStart(9), 'folded'.padStart(9), '1st commit'.padStart(11), 'longest wait'.padStart(13)].join(''));
      console.log(['  baseline (no fault)'.padEnd(32), fmt(null), fmt(null), ''.padStart(11), fmt(base.longestGap).padStart(13)].join(''));
      for (const f of run.faults)
        console.log([`  ${f.fault}`.padEnd(32), fmt(f.started), fmt(f.folded), fmt(f.firstCommit).padStart(11), fmt(f.longestGap).padStart(13)].join(''));
      console.log(`  whole run: ${run.wall.toFixed(1)} s with the faults, ${base.wall.toFixed(1)} s without (${(run.wall - base.wall).toFixed(1)} s lost)`);
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
