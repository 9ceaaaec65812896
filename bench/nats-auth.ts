/**
 * What auth and TLS cost the JetStream log: the same appends and the same replay on three
 * one-server clusters started in the same run -- without auth (the baseline), with a user per role
 * (nkeys and per-role permissions), and with auth and TLS. Appends are made as the executor role
 * on its own stream (one event per commit, awaited one by one and pipelined), the replay as the
 * reader. Best of `--repeat` (default 3), clusters taken in turn within each repeat.
 *
 * Then the same on a 3-node R3 cluster with auth and TLS, on loopback and with every server in
 * its own network namespace (veth links to a bridge; the client here, attached to the bridge):
 * what the network hops add to an append. Needs root for the namespaces, else that line is
 * skipped with the reason.
 *
 *   npm run bench -- nats-auth [--commits 1000] [--repeat 3]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeEvent } from '../src/events/catalog.js';
import type { EventLog } from '../src/events/log.js';
import { credentialsFile } from '../src/events/jetstream/nats-roles.js';
import { natsDown, natsUp, type NatsCluster } from '../src/nats-ops/nats-server.js';
import { openRunLog } from '../src/events/open-log.js';
import { machinesAvailable, startMachines, type Machines } from '../test/support/machines.js';
import { issueAll } from './pipeline.js';

const WINDOW = 256;
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

interface Setup {
  label: string;
  cluster: NatsCluster;
  dir: string;
}

function flag(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(name);
  if (i < 0) return fallback;
  const n = Number(args[i + 1]);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} ${args[i + 1]}: expected a positive integer`);
  return n;
}

async function open(s: Setup, runId: string, role: 'conductor' | 'executor' | 'reader'): Promise<EventLog> {
  const creds = s.cluster.auth ? { credsFile: credentialsFile(s.dir, role) } : {};
  return openRunLog(s.cluster.urls.join(','), runId, { ...creds, create: role === 'conductor' });
}

async function appendMs(log: EventLog, runId: string, commits: number, pipelined: boolean): Promise<number> {
  const t0 = performance.now();
  await issueAll(commits, pipelined, WINDOW, (i) =>
    log.append('executor', [makeEvent('RunFailed', runId, { reason: `bench ${i}` })], { commitId: `${runId}-${i}` }),
  );
  return performance.now() - t0;
}

async function replayMs(log: EventLog, expected: number): Promise<number> {
  const t0 = performance.now();
  let n = 0;
  for await (const _ of log.read()) n++;
  if (n !== expected) throw new Error(`replay read ${n} events, expected ${expected}`);
  return performance.now() - t0;
}

export async function runBench(args: string[]): Promise<void> {
  const commits = flag(args, '--commits', 1000);
  const repeat = flag(args, '--repeat', 3);
  const root = mkdtempSync(join(tmpdir(), 'crucible-bench-auth-'));
  const setups: Setup[] = [];
  let machines: Machines | null = null;
  try {
    for (const [label, auth, tls] of [
      ['no auth (baseline)', false, false],
      ['auth (nkeys, per-role permissions)', true, false],
      ['auth + TLS', true, true],
    ] as const) {
      const dir = join(root, label.split(' ')[0]! + (tls ? '-tls' : ''));
      setups.push({ label, dir, cluster: await natsUp({ nodes: 1, dir, auth, tls }) });
    }
    const version = setups[0]!.cluster.version;
    console.log(
      `\nnats auth: nats-server ${version}, one server each; ${fmt(commits)} one-event commits per line; pipelined = ${WINDOW} in flight; best of ${repeat}`,
    );
    const best = new Map<string, number>();
    const keep = (key: string, ms: number) => best.set(key, Math.min(best.get(key) ?? Infinity, ms));
    /** One repeat on one cluster: appends awaited, appends pipelined, the replay of the latter. */
    const measure = async (s: Setup, r: number) => {
      for (const pipelined of [false, true]) {
        const runId = `bench-${r}-${pipelined ? 'p' : 'a'}`;
        const conductor = await open(s, runId, 'conductor');
        const executor = await open(s, runId, 'executor');
        keep(`${s.label}|${pipelined ? 'pipelined' : 'awaited'}`, await appendMs(executor, runId, commits, pipelined));
        await executor.close();
        await conductor.close();
        if (pipelined) {
          const reader = await open(s, runId, 'reader');
          keep(`${s.label}|replay`, await replayMs(reader, commits));
          await reader.close();
        }
      }
    };
    for (let r = 0; r < repeat; r++) {
      for (const s of setups) {
        await measure(s, r);
      }
    }
    // Three-node clusters: loopback, then namespaces (the lab's cluster), same figures.
    const loop = join(root, 'r3-loopback');
    setups.push({ label: 'R3 auth + TLS, loopback', dir: loop, cluster: await natsUp({ nodes: 3, dir: loop, auth: true, tls: true }) });
    const { ok, where } = machinesAvailable();
    if (ok) {
      machines = await startMachines({ tag: `b${process.pid % 10000}`, clients: [] });
      setups.push({ label: 'R3 auth + TLS, namespaces', dir: join(machines.dir, 'nats'), cluster: machines.cluster });
    } else {
      console.log(`(R3 across namespaces skipped: ${where})`);
    }
    for (let r = 0; r < repeat; r++) {
      for (const s of setups.slice(3)) {
        await measure(s, r);
      }
    }
    for (const what of ['awaited', 'pipelined', 'replay']) {
      for (const [i, s] of setups.entries()) {
        // One-server lines against the one server without auth; R3 lines against R3 on loopback.
        const base = best.get(`${setups[i < 3 ? 0 : 3]!.label}|${what}`)!;
        const ms = best.get(`${s.label}|${what}`)!;
        const label = `${what === 'replay' ? 'replay (log.read)' : `append ${what}`}: ${s.label}`;
        console.log(
          `${label.padEnd(58)} ${fmt((commits / ms) * 1000).padStart(8)} events/s  ${((ms / commits) * 1000).toFixed(0).padStart(5)} us/event  ${(base / ms).toFixed(2)}x baseline`,
        );
      }
    }
  } finally {
    for (const s of setups) await natsDown(s.dir).catch(() => undefined);
    await machines?.stop();
    rmSync(root, { recursive: true, force: true });
  }
}
