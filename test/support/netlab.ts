/**
 * Hosts on a real network inside one machine: one network namespace per host, each joined by a
 * veth link to a bridge in a "switch" namespace, every host on its own address of a private
 * /24. Processes started on a host talk to the others over that network, and a host's link can
 * be taken down and up again (a partition). Needs root and iproute2; `NetLab.available()` says
 * whether namespaces can be made here so that callers can fall back to loopback and say so.
 */
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';

function ip(args: string[]): { ok: boolean; err: string } {
  const r = spawnSync('ip', args, { encoding: 'utf8', timeout: 10_000 });
  return { ok: r.status === 0, err: (r.stderr ?? '').trim() };
}

function must(args: string[]): void {
  const r = ip(args);
  if (!r.ok) throw new Error(`ip ${args.join(' ')}: ${r.err}`);
}

/** A 10.77.x.0/24 no route of this namespace uses yet (another lab attached here, say). */
function freeSubnet(start: number): number {
  const routes = spawnSync('ip', ['route', 'show'], { encoding: 'utf8' }).stdout ?? '';
  for (let i = 0; i < 100; i++) {
    const n = 100 + ((start - 100 + i) % 100);
    if (!routes.includes(`10.77.${n}.`)) return n;
  }
  return start;
}

export interface Host {
  readonly name: string;
  /** Namespace name (ip netns). */
  readonly ns: string;
  readonly address: string;
}

export class NetLab {
  readonly #prefix: string;
  readonly #subnet: number;
  readonly #switch: string;
  readonly hosts = new Map<string, Host>();
  readonly #children = new Set<ChildProcess>();
  /** Links made in this process's namespace (removed by destroy() if still there). */
  readonly #rootLinks = new Set<string>();

  /** Whether this machine lets us make namespaces (root, iproute2, kernel support). */
  static available(): { ok: boolean; reason?: string } {
    // To run the loopback fallback of the many-machines tests on a machine that has namespaces.
    if (process.env.CRUCIBLE_NO_NETNS === '1') return { ok: false, reason: 'CRUCIBLE_NO_NETNS=1' };
    if (typeof process.getuid === 'function' && process.getuid() !== 0) return { ok: false, reason: 'not root' };
    const probe = `crprobe${process.pid % 100000}`;
    const r = ip(['netns', 'add', probe]);
    if (!r.ok) return { ok: false, reason: r.err || 'ip netns add failed' };
    ip(['netns', 'del', probe]);
    return { ok: true };
  }

  /** `tag` keeps concurrent labs apart (interface names are at most 15 characters). */
  constructor(tag: string) {
    this.#prefix = `cr${tag}`.slice(0, 8);
    this.#subnet = freeSubnet(100 + (process.pid % 100));
    this.#switch = `${this.#prefix}sw`;
    must(['netns', 'add', this.#switch]);
    try {
      must(['-n', this.#switch, 'link', 'add', 'br0', 'type', 'bridge']);
      must(['-n', this.#switch, 'link', 'set', 'br0', 'up']);
      must(['-n', this.#switch, 'link', 'set', 'lo', 'up']);
    } catch (err) {
      ip(['netns', 'del', this.#switch]);
      throw err;
    }
  }

  addHost(name: string): Host {
    const index = this.hosts.size + 1;
    const ns = `${this.#prefix}${name}`.slice(0, 14);
    const address = `10.77.${this.#subnet}.${index + 10}`;
    const hostEnd = `${this.#prefix}h${index}`.slice(0, 15);
    const switchEnd = `${this.#prefix}s${index}`.slice(0, 15);
    const host = { name, ns, address };
    // Known before it is complete, so that destroy() removes a half-made host too.
    this.hosts.set(name, host);
    must(['netns', 'add', ns]);
    this.#rootLinks.add(hostEnd);
    must(['link', 'add', hostEnd, 'type', 'veth', 'peer', 'name', switchEnd]);
    must(['link', 'set', hostEnd, 'netns', ns]);
    must(['link', 'set', switchEnd, 'netns', this.#switch]);
    must(['-n', this.#switch, 'link', 'set', switchEnd, 'master', 'br0']);
    must(['-n', this.#switch, 'link', 'set', switchEnd, 'up']);
    must(['-n', ns, 'addr', 'add', `${address}/24`, 'dev', hostEnd]);
    must(['-n', ns, 'link', 'set', hostEnd, 'up']);
    must(['-n', ns, 'link', 'set', 'lo', 'up']);
    return host;
  }

  /**
   * Joins this process's own network namespace to the switch on address .1, so the process that
   * runs the test can reach the hosts (start their servers, watch them) as one more machine.
   */
  attachHere(): string {
    const here = `${this.#prefix}gw`;
    const peer = `${this.#prefix}gp`;
    this.#rootLinks.add(here);
    must(['link', 'add', here, 'type', 'veth', 'peer', 'name', peer]);
    must(['link', 'set', peer, 'netns', this.#switch]);
    must(['-n', this.#switch, 'link', 'set', peer, 'master', 'br0']);
    must(['-n', this.#switch, 'link', 'set', peer, 'up']);
    const address = `10.77.${this.#subnet}.1`;
    must(['addr', 'add', `${address}/24`, 'dev', here]);
    must(['link', 'set', here, 'up']);
    return address;
  }

  /** The words that start a command on a host: `ip netns exec <ns>` (it execs, keeping the pid). */
  launcher(host: string): string[] {
    return ['ip', 'netns', 'exec', this.host(host).ns];
  }

  host(name: string): Host {
    const h = this.hosts.get(name);
    if (!h) throw new Error(`no host ${name} in this lab`);
    return h;
  }

  /** Starts a process on a host (its network is the host's; files are shared). */
  spawn(host: string, command: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess {
    const child = spawn('ip', ['netns', 'exec', this.host(host).ns, command, ...args], options);
    this.#children.add(child);
    child.once('exit', () => this.#children.delete(child));
    return child;
  }

  /** Whether `host` can open a TCP connection to addr:port right now (within 1.5 s). */
  canReach(host: string, addr: string, port: number): boolean {
    const script = `const s=require('net').connect(${port},'${addr}');s.setTimeout(1500,()=>process.exit(1));s.on('connect',()=>process.exit(0));s.on('error',()=>process.exit(1));`;
    return spawnSync('ip', ['netns', 'exec', this.host(host).ns, process.execPath, '-e', script], { timeout: 10_000 }).status === 0;
  }

  /** Cuts a host off the switch (its link down) or joins it again. */
  setLink(host: string, up: boolean): void {
    const index = [...this.hosts.keys()].indexOf(host) + 1;
    must(['-n', this.#switch, 'link', 'set', `${this.#prefix}s${index}`.slice(0, 15), up ? 'up' : 'down']);
  }

  /** Kills what it started and removes every namespace (their links go with them). */
  destroy(): void {
    for (const c of this.#children) c.kill('SIGKILL');
    for (const h of this.hosts.values()) {
      spawnSync('ip', ['netns', 'pids', h.ns], { encoding: 'utf8' })
        .stdout?.split('\n')
        .filter(Boolean)
        .forEach((pid) => {
          try {
            process.kill(Number(pid), 'SIGKILL');
          } catch {
            // already gone
          }
        });
      ip(['netns', 'del', h.ns]);
    }
    ip(['netns', 'del', this.#switch]);
    // Deleting a namespace takes its veth ends and so the pairs; this is for half-made ones.
    for (const link of this.#rootLinks) {
      if (ip(['link', 'show', link]).ok) ip(['link', 'del', link]);
    }
    this.#rootLinks.clear();
    this.hosts.clear();
  }
}
