import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, readlinkSync, realpathSync } from 'node:fs';
import path from 'node:path';

export type IsolationChoice = 'auto' | 'bwrap' | 'none';

/** Where the fork-server script lives inside the bubblewrap mount namespace. */
export const SERVER_IN_SANDBOX = '/crucible/forkserver.py';

export function findBwrap(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':').concat(['/usr/bin', '/bin'])) {
    const p = path.join(dir, 'bwrap');
    if (dir && existsSync(p)) return p;
  }
  return undefined;
}

/** The mounts: only the system directories python needs, read-only, and a private /tmp. The
 * judge's files (repository, datasets, expected outputs) are simply not in the namespace. */
export function bwrapArgs(pythonPath: string, serverPath: string): string[] {
  const args = [
    '--unshare-net', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try',
    '--die-with-parent', '--new-session',
    // Root inside keeps only what it needs to create run dirs and drop to the slot's uid.
    '--cap-drop', 'ALL',
    ...['CAP_SETUID', 'CAP_SETGID', 'CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FOWNER', 'CAP_KILL'].flatMap((c) => ['--cap-add', c]),
    '--ro-bind', '/usr', '/usr',
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
    '--proc', '/proc', '--dev', '/dev',
    '--size', String(256 << 20), '--tmpfs', '/tmp',
    '--ro-bind', serverPath, SERVER_IN_SANDBOX,
    '--chdir', '/tmp',
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
