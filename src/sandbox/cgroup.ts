import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** Where fork-servers' cgroups can be made: cgroup v1 `memory` (and `pids`) hierarchies the
 * process may write. (cgroup v2 is used by no code here yet: on machines that mount it with
 * its controllers, `cgroup` is reported false and RLIMIT_AS stays the only memory limit.) */
export interface CgroupRoots {
  memory: string;
  pids?: string;
}

export interface ServerCgroup {
  memory: string;
  pids?: string;
}

/** Tasks per fork-server tree: the largest thread limit a request may set (1024) plus the zygote,
 * its request servers and bubblewrap's own processes. */
export const PIDS_PER_SERVER = 1024 + 16;

function ownV1Dir(controller: string): string | undefined {
  const mount = `/sys/fs/cgroup/${controller}`;
  if (!existsSync(path.join(mount, 'cgroup.procs'))) return undefined;
  let rel = '/';
  try {
    for (const line of readFileSync('/proc/self/cgroup', 'utf8').split('\n')) {
      const [, ctrls, p] = line.split(':');
      if (ctrls?.split(',').includes(controller) && p) rel = p;
    }
  } catch {
    return undefined;
  }
  // Our own cgroup when it is visible here, else the hierarchy's root.
  const own = path.join(mount, rel);
  return existsSync(path.join(own, 'cgroup.procs')) ? own : mount;
}

function writable(dir: string): boolean {
  const probe = path.join(dir, `crucible-probe-${process.pid}`);
  try {
    mkdirSync(probe);
    rmdirSync(probe);
    return true;
  } catch {
    return false;
  }
}

let cached: CgroupRoots | null | undefined;

/** The cgroup hierarchies this process can make fork-server groups in, or undefined. */
export function cgroupRoots(): CgroupRoots | undefined {
  if (cached !== undefined) return cached ?? undefined;
  const memory = ownV1Dir('memory');
  const pids = ownV1Dir('pids');
  if (!memory || !writable(memory) || !existsSync(path.join(memory, 'memory.max_usage_in_bytes'))) {
    cached = null;
    return undefined;
  }
  cached = { memory, ...(pids && writable(pids) ? { pids } : {}) };
  removeStale(cached.memory);
  if (cached.pids) removeStale(cached.pids);
  return cached;
}

/** A fresh cgroup pair for one fork-server; undefined when it cannot be made. */
export function makeServerCgroup(roots: CgroupRoots, name: string): ServerCgroup | undefined {
  const memory = path.join(roots.memory, name);
  try {
    mkdirSync(memory, { recursive: false });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') return undefined;
  }
  let pids: string | undefined;
  if (roots.pids) {
    pids = path.join(roots.pids, name);
    try {
      if (!existsSync(pids)) mkdirSync(pids);
      writeFileSync(path.join(pids, 'pids.max'), String(PIDS_PER_SERVER));
    } catch {
      pids = undefined;
    }
  }
  return { memory, ...(pids ? { pids } : {}) };
}

/** Removes a server's cgroups once its processes are gone, retrying while they exit (an
 * empty cgroup can be removed only when its last task has been reaped). */
export async function removeServerCgroup(cg: ServerCgroup): Promise<void> {
  let left = [cg.memory, ...(cg.pids ? [cg.pids] : [])];
  for (let tries = 0; left.length > 0 && tries < 100; tries++) {
    left = left.filter((d) => {
      try {
        rmdirSync(d);
        return false;
      } catch (e) {
        return (e as NodeJS.ErrnoException).code === 'EBUSY';
      }
    });
    if (left.length > 0) await new Promise((r) => setTimeout(r, 20));
  }
}

/** Groups left by processes that died without closing their sandbox (crucible-PID-...). */
function removeStale(root: string): void {
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return;
  }
  for (const name of names) {
    const m = /^crucible-(\d+)-/.exec(name);
    if (!m || Number(m[1]) === process.pid) continue;
    try {
      process.kill(Number(m[1]), 0);
      continue; // its owner lives
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ESRCH') continue;
    }
    try {
      rmdirSync(path.join(root, name));
    } catch {
      // still has tasks, or raced with another cleaner: left for a later start
    }
  }
}

/** The shell prefix that moves the server into its cgroups before it execs: every process it
 * forks is then born inside them. */
export function cgroupWrapper(cg: ServerCgroup, cmd: string, args: string[]): { cmd: string; args: string[] } {
  const dirs = [cg.memory, ...(cg.pids ? [cg.pids] : [])];
  const script = dirs.map((_, i) => `echo $$ > "$${i + 1}/cgroup.procs" &&`).join(' ') + ` shift ${dirs.length} && exec "$@"`;
  return { cmd: '/bin/sh', args: ['-c', script, 'sh', ...dirs, cmd, ...args] };
}
