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
import { smallDemoArgs } from '../support/small-config.js';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openJetStreamLog, type JetStreamEventLog } from '../../src/events/jetstream/jetstream-log.js';
import { readCredentials } from '../../src/events/jetstream/nats-roles.js';
import { freePort, natsServerBinary } from '../../src/nats-ops/nats-server.js';
import { openRunLog, runStreamNames } from '../../src/events/open-log.js';
import { finished, machinesAvailable, startMachines, type Machines } from '../support/machines.js';
import { uniqueLogNames } from '../support/nats.js';
import { describeEventLogConformance } from './conformance.js';

const { ok: namespaces, where } = machinesAvailable();
let m: Machines;

beforeAll(async () => {
  m = await startMachines({ tag: `m${process.pid % 10000}`, clients: ['c1', 'c2'] });
}, 90_000);

afterAll(async () => {
  await m?.stop();
});

/** Cuts server `name` off for `ms` and heals it, checking from a client machine that it was out of reach. */
async function partition(name: string, ms: number): Promise<void> {
  const node = m.cluster.nodes.find((n) => n.name === name)!;
  await m.partition(name, ms, () => {
    if (m.lab) expect(m.lab.canReach('c2', node.host, node.port)).toBe(false);
  });
}

describe(`JetStream log across machines (${where})`, () => {
  it('runs each server on its own address, TLS on routes and clients', () => {
    expect(m.cluster.tls).toBe(true);
    expect(m.cluster.auth).toBe(true);
    const addresses = m.cluster.nodes.map((n) => n.host);
    expect(new Set(addresses).size).toBe(namespaces ? 3 : 1);
  });

  it("keeps a stranger's server out of the cluster: routes need the cluster's credentials and CA", async () => {
    const n1 = m.cluster.nodes[0]!;
    const address = m.lab ? m.lab.host('c1').address : '127.0.0.1';
    const [port, clusterPort] = [await freePort(), await freePort()];
    const rogue = m.startOn('c1', natsServerBinary(), [
      '-a',
      address,
      '-p',
      String(port),
      '--cluster_name',
      'crucible',
      '--cluster',
      `nats://${address}:${clusterPort}`,
      '--routes',
      `nats-route://${n1.host}:${n1.clusterPort}`,
    ]);
    try {
      // Long enough for a route to be tried and, were it accepted, gossiped.
      await new Promise((r) => setTimeout(r, 4000));
      const log = await openJetStreamLog({ servers: [m.cluster.urls[0]!], ...uniqueLogNames(), credentials: readCredentials(m.creds('admin')) });
      try {
        const urls = log.connection.info?.connect_urls ?? [];
        // The cluster's own servers are announced; the stranger is not.
        for (const n of m.cluster.nodes.slice(1)) expect(urls).toContain(`${n.host}:${n.port}`);
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
    const admin = readCredentials(m.creds('admin'));
    return {
      open: (opts) => openJetStreamLog({ servers: m.cluster.urls, ...names, replicas: 3, credentials: admin, ...opts }),
      dispose: async () => {},
    };
  });

  it('partition one server for 10 s: a writer on another machine goes on, nothing lost or doubled, the server catches up', async () => {
    const runId = 'partition';
    const conductor = (await openRunLog(m.servers(), runId, { credsFile: m.creds('conductor'), replicas: 3 })) as JetStreamEventLog;
    try {
      const count = 600;
      // The writer reaches the cluster through the two servers that stay (a client on the healthy side).
      const reachable = m.cluster.urls.slice(0, 2).join(',');
      const spec = { servers: reachable, runId, credsFile: m.creds('executor'), stream: 'executor', prefix: 'w', count, pauseMs: 25 };
      const child = m.startOn('c1', process.execPath, ['--import', 'tsx', 'test/support/log-appender.ts', JSON.stringify(spec)]);
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
    const small = [...smallDemoArgs(m.dir), '--json'];
    const crucible = (host: string | null, args: string[]) =>
      finished(
        host === null
          ? execFile(process.execPath, ['bin/crucible.js', ...args], { maxBuffer: 1 << 24 })
          : m.startOn(host, process.execPath, ['bin/crucible.js', ...args]),
      );
    // The run reaches the cluster through the two servers that stay (a client on the healthy
    // side, as the writer above): a client whose own server is cut off notices only by its pings.
    const reachable = m.cluster.urls.slice(0, 2).join(',');
    const spread = crucible('c2', ['run', 'configs/demo.yaml', ...small, '--dir', path.join(m.dir, 'spread'), '--log', reachable, '--creds', m.creds('admin')]);
    let exited = false;
    void spread.then(() => (exited = true));
    // Cut a server off as soon as the run has started: the small run (a few seconds) then does
    // its work with one of the three servers out of reach. Catching up after the heal is checked
    // by the writer test above.
    await new Promise((r) => setTimeout(r, 1000));
    const runningWhenCut = !exited;
    // The run on one machine (a SQLite log) is made while the server is cut off: its table is
    // the reference, and the 10 s of the partition need not be waited out twice.
    const [local] = await Promise.all([crucible(null, ['run', 'configs/demo.yaml', ...small, '--dir', path.join(m.dir, 'local')]), partition('n3', 10_000)]);
    expect(local.code, local.stderr).toBe(0);
    const remote = await spread;
    expect(remote.code, remote.stderr).toBe(0);
    expect(runningWhenCut).toBe(true);
    type Row = Record<string, unknown>;
    const figures = (stdout: string) =>
      stdout
        .trim()
        .split('\n')
        .map((l) => {
          const { seconds: _s, runId: _r, ...rest } = JSON.parse(l) as Row;
          return rest;
        });
    expect(figures(remote.stdout)).toHaveLength(2);
    expect(figures(remote.stdout)).toEqual(figures(local.stdout));
  }, 300_000);
});
