/**
 * The JetStream log on many machines: a 3-node cluster with auth and TLS (clients and routes),
 * each server in its own network namespace on its own address, joined by veth links to a bridge,
 * and the clients as processes in namespaces of their own. One server's link goes down for 10 s
 * and comes back: appends go on, nothing is lost or doubled, the server catches up; a demo run in
 * a namespace survives the same partition with the table of a run on one machine.
 *
 * Where namespaces cannot be made (not root, no iproute2), the same tests run on loopback and say
 * so in their names; the partition is then a server frozen by SIGSTOP for 10 s.
 */
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openJetStreamLog, type JetStreamEventLog } from '../../src/events/jetstream-log.js';
import { credentialsFile, readCredentials } from '../../src/events/nats-auth.js';
import { freePort, natsDown, natsServerBinary, natsUp, type NatsCluster, type NatsHost } from '../../src/events/nats-server.js';
import { openRunLog, runStreamNames } from '../../src/events/open-log.js';
import { uniqueLogNames } from '../support/nats.js';
import { NetLab } from '../support/netlab.js';
import { describeEventLogConformance } from './conformance.js';

const probe = NetLab.available();
const where = probe.ok ? 'network namespaces' : `loopback: namespaces cannot be made here (${probe.reason})`;
if (!probe.ok) process.stderr.write(`jetstream-machines: running on ${where}\n`);

const dir = mkdtempSync(path.join(tmpdir(), 'crucible-machines-'));
const natsDir = path.join(dir, 'nats');
let lab: NetLab | null = null;
let cluster: NatsCluster;
const SERVERS = ['n1', 'n2', 'n3'];

beforeAll(async () => {
  let hosts: NatsHost[] | undefined;
  if (probe.ok) {
    lab = new NetLab(`m${process.pid % 10000}`);
    for (const name of [...SERVERS, 'c1', 'c2']) lab.addHost(name);
    // The test process is one more machine on the network (it starts and watches the servers).
    lab.attachHere();
    hosts = SERVERS.map((n) => ({ address: lab!.host(n).address, launcher: lab!.launcher(n) }));
  }
  cluster = await natsUp({ nodes: 3, dir: natsDir, auth: true, tls: true, ...(hosts ? { hosts } : {}) });
}, 90_000);

afterAll(async () => {
  await natsDown(natsDir).catch(() => undefined);
  lab?.destroy();
  rmSync(dir, { recursive: true, force: true });
});

const creds = (role: Parameters<typeof credentialsFile>[1]) => credentialsFile(natsDir, role);
const servers = () => cluster.urls.join(',');

/** Cuts server `name` off the network (or freezes it, on loopback) for `ms`, then heals it; checks
 * from a client machine that the server was out of reach meanwhile. */
async function partition(name: string, ms: number): Promise<void> {
  const node = cluster.nodes.find((n) => n.name === name)!;
  if (lab) lab.setLink(name, false);
  else process.kill(node.pid, 'SIGSTOP');
  try {
    await new Promise((r) => setTimeout(r, ms / 2));
    if (lab) expect(lab.canReach('c2', node.host, node.port)).toBe(false);
    await new Promise((r) => setTimeout(r, ms / 2));
  } finally {
    if (lab) lab.setLink(name, true);
    else process.kill(node.pid, 'SIGCONT');
  }
}

/** Starts a process on client host `host` (on loopback: here). */
function startOn(host: string, command: string, args: string[]): ChildProcess {
  if (lab) return lab.spawn(host, command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  return execFile(command, args, { maxBuffer: 1 << 24 });
}

function finished(child: ChildProcess): Promise<{ code: number | null; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d) => (stdout += String(d)));
  child.stderr?.on('data', (d) => (stderr += String(d)));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}

describe(`JetStream log across machines (${where})`, () => {
  it('runs each server on its own address, TLS on routes and clients', () => {
    expect(cluster.tls).toBe(true);
    expect(cluster.auth).toBe(true);
    const addresses = cluster.nodes.map((n) => n.host);
    expect(new Set(addresses).size).toBe(probe.ok ? 3 : 1);
  });

  it('keeps a stranger\'s server out of the cluster: routes need the cluster\'s credentials and CA', async () => {
    const n1 = cluster.nodes[0]!;
    const address = lab ? lab.host('c1').address : '127.0.0.1';
    const [port, clusterPort] = [await freePort(), await freePort()];
    const rogue = startOn('c1', natsServerBinary(), [
      '-a', address, '-p', String(port), '--cluster_name', 'crucible', '--cluster', `nats://${address}:${clusterPort}`, '--routes', `nats-route://${n1.host}:${n1.clusterPort}`,
    ]);
    try {
      // Long enough for a route to be tried and, were it accepted, gossiped.
      await new Promise((r) => setTimeout(r, 4000));
      const log = await openJetStreamLog({ servers: [cluster.urls[0]!], ...uniqueLogNames(), credentials: readCredentials(creds('admin')) });
      try {
        const urls = log.connection.info?.connect_urls ?? [];
        // The cluster's own servers are announced; the stranger is not.
        for (const n of cluster.nodes.slice(1)) expect(urls).toContain(`${n.host}:${n.port}`);
        expect(urls.filter((u) => u.endsWith(`:${port}`))).toEqual([]);
      } finally {
        await log.close();
      }
    } finally {
      rogue.kill('SIGKILL');
    }
  }, 30_000);

  describeEventLogConformance(`jetstream R3 across machines (${where})`, async () => {
    const names = uniqueLogNames();
    const admin = readCredentials(creds('admin'));
    return {
      open: (opts) => openJetStreamLog({ servers: cluster.urls, ...names, replicas: 3, credentials: admin, ...opts }),
      dispose: async () => {},
    };
  });

  it('partition one server for 10 s: a writer on another machine goes on, nothing lost or doubled, the server catches up', async () => {
    const runId = 'partition';
    const conductor = (await openRunLog(servers(), runId, { credsFile: creds('conductor'), replicas: 3 })) as JetStreamEventLog;
    try {
      const count = 600;
      // The writer reaches the cluster through the two servers that stay (a client on the healthy side).
      const reachable = cluster.urls.slice(0, 2).join(',');
      const spec = { servers: reachable, runId, credsFile: creds('executor'), stream: 'executor', prefix: 'w', count, pauseMs: 25 };
      const child = startOn('c1', process.execPath, ['--import', 'tsx', 'test/support/log-appender.ts', JSON.stringify(spec)]);
      let appended = -1;
      child.stdout!.on('data', (d: Buffer) => {
        for (const m of String(d).matchAll(/appended (\d+)/g)) appended = Math.max(appended, Number(m[1]));
      });
      const done = finished(child);
      while (appended < 100) {
        if (child.exitCode !== null) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      const atCut = appended;
      await partition('n3', 10_000);
      const atHeal = appended;
      const result = await done;
      expect(result.code, result.stderr).toBe(0);
      // Appends went on while n3 was away.
      expect(atHeal).toBeGreaterThan(atCut);

      const ids: string[] = [];
      for await (const e of conductor.read({}, { streams: ['executor'] })) ids.push(e.commitId);
      expect(ids).toEqual(Array.from({ length: count }, (_, i) => `w-${i}`));

      // The cut-off replica is current again, with no lag, on both streams of the run.
      const jsm = conductor.jsm;
      for (const stream of [runStreamNames(runId).stream, `${runStreamNames(runId).stream}_BLOBS`]) {
        const deadline = Date.now() + 60_000;
        for (;;) {
          const info = await jsm.streams.info(stream);
          const all = [info.cluster?.leader, ...(info.cluster?.replicas ?? []).map((r) => r.name)];
          const n3 = info.cluster?.replicas?.find((r) => r.name === 'n3');
          if (info.cluster?.leader === 'n3' || (n3?.current === true && (n3.lag ?? 0) === 0)) {
            expect(all).toContain('n3');
            break;
          }
          if (Date.now() > deadline) throw new Error(`${stream}: n3 did not catch up: ${JSON.stringify(info.cluster)}`);
          await new Promise((r) => setTimeout(r, 250));
        }
      }
    } finally {
      await conductor.close();
    }
  }, 180_000);

  it('a demo run on another machine survives a 10 s partition of one server with the table of a run on one machine', async () => {
    const small = [
      '--set', 'rounds=2', '--set', 'dataset.limit=2', '--set', 'sampling.problemsPerRound=2', '--set', 'sampling.groupSize=4',
      '--set', 'policies.code.mutants=2', '--set', 'policies.test.candidates=12', '--set', `dir=${dir}`, '--json',
    ];
    const crucible = (host: string | null, args: string[]) =>
      finished(host === null ? execFile(process.execPath, ['bin/crucible.js', ...args], { maxBuffer: 1 << 24 }) : startOn(host, process.execPath, ['bin/crucible.js', ...args]));
    const local = await crucible(null, ['run', 'configs/demo.yaml', ...small, '--dir', path.join(dir, 'local')]);
    expect(local.code, local.stderr).toBe(0);
    const spread = crucible('c2', ['run', 'configs/demo.yaml', ...small, '--dir', path.join(dir, 'spread'), '--log', servers(), '--creds', creds('admin')]);
    let exited = false;
    void spread.then(() => (exited = true));
    // Let the run get going, then cut a server off while it works.
    await new Promise((r) => setTimeout(r, 3000));
    await partition('n3', 10_000);
    // The run was still at work when the server came back.
    expect(exited).toBe(false);
    const remote = await spread;
    expect(remote.code, remote.stderr).toBe(0);
    type Row = Record<string, unknown>;
    const figures = (stdout: string) => stdout.trim().split('\n').map((l) => {
      const { seconds: _s, runId: _r, ...rest } = JSON.parse(l) as Row;
      return rest;
    });
    expect(figures(remote.stdout)).toHaveLength(2);
    expect(figures(remote.stdout)).toEqual(figures(local.stdout));
  }, 300_000);
});
