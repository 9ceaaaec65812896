/**
 * Local nats-server processes with JetStream, for people (`crucible nats up|down`) and for tests:
 * one server, or three with cluster routes (R3 streams need three). Each server's pid, ports and
 * files are written to <dir>/nats.json, so `down` stops exactly the processes `up` started.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync, closeSync } from 'node:fs';
import { createServer, connect as tcpConnect } from 'node:net';
import path from 'node:path';
import { z } from 'zod';
import { connect } from '@nats-io/transport-node';
import { StorageType, jetstreamManager } from '@nats-io/jetstream';
import { NatsServerError } from './nats-server-error.js';
import { type NatsCredentials } from '../events/jetstream/nats-roles.js';
import { accountsConfig, ensureCredentials } from './credentials.js';
import { credentialOptions } from '../events/jetstream/nats-connect.js';
import { ensureTls, tlsBlock } from './nats-tls.js';

const NodeRecord = z.strictObject({
  name: z.string(),
  pid: z.int().positive(),
  /** The address it listens on (a namespace's own address in the many-machines tests). */
  host: z.string().default('127.0.0.1'),
  port: z.int().positive(),
  clusterPort: z.int().positive().nullable(),
  /** Command words put before the binary (e.g. `ip netns exec NS`), kept for restarts. */
  launcher: z.array(z.string()).default([]),
  configFile: z.string(),
  logFile: z.string(),
});
const ClusterRecord = z.strictObject({
  version: z.string(),
  /** Clients must authenticate with a role's credentials (DIR/<role>.creds.json). */
  auth: z.boolean().default(false),
  /** Clients and routes speak TLS (DIR/tls/). */
  tls: z.boolean().default(false),
  nodes: z.array(NodeRecord).min(1),
});
export type NatsNode = z.infer<typeof NodeRecord>;
export type NatsCluster = z.infer<typeof ClusterRecord> & { dir: string; urls: string[] };

export { NatsServerError };

const STATE = 'nats.json';
/** Written by `down` while it stops the servers: a supervisor seeing it restarts none. */
export const STOPPING = 'nats.stopping';

/** The nats-server binary: $NATS_SERVER, then PATH, then Debian's /usr/sbin. */
export function natsServerBinary(): string {
  const candidates = [process.env.NATS_SERVER, ...(process.env.PATH ?? '').split(':').map((d) => path.join(d, 'nats-server')), '/usr/sbin/nats-server'];
  for (const c of candidates) if (c && existsSync(c)) return c;
  throw new NatsServerError('nats-server not found (set NATS_SERVER, put it on PATH, or `apt-get install nats-server`)');
}

/** "2.9.10" from `nats-server --version`. */
export function natsServerVersion(binary = natsServerBinary()): string {
  const out = spawnSync(binary, ['--version'], { encoding: 'utf8' });
  const m = /v?(\d+\.\d+\.\d+)/.exec(`${out.stdout}${out.stderr}`);
  if (!m) throw new NatsServerError(`${binary} --version printed no version`);
  return m[1]!;
}

/** A port nobody listens on right now (the OS picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

function portOpen(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const s = tcpConnect({ port, host });
    s.setTimeout(1000, () => {
      s.destroy();
      resolve(false);
    });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Where one server runs: its address, and what its command is started through. */
export interface NatsHost {
  address: string;
  /** Words put before the nats-server command, e.g. ['ip', 'netns', 'exec', 'ns1']. */
  launcher?: readonly string[];
}

export interface NatsUpOptions {
  /** 2 makes a cluster too small for R3 streams (what a log does then is tested). */
  nodes: 1 | 2 | 3;
  dir: string;
  /** Client port of the first server (the others take free ports). Default: a free port. */
  port?: number;
  binary?: string;
  /** Accounts with a user per role, credentials written into `dir` (nats-auth.ts). Default false. */
  auth?: boolean;
  /** TLS for clients and cluster routes, with a CA made in `dir/tls` (nats-tls.ts). Default false. */
  tls?: boolean;
  /** One per node; default: every node on 127.0.0.1, started directly. */
  hosts?: readonly NatsHost[];
}

/** Starts the servers (detached: they outlive this process) and waits until each accepts clients. */
export async function natsUp(opts: NatsUpOptions): Promise<NatsCluster> {
  const dir = path.resolve(opts.dir);
  if (existsSync(path.join(dir, STATE))) {
    const running = readCluster(dir);
    if (running.nodes.some((n) => alive(n.pid))) {
      throw new NatsServerError(
        `${dir} already has running nats-servers (pids ${running.nodes.map((n) => n.pid).join(', ')}); run \`crucible nats down --dir ${opts.dir}\` first`,
      );
    }
  }
  // A `down` that died midway left its marker: these servers are started anew.
  rmSync(path.join(dir, STOPPING), { force: true });
  if (opts.hosts !== undefined && opts.hosts.length !== opts.nodes) throw new NatsServerError(`${opts.hosts.length} hosts given for ${opts.nodes} servers`);
  const hosts: readonly NatsHost[] = opts.hosts ?? Array.from({ length: opts.nodes }, () => ({ address: '127.0.0.1' }));
  const binary = opts.binary ?? natsServerBinary();
  const version = natsServerVersion(binary);
  mkdirSync(dir, { recursive: true });
  const ports: number[] = [];
  for (let i = 0; i < opts.nodes; i++) ports.push(i === 0 && opts.port !== undefined ? opts.port : await freePort());
  const clusterPorts: (number | null)[] = [];
  for (let i = 0; i < opts.nodes; i++) clusterPorts.push(opts.nodes > 1 ? await freePort() : null);
  if (opts.port !== undefined && (await portOpen(opts.port, hosts[0]!.address)))
    throw new NatsServerError(`port ${opts.port} is already in use on ${hosts[0]!.address}`);
  const auth = opts.auth === true;
  if (opts.tls === true && !auth) throw new NatsServerError('TLS needs auth: clients get the CA in their credentials files');
  const tls =
    opts.tls === true
      ? ensureTls(
          dir,
          hosts.map((h) => h.address),
        )
      : null;
  const creds = auth ? ensureCredentials(dir, tls?.ca ?? null) : null;
  // Routes authenticate too, so that no stranger's server joins the cluster (and reads its streams).
  const routeSecret = auth ? randomBytes(24).toString('base64url') : null;
  const routeUser = routeSecret !== null ? `crucible:${routeSecret}@` : '';
  const nodes: NatsNode[] = [];
  try {
    for (let i = 0; i < opts.nodes; i++) {
      const name = `n${i + 1}`;
      const nodeDir = path.join(dir, name);
      const host = hosts[i]!;
      mkdirSync(nodeDir, { recursive: true });
      const routes = clusterPorts
        .map((p, j) => ({ p, j }))
        .filter(({ j }) => j !== i)
        .map(({ p, j }) => `nats-route://${routeUser}${hosts[j]!.address}:${p}`);
      const clusterAuth = routeSecret !== null ? `, authorization { user: crucible, password: ${JSON.stringify(routeSecret)} }` : '';
      const config = [
        `server_name: ${name}`,
        `listen: ${host.address}:${ports[i]}`,
        // Written by the server whoever starts it with this config: `down` finds a node
        // restarted by hand too.
        `pid_file: ${JSON.stringify(pidFileOf(nodeDir))}`,
        `jetstream { store_dir: ${JSON.stringify(path.join(nodeDir, 'jetstream'))}, max_memory_store: 268435456, max_file_store: 8589934592 }`,
        ...(tls ? [tlsBlock(tls, false)] : []),
        ...(creds ? [accountsConfig(creds)] : []),
        ...(opts.nodes > 1
          ? [
              `cluster { name: crucible, listen: ${host.address}:${clusterPorts[i]}, routes: [${routes.join(', ')}]${clusterAuth}${tls ? `, ${tlsBlock(tls, true)}` : ''} }`,
            ]
          : []),
      ].join('\n');
      const configFile = path.join(nodeDir, 'nats.conf');
      // The config holds the route password: its owner only.
      writeFileSync(configFile, `${config}\n`, { mode: 0o600 });
      chmodSync(configFile, 0o600);
      const logFile = path.join(nodeDir, 'nats.log');
      const launcher = [...(host.launcher ?? [])];
      const pid = startServer(binary, configFile, logFile, launcher);
      nodes.push({ name, pid, host: host.address, port: ports[i]!, clusterPort: clusterPorts[i] ?? null, launcher, configFile, logFile });
    }
    const listening = async () => {
      writeFileSync(path.join(dir, STATE), `${JSON.stringify({ version, auth, tls: tls !== null, nodes }, null, 2)}\n`);
      const deadline = Date.now() + 15_000;
      for (const n of nodes) {
        while (!(await portOpen(n.port, n.host))) {
          if (!alive(n.pid)) throw new NatsServerError(`nats-server ${n.name} exited at start: ${tail(n.logFile)}`);
          if (Date.now() > deadline) throw new NatsServerError(`nats-server ${n.name} did not listen on ${n.host}:${n.port} within 15 s: ${tail(n.logFile)}`);
          await sleep(50);
        }
      }
      return deadline;
    };
    const ready = (deadline: number) =>
      waitForJetStream(
        nodes.map((n) => `nats://${n.host}:${n.port}`),
        deadline,
        creds?.get('admin'),
      );
    // Why a cluster did not form is in the servers' logs: say their last lines.
    const withLogs = (err: unknown) => new NatsServerError(`${(err as Error).message}; ${nodes.map((n) => `${n.name}: ${tail(n.logFile)}`).join('; ')}`);
    await listening();
    try {
      await ready(Date.now() + (opts.nodes === 1 ? 15_000 : 10_000));
    } catch (err) {
      if (opts.nodes === 1) throw withLogs(err);
      // Most clusters form in 2 s. About one in ten nats-server 2.10.27 clusters started three at
      // a time here never placed a stream (no suitable peers, for minutes, its meta leader
      // elected); the same servers started again on their own state did (60 of 60).
      for (const n of nodes) await stopNode(n);
      for (const n of nodes) n.pid = startServer(binary, n.configFile, n.logFile, n.launcher);
      await ready((await listening()) + 30_000).catch((again: unknown) => {
        throw withLogs(again);
      });
    }
  } catch (err) {
    for (const n of nodes) if (alive(n.pid)) process.kill(n.pid, 'SIGKILL');
    throw err;
  }
  return { version, auth, tls: tls !== null, nodes, dir, urls: nodes.map((n) => `nats://${n.host}:${n.port}`) };
}

/** Starts one server detached, through its launcher (which must exec it, keeping the pid). */
function startServer(binary: string, configFile: string, logFile: string, launcher: readonly string[]): number {
  const out = openSync(logFile, 'a');
  const [command, ...args] = [...launcher, binary, '-c', configFile];
  const child = spawn(command!, args, { detached: true, stdio: ['ignore', out, out] });
  closeSync(out);
  child.unref();
  if (child.pid === undefined) throw new NatsServerError(`could not start ${binary}`);
  return child.pid;
}

/** Waits until JetStream answers (a cluster first elects its meta leader, a few seconds) and, on
 * a cluster, until it places a stream on every server: the meta leader answers before it knows
 * all its peers, and a log's R3 stream made then is refused ("no suitable peers for placement"). */
async function waitForJetStream(urls: string[], deadline: number, admin: NatsCredentials | undefined): Promise<void> {
  const nc = await connect({ servers: urls, timeout: 5000, ...credentialOptions(admin) });
  const probe = `CRUCIBLE_READY_${randomBytes(6).toString('hex')}`;
  try {
    for (;;) {
      try {
        const jsm = await jetstreamManager(nc, { timeout: 1000 });
        if (urls.length > 1) {
          await jsm.streams.add({ name: probe, subjects: [`crucible.ready.${probe}`], storage: StorageType.Memory, num_replicas: urls.length });
          await jsm.streams.delete(probe);
        }
        return;
      } catch (err) {
        if (Date.now() > deadline) throw new NatsServerError(`JetStream did not become ready: ${(err as Error).message}`);
        await sleep(200);
      }
    }
  } finally {
    await nc.close();
  }
}

function tail(file: string): string {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').slice(-3).join(' | ');
  } catch {
    return '(no log)';
  }
}

export function readCluster(dir: string): NatsCluster {
  const file = path.join(path.resolve(dir), STATE);
  if (!existsSync(file)) throw new NatsServerError(`${dir}: no ${STATE}: no servers were started here with \`crucible nats up\``);
  const parsed = ClusterRecord.safeParse(JSON.parse(readFileSync(file, 'utf8')));
  if (!parsed.success) throw new NatsServerError(`${file} is not a record of started servers: ${parsed.error.issues[0]?.message}`);
  return { ...parsed.data, dir: path.resolve(dir), urls: parsed.data.nodes.map((n) => `nats://${n.host}:${n.port}`) };
}

/** Stops one server by its pid (SIGTERM, then SIGKILL after 5 s). */
export async function stopNode(node: NatsNode, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (!alive(node.pid)) return;
  process.kill(node.pid, signal);
  const deadline = Date.now() + 5000;
  while (alive(node.pid)) {
    if (Date.now() > deadline) process.kill(node.pid, 'SIGKILL');
    await sleep(25);
  }
}

/** Restarts a stopped server of the cluster with its own config (same ports, same store). */
export async function restartNode(dir: string, name: string, binary = natsServerBinary()): Promise<NatsNode> {
  const cluster = readCluster(dir);
  const node = cluster.nodes.find((n) => n.name === name);
  if (!node) throw new NatsServerError(`${dir} has no server named ${name}`);
  if (nodeRuns(cluster.dir, node)) return node;
  const updated = { ...node, pid: startServer(binary, node.configFile, node.logFile, node.launcher) };
  const nodes = cluster.nodes.map((n) => (n.name === name ? updated : n));
  writeFileSync(path.join(cluster.dir, STATE), `${JSON.stringify({ version: cluster.version, auth: cluster.auth, tls: cluster.tls, nodes }, null, 2)}\n`);
  const deadline = Date.now() + 15_000;
  while (!(await portOpen(node.port, node.host))) {
    if (!alive(updated.pid)) throw new NatsServerError(`nats-server ${name} exited at start: ${tail(node.logFile)}`);
    if (Date.now() > deadline)
      throw new NatsServerError(`nats-server ${name} (pid ${updated.pid}) did not open port ${node.port} within 15 s: ${tail(node.logFile)}`);
    await sleep(50);
  }
  return updated;
}

function pidFileOf(nodeDir: string): string {
  return path.join(nodeDir, 'nats.pid');
}

/** Whether the node's server runs: one of its pids is a live nats-server with its config (a
 * pid recorded may since be another process's, or a zombie's). */
export function nodeRuns(dir: string, node: NatsNode): boolean {
  return pidsOf(dir, node).some((pid) => alive(pid) && runsConfig(pid, node.configFile));
}

/** Whether `pid` is a nats-server started with `configFile` (a pid file may outlive its
 * process, and its pid be another process's since). */
function runsConfig(pid: number, configFile: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(configFile);
  } catch {
    return false;
  }
}

/** The pids of a node: the one `up` (or restartNode) recorded, and the one its server last
 * wrote to its pid file, which differs when the node was started again by hand. */
function pidsOf(dir: string, node: NatsNode): number[] {
  const pids = new Set([node.pid]);
  try {
    const written = Number(readFileSync(pidFileOf(path.join(dir, node.name)), 'utf8').trim());
    if (Number.isInteger(written) && written > 0 && runsConfig(written, node.configFile)) pids.add(written);
  } catch {
    // No pid file: a server started before nodes wrote one, or not started yet.
  }
  return [...pids];
}

/** Stops every server `natsUp` started in `dir` (a node started again by hand with its config
 * among them); with `wipe`, deletes their data too. */
export async function natsDown(dir: string, opts: { wipe?: boolean } = {}): Promise<number> {
  const cluster = readCluster(dir);
  writeFileSync(path.join(cluster.dir, STOPPING), `${process.pid}\n`);
  let stopped = 0;
  for (const n of cluster.nodes) {
    for (const pid of pidsOf(cluster.dir, n)) {
      if (!alive(pid)) continue;
      await stopNode({ ...n, pid });
      stopped++;
    }
  }
  rmSync(path.join(cluster.dir, STATE), { force: true });
  rmSync(path.join(cluster.dir, STOPPING), { force: true });
  if (opts.wipe) for (const n of cluster.nodes) rmSync(path.join(cluster.dir, n.name), { recursive: true, force: true });
  return stopped;
}
