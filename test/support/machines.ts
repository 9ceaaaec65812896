/**
 * A 3-node JetStream cluster on "many machines" for tests: each server in its own network
 * namespace on its own address (auth and TLS on, routes included), client hosts for the
 * processes under test, and the test process attached to the same network. Where namespaces
 * cannot be made (not root, no iproute2, or CRUCIBLE_NO_NETNS=1), everything runs on loopback
 * and `where` says so; a partition is then a server frozen by SIGSTOP.
 */
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { credentialsFile, type NatsRole } from '../../src/events/jetstream/nats-roles.js';
import { featuresOf, serverNotices } from '../../src/events/jetstream/jetstream-log.js';
import { natsDown, natsUp, readCluster, type NatsCluster, type NatsHost } from '../../src/nats-ops/nats-server.js';
import { NetLab } from './netlab.js';
import { capability } from './require.js';

export const SERVERS = ['n1', 'n2', 'n3'] as const;

export interface Machines {
  /** "network namespaces", or "loopback: ..." with the reason. */
  where: string;
  lab: NetLab | null;
  cluster: NatsCluster;
  /** A scratch directory removed by stop(). */
  dir: string;
  /** The cluster's client URLs, comma-separated (a --log location). */
  servers(): string;
  /** The credentials file of a role. */
  creds(role: NatsRole): string;
  /** Starts a process on client host `host` (on loopback: here), stdout and stderr piped. */
  startOn(host: string, command: string, args: string[]): ChildProcess;
  /** Cuts server `name` off the network (or freezes it) for `ms`, then heals it; `during` runs
   * halfway through. */
  partition(name: string, ms: number, during?: () => void | Promise<void>): Promise<void>;
  /** Stops the servers and the processes started, and removes every namespace and link. */
  stop(): Promise<void>;
}

export function machinesAvailable(): { ok: boolean; where: string } {
  const probe = NetLab.available();
  capability('netns', probe.ok ? null : (probe.reason ?? 'network namespaces cannot be made here'));
  return { ok: probe.ok, where: probe.ok ? 'network namespaces' : `loopback: namespaces cannot be made here (${probe.reason})` };
}

/** Starts the lab (when it can) and the cluster; on failure, cleans up what it made. */
export async function startMachines(opts: { tag: string; clients: readonly string[] }): Promise<Machines> {
  const { ok, where } = machinesAvailable();
  const dir = mkdtempSync(path.join(tmpdir(), 'crucible-machines-'));
  const natsDir = path.join(dir, 'nats');
  let lab: NetLab | null = null;
  const children = new Set<ChildProcess>();
  const stop = async () => {
    for (const c of children) c.kill('SIGKILL');
    await natsDown(natsDir).catch(() => undefined);
    lab?.destroy();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    let hosts: NatsHost[] | undefined;
    if (ok) {
      lab = new NetLab(opts.tag);
      for (const name of [...SERVERS, ...opts.clients]) lab.addHost(name);
      lab.attachHere();
      hosts = SERVERS.map((n) => ({ address: lab!.host(n).address, launcher: lab!.launcher(n) }));
    } else {
      process.stderr.write(`many-machines tests: running on ${where}\n`);
    }
    const cluster = await natsUp({ nodes: 3, dir: natsDir, auth: true, tls: true, ...(hosts ? { hosts } : {}) });
    return {
      where,
      lab,
      cluster,
      dir,
      servers: () => cluster.urls.join(','),
      creds: (role) => credentialsFile(natsDir, role),
      startOn: (host, command, args) => {
        const child = lab ? lab.spawn(host, command, args, { stdio: ['ignore', 'pipe', 'pipe'] }) : execFile(command, args, { maxBuffer: 1 << 24 });
        children.add(child);
        child.once('exit', () => children.delete(child));
        return child;
      },
      partition: async (name, ms, during) => {
        // Read again: a server restarted since the start runs under another pid.
        const node = readCluster(natsDir).nodes.find((n) => n.name === name);
        if (!node) throw new Error(`no server ${name}`);
        if (lab) lab.setLink(name, false);
        else process.kill(node.pid, 'SIGSTOP');
        try {
          await new Promise((r) => setTimeout(r, ms / 2));
          await during?.();
          await new Promise((r) => setTimeout(r, ms / 2));
        } finally {
          if (lab) lab.setLink(name, true);
          else process.kill(node.pid, 'SIGCONT');
        }
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** What a run on these machines' R3 cluster says first: the server's notices (jetstream-log.ts). */
export function clusterWarnings(m: Machines): string[] {
  return serverNotices(featuresOf(m.cluster.version), 3).map((n) => `warning: ${n}`);
}

/** What a child process printed, and how it ended. */
export function finished(child: ChildProcess): Promise<{ code: number | null; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d) => (stdout += String(d)));
  child.stderr?.on('data', (d) => (stderr += String(d)));
  return new Promise((resolve) => {
    if (child.exitCode !== null) resolve({ code: child.exitCode, stdout, stderr });
    else child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}
