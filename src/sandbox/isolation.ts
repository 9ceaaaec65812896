import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, readlinkSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cgroupRoots } from './cgroup.js';

export type IsolationChoice = 'auto' | 'bwrap' | 'none';

/** Where the fork-server's directory (its entry script and package) is mounted inside the
 * bubblewrap mount namespace. */
export const SERVER_DIR_IN_SANDBOX = '/crucible';
export const SERVER_IN_SANDBOX = `${SERVER_DIR_IN_SANDBOX}/forkserver.py`;

export function findBwrap(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':').concat(['/usr/bin', '/bin'])) {
    const p = path.join(dir, 'bwrap');
    if (dir && existsSync(p)) return p;
  }
  return undefined;
}

/** The mounts: only the system directories python needs, read-only, and a private /tmp. The
 * judge's files (repository, datasets, expected outputs) are simply not in the namespace. */
export function bwrapArgs(pythonPath: string, serverPath: string, extra: string[] = []): string[] {
  const args = [
    '--unshare-net',
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    '--die-with-parent',
    '--new-session',
    // Root inside keeps only what it needs to create run dirs and drop to the slot's uid.
    '--cap-drop',
    'ALL',
    ...['CAP_SETUID', 'CAP_SETGID', 'CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FOWNER', 'CAP_KILL'].flatMap((c) => ['--cap-add', c]),
    '--ro-bind',
    '/usr',
    '/usr',
  ];
  for (const top of ['/bin', '/sbin', '/lib', '/lib64', '/lib32', '/libx32']) {
    if (!existsSync(top)) continue;
    const st = lstatSync(top);
    if (st.isSymbolicLink()) args.push('--symlink', readlinkSync(top), top);
    else args.push('--ro-bind', top, top);
  }
  // Parents bwrap creates implicitly are 0700: the candidate's uid must be able to traverse /etc
  // to reach Debian's /etc/alternatives symlinks (libblas for numpy).
  args.push('--perms', '0755', '--dir', '/etc');
  for (const f of ['/etc/ld.so.cache', '/etc/localtime', '/etc/alternatives']) args.push('--ro-bind-try', f, f);
  // An interpreter outside /usr (pyenv, conda) needs its own prefix visible.
  const real = realpathSync(pythonPath);
  if (!real.startsWith('/usr/')) {
    const prefix = path.dirname(path.dirname(real));
    args.push('--ro-bind', prefix, prefix);
  }
  args.push(
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    '--size',
    String(256 << 20),
    '--tmpfs',
    '/tmp',
    '--ro-bind',
    path.dirname(serverPath),
    SERVER_DIR_IN_SANDBOX,
    ...extra,
    '--chdir',
    '/tmp',
  );
  return args;
}

/** Whether bubblewrap can actually start here (it can be installed yet refused by the kernel). */
export function bwrapWorks(bwrap: string, pythonPath: string, serverPath: string): { ok: boolean; reason?: string } {
  try {
    execFileSync(bwrap, [...bwrapArgs(pythonPath, serverPath), pythonPath, '-I', '-S', '-c', 'pass'], {
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: 10_000,
    });
    return { ok: true };
  } catch (err) {
    const e = err as { stderr?: Buffer; message: string };
    return { ok: false, reason: (e.stderr?.toString() || e.message).trim().split('\n')[0] };
  }
}

/** One isolation layer: whether it works on this machine, and why not when it does not. */
export interface LayerStatus {
  ok: boolean;
  reason?: string;
}

/** What `isolationReport()` finds. Every layer is probed for real (a child process tries it);
 * `isolated` is what verdicts report as `isolated`, `cgroup` what they report as `cgroup`. */
export interface IsolationReport {
  /** bubblewrap can start the fork-server's namespaces (mount, pid, net, ipc, uts). */
  bwrap: LayerStatus;
  /** A seccomp filter can be installed (x86_64 only; refuses fork, exec, io_uring, keyctl...). */
  seccomp: LayerStatus;
  /** A network namespace can be made without bubblewrap (root only). */
  netns: LayerStatus;
  /** An IPC namespace can be made without bubblewrap (root only). */
  ipcns: LayerStatus;
  /** Candidates can run under a uid of their own (the server runs as root). */
  uidDrop: LayerStatus;
  /** A writable cgroup v1 memory hierarchy for per-server memory limits and peaks. */
  cgroup: LayerStatus;
  /** Whether verdicts would say `isolated: true` (bubblewrap works). */
  isolated: boolean;
}

const PROBE = `
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def in_child(fn):
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if fn() else 1)
        except BaseException:
            os._exit(2)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
def seccomp():
    if os.uname().machine != 'x86_64' or libc.prctl(38, 1, 0, 0, 0) != 0:
        return False
    class F(ctypes.Structure):
        _fields_ = [('code', ctypes.c_ushort), ('jt', ctypes.c_ubyte), ('jf', ctypes.c_ubyte), ('k', ctypes.c_uint)]
    class P(ctypes.Structure):
        _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.POINTER(F))]
    arr = (F * 1)(F(6, 0, 0, 0x7FFF0000))
    prog = P(1, arr)
    return libc.prctl(22, 2, ctypes.byref(prog), 0, 0) == 0
print(json.dumps({'seccomp': in_child(seccomp), 'netns': in_child(lambda: libc.unshare(0x40000000) == 0),
                  'ipcns': in_child(lambda: libc.unshare(0x08000000) == 0), 'root': os.geteuid() == 0}))
`;

/** Which isolation layers work here, probed for real. For `crucible doctor` and for callers
 * that must decide whether to train (see `requireIsolation` in createSandbox). */
export function isolationReport(options: { pythonPath?: string; serverPath?: string } = {}): IsolationReport {
  const pythonPath = options.pythonPath ?? '/usr/bin/python3';
  const serverPath = options.serverPath ?? fileURLToPath(new URL('./python/forkserver.py', import.meta.url));
  const found = findBwrap();
  const bwrap: LayerStatus = found ? bwrapWorks(found, pythonPath, serverPath) : { ok: false, reason: 'bwrap is not installed' };
  let probe: { seccomp: boolean; netns: boolean; ipcns: boolean; root: boolean } | undefined;
  let probeError = '';
  try {
    probe = JSON.parse(execFileSync(pythonPath, ['-I', '-S', '-c', PROBE], { timeout: 10_000, stdio: ['ignore', 'pipe', 'pipe'] }).toString());
  } catch (e) {
    probeError = (e as Error).message.split('\n')[0] ?? 'probe failed';
  }
  const layer = (ok: boolean | undefined, why: string): LayerStatus => (ok ? { ok: true } : { ok: false, reason: probe ? why : probeError });
  const roots = cgroupRoots();
  return {
    bwrap,
    seccomp: layer(probe?.seccomp, 'seccomp filters cannot be installed here (or this is not x86_64)'),
    netns: layer(probe?.netns, 'a network namespace cannot be made (not root, or refused)'),
    ipcns: layer(probe?.ipcns, 'an IPC namespace cannot be made (not root, or refused)'),
    uidDrop: layer(probe?.root, 'not running as root: candidates share the server uid'),
    cgroup: roots ? { ok: true } : { ok: false, reason: 'no writable cgroup v1 memory hierarchy' },
    isolated: bwrap.ok,
  };
}
