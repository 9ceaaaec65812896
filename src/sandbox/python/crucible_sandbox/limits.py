"""Limits and isolation of the processes that run untrusted code: the seccomp filter, the
namespaces made without bubblewrap, the memory cgroup, per-child run directories, and the
setup a child does before any program code runs (limits, a dropped uid, the filter)."""
import ctypes
import gc
import math
import os
import resource
import sys

IS_ROOT = os.geteuid() == 0
BWRAPPED = os.environ.get('CRUCIBLE_BWRAP') == '1'
SLOT = int(os.environ.get('CRUCIBLE_SLOT', '0'))
UID_BASE = int(os.environ.get('CRUCIBLE_UID_BASE', '61000'))
# Two uids per slot: candidates run as one, oracles and checkers as the other, so neither can
# signal, trace or read the other's files.
CANDIDATE_UID = UID_BASE + 2 * SLOT
ORACLE_UID = CANDIDATE_UID + 1
WORK = os.environ.get('CRUCIBLE_WORKDIR', '/tmp')
PAGE = os.sysconf('SC_PAGE_SIZE')
# The candidate's whole environment. One BLAS/OpenMP thread: their pools would exceed the
# thread limit and the memory budget.
CHILD_ENV = {'HOME': os.path.join(WORK, 'crucible-run-%d-c' % SLOT), 'TMPDIR': os.path.join(WORK, 'crucible-run-%d-c' % SLOT), 'PATH': '/usr/bin:/bin', 'LANG': 'C.UTF-8',
             'OPENBLAS_NUM_THREADS': '1', 'OMP_NUM_THREADS': '1', 'MKL_NUM_THREADS': '1'}


def rundir(role):
    """One run directory per slot and role, made before each child and emptied after it."""
    return os.path.join(WORK, 'crucible-run-%d-%s' % (SLOT, role))


CANDIDATE_DIR, ORACLE_DIR = rundir('c'), rundir('o')


# ---------------------------------------------------------------- seccomp (x86_64 only)
AUDIT_ARCH_X86_64 = 0xC000003E
RET_ALLOW = 0x7FFF0000
RET_KILL = 0x80000000
def RET_ERRNO(e): return 0x00050000 | e
EPERM, ENOSYS = 1, 38
# A wide denylist rather than an allowlist: CPython, numpy and the standard library use a large,
# version-dependent set of calls, and a missing one would fail correct programs. Denied: new
# processes and programs, every namespace and mount call, kernel keys, SysV and POSIX message
# IPC, io_uring (it opens sockets behind this filter), userfaultfd, tracing and cross-process
# memory access, BPF, perf, modules, clocks, reboot and the like. ENOSYS where a library may
# fall back (io_uring, clone3), EPERM elsewhere.
DENY = {
    'fork': 57, 'vfork': 58, 'execve': 59, 'execveat': 322, 'ptrace': 101,
    'shmget': 29, 'shmat': 30, 'shmctl': 31, 'shmdt': 67, 'semget': 64, 'semop': 65, 'semctl': 66,
    'semtimedop': 220, 'msgget': 68, 'msgsnd': 69, 'msgrcv': 70, 'msgctl': 71,
    'mq_open': 240, 'mq_unlink': 241, 'mq_timedsend': 242, 'mq_timedreceive': 243, 'mq_notify': 244,
    'mq_getsetattr': 245, 'add_key': 248, 'request_key': 249, 'keyctl': 250,
    'unshare': 272, 'setns': 308, 'mount': 165, 'umount2': 166, 'pivot_root': 155, 'chroot': 161,
    'open_tree': 428, 'move_mount': 429, 'fsopen': 430, 'fsconfig': 431, 'fsmount': 432, 'fspick': 433,
    'mount_setattr': 442, 'userfaultfd': 323, 'process_vm_readv': 310, 'process_vm_writev': 311,
    'kcmp': 312, 'pidfd_getfd': 438, 'process_madvise': 440, 'bpf': 321, 'perf_event_open': 298,
    'init_module': 175, 'finit_module': 313, 'delete_module': 176, 'kexec_load': 246,
    'kexec_file_load': 320, 'reboot': 169, 'swapon': 167, 'swapoff': 168, 'acct': 163,
    'quotactl': 179, 'sethostname': 170, 'setdomainname': 171, 'settimeofday': 164,
    'clock_settime': 227, 'clock_adjtime': 305, 'adjtimex': 159, 'syslog': 103, 'vhangup': 153,
    'iopl': 172, 'ioperm': 173, 'modify_ldt': 154, 'name_to_handle_at': 303,
    'open_by_handle_at': 304, 'lookup_dcookie': 212, 'fanotify_init': 300, 'move_pages': 279,
    'migrate_pages': 256, 'personality': 135, 'uselib': 134, 'memfd_secret': 447,
    'landlock_create_ruleset': 444,
}
ENOSYS_DENY = {'io_uring_setup': 425, 'io_uring_enter': 426, 'io_uring_register': 427, 'clone3': 435}
NR_CLONE, NR_SOCKET, NR_SOCKETPAIR, AF_UNIX, CLONE_THREAD = 56, 41, 53, 1, 0x00010000


class SockFilter(ctypes.Structure):
    _fields_ = [('code', ctypes.c_ushort), ('jt', ctypes.c_ubyte), ('jf', ctypes.c_ubyte), ('k', ctypes.c_uint)]


class SockFprog(ctypes.Structure):
    _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.POINTER(SockFilter))]


def _build_filter():
    LD, JEQ, JSET, JGE, RET = 0x20, 0x15, 0x45, 0x35, 0x06
    ins = [(LD, 0, 0, 4), (JEQ, 1, 0, AUDIT_ARCH_X86_64), (RET, 0, 0, RET_KILL), (LD, 0, 0, 0),
           (JGE, 0, 1, 0x40000000), (RET, 0, 0, RET_ERRNO(ENOSYS))]  # no x32 ABI
    for nr in sorted(DENY.values()):
        ins += [(JEQ, 0, 1, nr), (RET, 0, 0, RET_ERRNO(EPERM))]
    for nr in sorted(ENOSYS_DENY.values()):
        ins += [(JEQ, 0, 1, nr), (RET, 0, 0, RET_ERRNO(ENOSYS))]
    # Threads only: clone without CLONE_THREAD (a process, or new namespaces) is refused.
    ins += [(JEQ, 0, 4, NR_CLONE), (LD, 0, 0, 16), (JSET, 0, 1, CLONE_THREAD),
            (RET, 0, 0, RET_ALLOW), (RET, 0, 0, RET_ERRNO(EPERM))]
    # Only AF_UNIX sockets: no network even where no network namespace exists.
    for nr in (NR_SOCKET, NR_SOCKETPAIR):
        ins += [(JEQ, 0, 4, nr), (LD, 0, 0, 16), (JEQ, 0, 1, AF_UNIX),
                (RET, 0, 0, RET_ALLOW), (RET, 0, 0, RET_ERRNO(EPERM))]
    ins += [(RET, 0, 0, RET_ALLOW)]
    arr = (SockFilter * len(ins))(*[SockFilter(*i) for i in ins])
    return arr, SockFprog(len(ins), arr)


SECCOMP = None
_libc = ctypes.CDLL(None, use_errno=True)
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
# The child's calls go through a handle without argtypes or errno capture: a ctypes call with
# them touches ~25 more pages (each a copy-on-write fault), without them ~5.
_prctl = ctypes.CDLL(None).prctl
try:
    if os.uname().machine == 'x86_64' and os.environ.get('CRUCIBLE_NO_SECCOMP') != '1':
        SECCOMP = _build_filter()
except Exception:  # pragma: no cover - reported through ping
    SECCOMP = None
# The filter's address as a ready ctypes argument (a bare int would be passed as a C int).
SECCOMP_ARG = ctypes.c_void_p(ctypes.addressof(SECCOMP[1])) if SECCOMP is not None else None
# no_new_privs is inherited by every child; set here once (it changes nothing for this process,
# which never execs). Seccomp needs it in the child; the child sets it itself if this failed.
NNP_SET = SECCOMP is not None and _libc.prctl(38, 1, None, 0, 0) == 0


def install_seccomp():
    if SECCOMP_ARG is None:
        return
    if not NNP_SET and _libc.prctl(38, 1, None, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), 'no_new_privs')
    if _prctl(22, 2, SECCOMP_ARG) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        raise OSError('seccomp filter could not be installed')


# ---------------------------------------------------------------- namespaces without bubblewrap
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWNET = 0x00020000, 0x04000000, 0x08000000, 0x40000000
MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV = 0x4000, 1 << 18, 2, 4
LAYERS = {'netns': BWRAPPED, 'ipcns': BWRAPPED, 'mntns': BWRAPPED}


def host_isolation():
    """Without bubblewrap, a root server still gets its own network, IPC, UTS and mount
    namespaces, and private sized tmpfs on /tmp and /dev/shm (the host's stay untouched).
    Each layer that cannot be made is reported false through ping."""
    if BWRAPPED or not IS_ROOT:
        return
    unshare = _libc.unshare
    for name, flag in (('netns', CLONE_NEWNET), ('ipcns', CLONE_NEWIPC)):
        LAYERS[name] = unshare(flag) == 0
    unshare(CLONE_NEWUTS)
    if unshare(CLONE_NEWNS) != 0:
        return
    mount = _libc.mount
    mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    if mount(None, b'/', None, MS_REC | MS_PRIVATE, None) != 0:
        return
    # Root-owned and not world-writable (as under bubblewrap): a program writes only in its own
    # run directory, which is emptied after every test, so nothing passes to a later program and
    # nothing is left on the host. Every world-writable directory near the root is covered.
    ok = mount(b'tmpfs', b'/tmp', b'tmpfs', MS_NOSUID | MS_NODEV, b'size=256m,mode=755') == 0
    for d in world_writable_dirs():
        ok = mount(b'tmpfs', d.encode(), b'tmpfs', MS_NOSUID | MS_NODEV, b'size=1m,mode=755') == 0 and ok
    LAYERS['mntns'] = ok


def world_writable_dirs(max_depth=3):
    """World-writable directories (sticky or not) up to max_depth below /, outside /proc,
    /sys and /usr, not below one another."""
    out, stack = [], [('/', 0)]
    while stack:
        d, depth = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            try:
                if e.path in ('/proc', '/sys', '/usr', '/tmp') or not e.is_dir(follow_symlinks=False):
                    continue
                if e.stat(follow_symlinks=False).st_mode & 0o002:
                    out.append(e.path)
                elif depth + 1 < max_depth:
                    stack.append((e.path, depth + 1))
            except OSError:
                continue
    return out


# ---------------------------------------------------------------- cgroup (v1 memory and pids)
class CGroup:
    """The server's own memory cgroup (Node puts the server in it before it starts): its limit
    is set per test to what the tree uses now plus the test's budget, and its peak is reset
    before each test, so shared memory, memfds and tmpfs files count against the limit too."""

    def __init__(self, path):
        self.ok = False
        if not path:
            return
        try:
            self.limit = os.open(os.path.join(path, 'memory.limit_in_bytes'), os.O_WRONLY | os.O_CLOEXEC)
            self.usage = os.open(os.path.join(path, 'memory.usage_in_bytes'), os.O_RDONLY | os.O_CLOEXEC)
            self.peak = os.open(os.path.join(path, 'memory.max_usage_in_bytes'), os.O_RDWR | os.O_CLOEXEC)
            self.oom = os.open(os.path.join(path, 'memory.oom_control'), os.O_RDONLY | os.O_CLOEXEC)
            self.ok = True
        except OSError:
            self.ok = False

    def _read_int(self, fd):
        return int(os.pread(fd, 64, 0).split()[0])

    def oom_kills(self):
        for line in os.pread(self.oom, 4096, 0).split(b'\n'):
            if line.startswith(b'oom_kill '):
                return int(line.split()[1])
        return 0

    def before(self, mem_mb):
        """-> (base usage, oom kills so far) or None."""
        if not self.ok:
            return None
        try:
            os.pwrite(self.peak, b"0", 0)
            base = self._read_int(self.usage)
            # Slack for the child's own copy-on-write pages of the warm interpreter.
            os.pwrite(self.limit, str(base + int(mem_mb * (1 << 20)) + (32 << 20)).encode(), 0)
            return base, self.oom_kills()
        except OSError:
            return None

    def after(self, token):
        """-> (peak bytes above the base, whether the OOM killer ran)."""
        if token is None:
            return None, False
        try:
            return max(0, self._read_int(self.peak) - token[0]), self.oom_kills() > token[1]
        except OSError:
            return None, False
        finally:
            try:
                os.pwrite(self.limit, b'-1', 0)  # servers between tests are not held to a test's budget
            except OSError:
                pass


CG = CGroup(os.environ.get('CRUCIBLE_CG_MEMORY'))

# ---------------------------------------------------------------- run directories
RUN_SEQ = [0]
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_DEPTH = 64  # directory fds held at once while removing a tree


def make_rundir(path, uid):
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        remove_rundir(path)
        os.mkdir(path, 0o700)  # still there: this test is a sandbox_error, never a shared dir
    if IS_ROOT:
        os.chown(path, uid, uid)


def _remove_entry(fd, name):
    """Removes a non-directory or an empty directory; False when it is a non-empty directory."""
    try:
        os.unlink(name, dir_fd=fd)
        return True
    except FileNotFoundError:
        return True
    except (IsADirectoryError, PermissionError, OSError):
        pass
    try:
        os.rmdir(name, dir_fd=fd)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _open_dir(fd, name):
    try:
        return os.open(name, DIR_FLAGS, dir_fd=fd)
    except PermissionError:
        if IS_ROOT:
            raise
    # Not root: a directory the program made unreadable is opened by path fd (never following
    # a link) and made readable through it.
    pfd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    try:
        os.chmod('/proc/self/fd/%d' % pfd, 0o700)
    finally:
        os.close(pfd)
    return os.open(name, DIR_FLAGS, dir_fd=fd)


def remove_tree_contents(top):
    """Empties the directory open as `top`, without recursion and with at most MAX_DEPTH open
    directories: a subdirectory deeper than that is moved up into `top` and handled on a later
    pass, so a tree of any depth is removed in linear time and no limit of this process is hit."""
    while True:
        names = os.listdir(top)
        if not names:
            return
        progress = False
        stack = [(top, iter(names), None)]
        while stack:
            fd, it, own = stack[-1]
            name = next(it, None)
            if name is None:
                stack.pop()
                if fd != top:
                    os.close(fd)
                    progress = _remove_entry(stack[-1][0], own) or progress
                continue
            if _remove_entry(fd, name):
                progress = True
                continue
            if len(stack) >= MAX_DEPTH:
                RUN_SEQ[0] += 1
                try:
                    os.rename(name, '.deep-%d' % RUN_SEQ[0], src_dir_fd=fd, dst_dir_fd=top)
                    progress = True
                except OSError:
                    pass
                continue
            try:
                sub = _open_dir(fd, name)
                stack.append((sub, iter(os.listdir(sub)), name))
            except OSError:
                continue
        if not progress:
            return


def remove_rundir(RUNDIR):
    """Never raises: what cannot be removed is moved aside, so the next test starts empty."""
    try:
        os.rmdir(RUNDIR)  # the common case: the program left nothing behind
        return
    except FileNotFoundError:
        return
    except OSError:
        pass
    try:
        top = os.open(RUNDIR, DIR_FLAGS)
        try:
            remove_tree_contents(top)
        finally:
            os.close(top)
        os.rmdir(RUNDIR)
        return
    except FileNotFoundError:
        return
    except OSError:
        pass
    try:
        if os.path.isdir(RUNDIR) and not os.path.islink(RUNDIR):
            RUN_SEQ[0] += 1
            os.rename(RUNDIR, '%s.stale-%d-%d' % (RUNDIR, os.getpid(), RUN_SEQ[0]))
        else:
            os.unlink(RUNDIR)
    except OSError:
        pass




# ---------------------------------------------------------------- the child's own setup
_OOM_ADJ = b'1000'
_STATM = '/proc/self/statm'


def rlimit_values(limits):
    """(cpu, fsize, nproc, address-space budget) for a test's limits."""
    cpu = max(1, int(math.ceil(limits['cpu_s'])))
    out = int(limits['out_bytes']) + 1
    return (cpu, cpu + 1), (out, out), (limits['nproc'], limits['nproc']), int(limits['mem_mb'] * (1 << 20))


def child_setup(rl, uid, path, candidate):
    """In a forked child, before any untrusted code: session, death signal, cwd, limits, uid,
    filter. NPROC is set before the uid changes. The address-space limit is the budget on top
    of what this (warm) process already maps."""
    gc.freeze()  # inherited objects join the permanent generation: collections never copy them
    setrlimit = resource.setrlimit
    os.setsid()
    _prctl(1, 9)  # PR_SET_PDEATHSIG SIGKILL: die with the launcher
    if candidate and CG_PRESENT:
        # The cgroup's OOM killer must pick the candidate, never the servers or the oracle.
        fd = os.open('/proc/self/oom_score_adj', os.O_WRONLY)
        os.write(fd, _OOM_ADJ)
        os.close(fd)
    os.chdir(path)
    vm = VM[0]
    setrlimit(resource.RLIMIT_CPU, rl[0])
    setrlimit(resource.RLIMIT_FSIZE, rl[1])
    setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    setrlimit(resource.RLIMIT_NPROC, rl[2])
    setrlimit(resource.RLIMIT_AS, (vm + rl[3], vm + rl[3]))
    if IS_ROOT:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    if not candidate:
        _prctl(4, 0)  # PR_SET_DUMPABLE 0: no other process of the uid reads this one's memory
    install_seccomp()


CG_PRESENT = bool(os.environ.get('CRUCIBLE_CG_MEMORY'))
VM = [0]


def measure_vm():
    """The launcher's address-space size, once: a child starts with the same (the launcher's
    heap barely grows), and reading it per child would cost the child page faults."""
    with open(_STATM, 'rb') as f:
        VM[0] = int(f.read().split()[0]) * PAGE


def reap_uid(uid):
    """Without seccomp a program could leave processes behind: kill everything of its uid."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setuid(uid)
            os.kill(-1, 9)
        except BaseException:  # noqa: BLE001
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def server_setup():
    """What every child would otherwise do itself, done once in the server before any fork:
    signal dispositions (the default's, SIGPIPE ignored), no core files, room for cleanup's
    directory fds, namespaces without bubblewrap, the children's environment and recursion
    limit."""
    import signal
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGXFSZ, signal.SIGXCPU):
        signal.signal(s, signal.SIG_DFL)
    # SIGPIPE ignored, as `python3` itself does: a write to a closed pipe or channel is a
    # BrokenPipeError, not a death. A candidate writing to a channel the oracle has closed
    # (its record already made) would otherwise die of SIGPIPE or not by timing alone, and
    # the verdict would follow the race instead of the test.
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 4096 and (hard == resource.RLIM_INFINITY or hard >= 4096):
        resource.setrlimit(resource.RLIMIT_NOFILE, (4096, hard))
    host_isolation()
    os.environ.clear()
    os.environ.update(CHILD_ENV)
    sys.setrecursionlimit(10000)
    sys.argv = ['main.py']
    os.makedirs(WORK, exist_ok=True)
    for role in ('c', 'o'):
        remove_rundir(rundir(role))


# ---------------------------------------------------------------- fork without at-fork hooks
_pylibc = ctypes.PyDLL(None, use_errno=True)  # PyDLL: the GIL stays held across fork, as os.fork holds it
_libc_fork = _pylibc.fork
_libc_fork.restype = ctypes.c_int
_libc_fork.argtypes = []


def fork():
    """libc's fork, for the launcher: single-threaded, no Python signal handlers, import lock
    free. os.fork would also run every os.register_at_fork hook in each child as Python code
    (threading's and random's, imported by a site .pth file on some machines): measured ~0.4 ms
    of a trivial child's ~8.5 ms. Nothing they fix exists here, and each child reseeds random
    itself (harness.main). glibc's own at-fork handlers still run."""
    pid = _libc_fork()
    if pid < 0:
        raise OSError(ctypes.get_errno(), 'fork failed')
    return pid
