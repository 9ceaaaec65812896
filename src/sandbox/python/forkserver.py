"""crucible fork-server: runs untrusted Python programs on tests, one forked child per test.

Process tree: a *zygote* (this script's main loop) that never reads a request, an output or a
result; it keeps SPARE *request servers* forked ahead, and the one holding the baton reads
exactly one request from fd 0, forks one child per test, answers, passes the baton, and exits. A child therefore inherits the memory of its own
request only: no earlier program, input, output or oracle value is in any address space it can
read (the zygote never held one).

Protocol: requests on fd 0 and replies on fd 1 are frames: the byte length as 9 decimal digits
and a newline, then JSON. Requests may be queued (pipelined): they are answered in order.
  {"op": "run", "program": SRC, "entry": NAME|null, "prelude": bool, "limits": {...},
   "items": [{"mode": "stdio"|"call", "payload": {...}, "want_output": bool}...]}
      -> one frame per test as it finishes: {"k": INDEX, "result": {...}} | {"k": INDEX, "error": MSG}
         then {"ok": true, "n": COUNT} | {"ok": false, "compile_error": {"type", "message"}}
  {"op": "plan", "codes": [SRC...], "entry": NAME}   (oracle: calls of assert tests, prefetchable)
  {"op": "judge", "items": [{"code", "entry", "memo"}...], "limits"}   (oracle: assert bodies)
  {"op": "check", "checker": SRC, "input", "output", "expected", "limits"}
  {"op": "ping"}
Expected values of candidate tests never reach a candidate's request server: comparison
happens in Node, and assert bodies run in the oracle against serialized results.

Speed: every page a child writes is a copy-on-write fault (~4 us here), so whatever can be done
once is done in the zygote before any fork (dispositions, environment, no_new_privs, limits
values), the child runs as little Python as possible, and no module with an at-fork hook
(threading, random's reseed) is left registered.
"""
import ast
import base64
import builtins
import gc
import ctypes
import io
import json
import math
import os
import resource
import select
import signal
import sys
import time
import _thread
# Deep recursion (lru_cache chains) needs a big C stack; the main-thread stack can only grow to
# the limit in force at exec time, so re-exec once with a large one.
BIG_STACK = 1 << 30
if resource.getrlimit(resource.RLIMIT_STACK)[0] != resource.RLIM_INFINITY and \
        resource.getrlimit(resource.RLIMIT_STACK)[0] < BIG_STACK and os.environ.get('CRUCIBLE_REEXEC') != '1':
    hard = resource.getrlimit(resource.RLIMIT_STACK)[1]
    if hard == resource.RLIM_INFINITY or hard >= BIG_STACK:
        resource.setrlimit(resource.RLIMIT_STACK, (BIG_STACK, hard))
        os.environ['CRUCIBLE_REEXEC'] = '1'
        os.execv(sys.executable, [sys.executable] + sys.orig_argv[1:] if hasattr(sys, 'orig_argv') else [sys.executable] + sys.argv)

# Threads would otherwise reserve the (huge) main stack size each, defeating RLIMIT_AS. Set
# through _thread: importing `threading` here would run its at-fork hook in every child (~0.6 ms).
_thread.stack_size(16 << 20)

# Modules that programs commonly import: loaded once here so children start warm.
import bisect, collections, copy, decimal, fractions, functools, heapq, itertools, re, \
    string, typing, operator  # noqa: E401,F401
# random registers an at-fork hook (a Python-level reseed) when imported; it is imported without
# it and the child reseeds through the C method instead: same fresh seed, fewer pages touched.
_register_at_fork = os.register_at_fork
os.register_at_fork = lambda **kw: None
try:
    import random, statistics  # noqa: E401,F401
finally:
    os.register_at_fork = _register_at_fork
import _random
_reseed, _random_inst = _random.Random.seed, random._inst
_gc_freeze = gc.freeze

PRELUDE = (
    "import sys, math, itertools, collections, heapq, bisect, functools, string, re, random\n"
    "from typing import *\n"
    "from collections import Counter, OrderedDict, deque, defaultdict\n"
    "from functools import lru_cache, reduce, cmp_to_key\n"
    "from itertools import accumulate, product, permutations, combinations\n"
    "from math import sqrt, ceil, floor, gcd, inf, log, log2\n"
    "from heapq import heappush, heappop, heapify\n"
)
PRELUDE_CODE = compile(PRELUDE, '<prelude>', 'exec')

SLOT = int(os.environ.get('CRUCIBLE_SLOT', '0'))
UID = int(os.environ.get('CRUCIBLE_UID_BASE', '61000')) + SLOT
WORK = os.environ.get('CRUCIBLE_WORKDIR', '/tmp')
# One path per slot, but a new directory (made before, removed after) for every test.
RUNDIR = os.path.join(WORK, 'crucible-run-%d' % SLOT)
IS_ROOT = os.geteuid() == 0
OUTPUT_CAP = 64 * 1024  # bytes of stdout/stderr sent back when the caller wants the output
# The candidate's whole environment. The server adopts it at startup, so children inherit it.
# One BLAS/OpenMP thread: their pools would exceed the thread limit and the memory budget.
CHILD_ENV = {'HOME': RUNDIR, 'TMPDIR': RUNDIR, 'PATH': '/usr/bin:/bin', 'LANG': 'C.UTF-8',
             'OPENBLAS_NUM_THREADS': '1', 'OMP_NUM_THREADS': '1', 'MKL_NUM_THREADS': '1'}
PAGE = os.sysconf('SC_PAGE_SIZE')
BWRAPPED = os.environ.get('CRUCIBLE_BWRAP') == '1'
# Python's int-to-str limit would turn a correct 10**5000 answer into a runtime_error.
if hasattr(sys, 'set_int_max_str_digits'):
    sys.set_int_max_str_digits(0)

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
# ---------------------------------------------------------------- value serialization
# Our own globals shadow the builtins module: a program that patches `builtins.isinstance`
# (or any other builtin) cannot change how this harness classifies or serializes its result.
globals().update({k: v for k, v in vars(builtins).items() if not k.startswith('__')})
_enc_str = json.encoder.encode_basestring_ascii  # the C function: immune to patched builtins

# Captured now so that a program that patches builtins cannot steer what we report.
_type, _isinstance, _repr, _len, _int_repr, _float_repr = type, isinstance, repr, len, int.__repr__, float.__repr__
_list, _str_new, _sorted, _dict_items = list, str.__str__, sorted, dict.items
_isnan, _isinf = math.isnan, math.isinf
_dumps = json.dumps


def encode(v):
    """Tagged value -> JSON text, by exact types and captured functions only."""
    t = _type(v)
    if v is None:
        return 'null'
    if t is bool:
        return 'true' if v else 'false'
    if t is int:
        return _int_repr(v)
    if t is float:
        return _float_repr(v)
    if t is str:
        return _enc_str(v)
    if t is list:
        return '[' + ','.join([encode(x) for x in v]) + ']'
    if t is dict:
        return '{' + ','.join([_enc_str(_str_new(k)) + ':' + encode(x) for k, x in _dict_items(v)]) + '}'
    return _enc_str('<unencodable>')


def tag(v, depth=0):
    """Python value -> tagged JSON value. Decided by exact types, never by the value's own
    methods, so an `__eq__`/`__repr__`-overriding subclass cannot pass for a plain value."""
    if depth > 200:
        return {'$repr': '<too deep>'}
    t = _type(v)
    if v is None or t is bool:
        return v
    # Subclasses (numpy.float64 is a float) are read through the base type's C slots: the
    # stored value, whatever the subclass's own __eq__/__repr__ claim.
    if _isinstance(v, int) and not _isinstance(v, bool):
        n = int(_int_repr(v))
        if -(1 << 53) < n < (1 << 53):
            return n
        return {'$int': _int_repr(v)}
    if _isinstance(v, float):
        f = float(_float_repr(v))
        if _isnan(f) or _isinf(f):
            return {'$float': _float_repr(v)}
        return f
    if _isinstance(v, str):
        return _str_new(v)
    if _isinstance(v, list):
        return [tag(x, depth + 1) for x in _list.__iter__(v)]
    if _isinstance(v, tuple):
        return {'$tuple': [tag(x, depth + 1) for x in tuple.__iter__(v)]}
    if getattr(t, '__module__', '') == 'numpy' and hasattr(v, 'tolist'):
        # numpy scalars and arrays: their plain-Python value (int64 is not an int subclass).
        try:
            return tag(v.tolist(), depth + 1)
        except Exception:
            pass
    if _isinstance(v, dict):
        v = dict(_dict_items(v))
        t = dict
    if t is dict:
        items = [(k, x) for k, x in _dict_items(v)]
        if all(_type(k) is str for k, _ in items):
            return {'$dict': [[k, tag(x, depth + 1)] for k, x in items]}
        return {'$dict': [[tag(k, depth + 1), tag(x, depth + 1)] for k, x in items]}
    if t is set or t is frozenset:
        return {'$set': [tag(x, depth + 1) for x in _list(v)]}
    if t is complex:
        return {'$repr': complex.__repr__(v), '$type': 'complex'}
    if t is bytes:
        return {'$repr': bytes.__repr__(v), '$type': 'bytes'}
    # Everything else is opaque: compared by a repr that its own class cannot choose.
    try:
        r = object.__repr__(v)
    except Exception:
        r = '<object>'
    return {'$repr': r, '$type': getattr(t, '__name__', 'object')}



class Opaque:
    """An object a program returned that has no plain value: it equals nothing but itself."""
    __slots__ = ('r', 't')

    def __init__(self, r, t):
        self.r, self.t = r, t

    def __repr__(self):
        return '<%s %s>' % (self.t, self.r)

    def __eq__(self, other):
        return self is other

    __hash__ = object.__hash__


def _untag_key(v):
    u = untag(v)
    if _type(u) is set:
        return frozenset(u)
    if _type(u) is list:
        return tuple(u)
    return u


def untag(v):
    """Tagged JSON value -> plain Python value (tuples, sets, big ints, dicts exact)."""
    t = _type(v)
    if t is list:
        return [untag(x) for x in v]
    if t is not dict:
        return v
    if '$tuple' in v:
        return tuple(untag(x) for x in v['$tuple'])
    if '$int' in v:
        return int(v['$int'])
    if '$float' in v:
        return float(v['$float'])
    if '$dict' in v:
        return {_untag_key(k): untag(x) for k, x in v['$dict']}
    if '$set' in v:
        return set(_untag_key(x) for x in v['$set'])
    return Opaque(v.get('$repr', ''), v.get('$type', 'object'))


# ---------------------------------------------------------------- validation of child records
# Everything a child writes is the candidate's claim: it is parsed strictly and anything out of
# grammar is the program's runtime_error ("MalformedResult"), never a sandbox fault.
class Malformed(Exception):
    pass


def _reject_constant(s):
    raise Malformed('non-finite number %s' % s)


def _finite_float(s):
    f = float(s)
    if _isnan(f) or _isinf(f):
        raise Malformed('non-finite number')
    return f


SAFE = 1 << 53


def _short_int(s):
    # Larger integers must come as {"$int": text}; int() of a huge text is quadratic.
    if _len(s) > 17:
        raise Malformed('integer outside the exact range without $int')
    return int(s)


_INT_TEXT = frozenset('0123456789-')
NAME_OK = frozenset('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.')


def check_tagged(v, depth=0):
    """Raises Malformed unless v is in the tagged-value grammar of tag()."""
    if depth > 210:
        raise Malformed('value nested too deeply')
    t = _type(v)
    if v is None or t is bool or t is str:
        return
    if t is int:
        if not -SAFE < v < SAFE:
            raise Malformed('integer outside the exact range without $int')
        return
    if t is float:
        return  # finiteness was checked while parsing
    if t is list:
        for x in v:
            check_tagged(x, depth + 1)
        return
    if t is not dict:
        raise Malformed('not a value')
    keys = _sorted(v)
    if keys == ['$tuple'] or keys == ['$set']:
        x = v[keys[0]]
        if _type(x) is not list:
            raise Malformed('%s is not a list' % keys[0])
        for y in x:
            check_tagged(y, depth + 1)
    elif keys == ['$int']:
        s = v['$int']
        if _type(s) is not str or not s or not (set(s) <= _INT_TEXT) or '-' in s[1:] or s == '-':
            raise Malformed('bad $int')
    elif keys == ['$float']:
        if v['$float'] not in ('nan', 'inf', '-inf'):
            raise Malformed('bad $float')
    elif keys == ['$dict']:
        x = v['$dict']
        if _type(x) is not list:
            raise Malformed('$dict is not a list')
        for pair in x:
            if _type(pair) is not list or _len(pair) != 2:
                raise Malformed('$dict entry is not a pair')
            check_tagged(pair[0], depth + 1)
            check_tagged(pair[1], depth + 1)
    elif keys == ['$repr'] or keys == ['$repr', '$type']:
        if any(_type(v[k]) is not str for k in keys):
            raise Malformed('bad $repr')
    else:
        raise Malformed('unknown tag %s' % ','.join(keys)[:40])


def _short_str(v, n):
    if _type(v) is not str:
        raise Malformed('not a string')
    return v[:n]


# Statuses a child may report, per mode, with the fields each allows.
RECORD_FIELDS = {'ok': ('s',), 'value': ('s', 'value', 'args'), 'exc': ('s', 'type', 'message'),
                 'memory': ('s',), 'exit': ('s', 'code')}
MODE_STATUSES = {'stdio': ('ok', 'exc', 'memory', 'exit'), 'call': ('value', 'exc', 'memory'),
                 'expr': ('value', 'exc', 'memory'), 'judge': ('ok', 'exc', 'memory', 'assert_fail',
                                                               'cand_exc', 'need', 'fatal')}
RECORD_FIELDS.update({'assert_fail': ('s', 'message'), 'cand_exc': ('s', 'type', 'message'),
                      'need': ('s', 'name', 'args', 'key'), 'fatal': ('s', 'key'), 'many': ('s', 'results')})
MODE_STATUSES['judge_many'] = ('many', 'memory', 'exc')
MODE_STATUSES['discover'] = ('calls', 'memory', 'exc')
RECORD_FIELDS['calls'] = ('s', 'results')


def check_record(rec, mode):
    """Raises Malformed unless rec is a record a child of this mode may write (normalizes
    exception names and messages to their bounds)."""
    if _type(rec) is not dict or rec.get('s') not in MODE_STATUSES[mode]:
        raise Malformed('unknown status')
    allowed = RECORD_FIELDS[rec['s']]
    for k in rec:
        if k not in allowed:
            raise Malformed('unexpected field %s' % k[:40])
    s = rec['s']
    if s == 'value':
        check_tagged(rec.get('value'))
        if 'args' in rec:
            if _type(rec['args']) is not list:
                raise Malformed('args')
            check_tagged(rec['args'])
    elif s in ('exc', 'cand_exc'):
        typ = _short_str(rec.get('type', ''), 100)
        if not typ or not set(typ) <= NAME_OK:
            raise Malformed('exception type')
        rec['type'], rec['message'] = typ, _short_str(rec.get('message', ''), 500)
    elif s == 'exit':
        if _type(rec.get('code')) is not int:
            raise Malformed('exit code')
    elif s == 'assert_fail':
        rec['message'] = _short_str(rec.get('message', ''), 500)
    elif s == 'need':
        _short_str(rec.get('name'), 200)
        _short_str(rec.get('key'), 1 << 24)
        if _type(rec.get('args')) is not list:
            raise Malformed('args')
        check_tagged(rec['args'])
    elif s == 'fatal':
        _short_str(rec.get('key'), 1 << 24)
    elif s == 'calls':
        if _type(rec.get('results')) is not list:
            raise Malformed('results')
        for x in rec['results']:
            if _type(x) is not dict:
                raise Malformed('discovery')
            for c in x.get('calls') or []:
                if _type(c) is not dict or _type(c.get('args')) is not list:
                    raise Malformed('call')
                _short_str(c.get('name'), 200)
                _short_str(c.get('key'), 1 << 24)
                check_tagged(c['args'])
    elif s == 'many':
        if _type(rec.get('results')) is not list:
            raise Malformed('results')
        for x in rec['results']:
            check_record(x, 'judge')


def parse_record(data, mode):
    """The result memfd: optional b'L\\n' (the module loaded), then at most one JSON record.
    -> (loaded, record or None). A record out of grammar is {'s': 'garbled'}."""
    loaded = data.startswith(b'L\n')
    body = data[2:] if loaded else data
    if not body:
        return loaded, None
    try:
        rec = json.loads(body, parse_constant=_reject_constant, parse_float=_finite_float, parse_int=_short_int)
        check_record(rec, mode)
        return loaded, rec
    except (ValueError, Malformed, RecursionError, MemoryError, TypeError, KeyError) as e:
        return loaded, {'s': 'garbled', 'why': str(e)[:200]}


# ---------------------------------------------------------------- protocol I/O
HEADER = 10  # each frame: its length as 9 decimal digits and a newline, then JSON


def read_exact(n):
    """Exactly n bytes from fd 0 (None at end of input). Never more: requests queued behind this
    one stay in the pipe for the next request server."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = os.readv(0, [view[got:]])
        if not k:
            return None
        got += k
    return buf


def read_message():
    head = read_exact(HEADER)
    if head is None:
        return None
    body = read_exact(int(head))
    return None if body is None else json.loads(body)


def frame(obj):
    body = json.dumps(obj, separators=(',', ':'), allow_nan=False).encode()
    return b'%09d\n' % _len(body) + body


def write_all(data):
    view = memoryview(data)
    while view:
        n = os.write(1, view)
        view = view[n:]


# ---------------------------------------------------------------- running one child
def memfd(name, data=b''):
    fd = os.memfd_create(name, 0)
    if data:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    return fd


def read_fd(fd, cap):
    os.lseek(fd, 0, os.SEEK_SET)
    size = os.fstat(fd).st_size
    data = os.read(fd, min(size, cap)) if size else b''
    return data, size


_STATM = os.open('/proc/self/statm', os.O_RDONLY | os.O_CLOEXEC)


def vm_bytes():
    """This server's address-space size; a child starts with the same."""
    return int(os.pread(_STATM, 128, 0).split()[0]) * PAGE


_RL_CACHE = {}


def rlimit_values(limits):
    """(cpu, fsize, nproc, address-space budget on top of the server's size), once per limits."""
    key = (limits['cpu_s'], limits['out_bytes'], limits['nproc'], limits['mem_mb'])
    v = _RL_CACHE.get(key)
    if v is None:
        cpu = max(1, int(math.ceil(limits['cpu_s'])))
        out = int(limits['out_bytes']) + 1
        v = _RL_CACHE[key] = ((cpu, cpu + 1), (out, out), (limits['nproc'], limits['nproc']), int(limits['mem_mb'] * (1 << 20)))
    return v


def server_setup():
    """Everything a child needs that forks can inherit, done once in the zygote: a child then
    only does what cannot be inherited (session, death signal, cwd, limits, uid, filter)."""
    # Default dispositions, as a fresh program has (Python ignores SIGPIPE and SIGXFSZ).
    for s in (signal.SIGPIPE, signal.SIGINT, signal.SIGTERM, signal.SIGXFSZ, signal.SIGXCPU):
        signal.signal(s, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Cleanup of deep trees holds a bounded number of directory fds; leave room for them.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 4096 and (hard == resource.RLIM_INFINITY or hard >= 4096):
        resource.setrlimit(resource.RLIMIT_NOFILE, (4096, hard))
    host_isolation()
    os.environ.clear()
    os.environ.update(CHILD_ENV)
    sys.setrecursionlimit(10000)
    sys.argv = ['main.py']
    os.makedirs(WORK, exist_ok=True)
    remove_rundir()
    global CHILD_STREAMS
    CHILD_STREAMS = make_child_streams()


_OOM_ADJ = b'1000'


def child_setup(rl, vm):
    """In the forked child: limits, identity and filter. NPROC is set before the uid changes."""
    # What this server allocated since its last freeze joins the permanent generation (a list
    # splice): the child's collections then never walk, and so never copy, inherited pages.
    _gc_freeze()
    setrlimit = resource.setrlimit
    os.setsid()
    _prctl(1, 9)  # PR_SET_PDEATHSIG SIGKILL: die with the server
    if CG.ok:
        # The cgroup's OOM killer must pick this child, never the servers that share the group.
        fd = os.open('/proc/self/oom_score_adj', os.O_WRONLY)
        os.write(fd, _OOM_ADJ)
        os.close(fd)
    os.chdir(RUNDIR)
    setrlimit(resource.RLIMIT_CPU, rl[0])
    setrlimit(resource.RLIMIT_FSIZE, rl[1])
    setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    setrlimit(resource.RLIMIT_NPROC, rl[2])
    setrlimit(resource.RLIMIT_AS, (vm + rl[3], vm + rl[3]))
    if IS_ROOT:
        os.setgroups([])
        os.setgid(UID)
        os.setuid(UID)
    install_seccomp()
    _reseed(_random_inst, None)  # what random's at-fork hook would do: a fresh seed per child
    sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__ = CHILD_STREAMS
def make_child_streams():
    """The child's sys.stdin/stdout/stderr, built once here (a child building its own costs
    ~100 page copies) while fds 0-2 are, as in every child, fresh memfds at offset 0: the
    objects cache what they learn (seekable, position) and must learn what a child would.
    This process never uses them, so each child inherits them unused."""
    saved = [os.dup(fd) for fd in (0, 1, 2)]
    blank = memfd('blank')
    try:
        for fd in (0, 1, 2):
            os.dup2(blank, fd)
        streams = (
            io.TextIOWrapper(io.BufferedReader(io.FileIO(0, 'r', closefd=False)), encoding='utf-8', errors='replace'),
            io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, 'w', closefd=False)), encoding='utf-8', errors='replace'),
            io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, 'w', closefd=False)), encoding='utf-8', errors='replace', line_buffering=True),
        )
    finally:
        for fd, old in zip((0, 1, 2), saved):
            os.dup2(old, fd)
            os.close(old)
        os.close(blank)
    return streams


CHILD_STREAMS = None


def exc_info(e):
    msg = ''
    try:
        msg = BaseException.__str__(e)
    except Exception:
        pass
    return {'type': _type(e).__name__, 'message': msg[:500]}




def resolve_entry(g, entry):
    if not entry:
        raise NameError('no entry point given for a call test')
    if '.' in entry:
        cls, meth = entry.split('.', 1)
        return getattr(g[cls](), meth)
    if entry in g:
        return g[entry]
    if 'Solution' in g and hasattr(g['Solution'], entry):  # LeetCode starter with a bare fn_name
        return getattr(g['Solution'](), entry)
    raise NameError("name '%s' is not defined" % entry)


_MUTABLE = (list, dict, set)


def child_main(mode, payload, res_fd):
    """Runs the candidate (or, in the oracle, a test body) and writes at most one record to
    res_fd, after b'L\\n' once the module has loaded. Never returns."""
    rec = None
    try:
        # Only a stdio program is the main script; a program under call/assert tests is a module
        # whose own `if __name__ == "__main__":` self-checks must not run (as harnesses import it).
        g = {'__name__': '__main__' if mode == 'stdio' else 'solution', '__builtins__': builtins}
        if STATE['prelude']:
            exec(PRELUDE_CODE, g)
        try:
            exec(STATE['code'], g)
        except SystemExit as e:
            if mode == 'stdio' and (e.code is None or e.code == 0):
                rec = {'s': 'ok'}
            elif mode == 'stdio':
                rec = {'s': 'exit', 'code': e.code if _type(e.code) is int else 1}
            else:
                raise
        if rec is None:
            if mode == 'stdio':
                rec = {'s': 'ok'}
            else:
                os.write(res_fd, b'L\n')
                if mode == 'call':
                    fn = resolve_entry(g, payload.get('name') or STATE['entry'])
                    args = untag(payload['args'])
                    value = fn(*args)
                    rec = {'s': 'value', 'value': tag(value)}
                    if payload.get('ret_args'):
                        # Proxied calls: arguments the function changed in place go back too.
                        rec['args'] = [tag(a) if _type(a) in _MUTABLE else None for a in args]
                elif mode == 'expr':
                    rec = {'s': 'value', 'value': tag(eval(compile(payload['expr'], '<test>', 'eval'), g))}
                elif mode == 'judge':
                    rec = run_judge(payload, {k: r for k, r in payload.get('memo') or []})
                elif mode == 'discover':
                    rec = {'s': 'calls', 'results': [discover_calls(item) for item in payload['items']]}
                elif mode == 'judge_many':
                    # Every test body of one program in this one child, each in fresh globals.
                    memo = {k: r for k, r in payload.get('memo') or []}
                    recs = []
                    for item in payload['items']:
                        try:
                            recs.append(run_judge(item, memo))
                        except MemoryError:
                            recs.append({'s': 'memory'})
                        except BaseException as e:  # noqa: BLE001
                            recs.append({'s': 'exc', **exc_info(e)})
                    rec = {'s': 'many', 'results': recs}
    except MemoryError:
        rec = {'s': 'memory'}
    except RecursionError as e:
        rec = {'s': 'exc', **exc_info(e)}
    except SystemExit as e:
        rec = {'s': 'exc', 'type': 'SystemExit', 'message': _repr(e.code)[:200]}
    except BaseException as e:  # noqa: BLE001 - every candidate failure is reported
        rec = {'s': 'exc', **exc_info(e)}
    try:
        sys.stdout.flush()
    except BaseException:  # noqa: BLE001
        pass
    try:
        data = encode(rec).encode()
    except BaseException:  # noqa: BLE001
        data = b'{"s":"exc","type":"SerializationError","message":"result could not be serialized"}'
    try:
        os.write(res_fd, data)
    except BaseException:  # noqa: BLE001
        os._exit(3)
    os._exit(0)


# ---------------------------------------------------------------- assert tests, in the oracle
class NeedCall(BaseException):
    """A candidate call whose result is not known yet: the test is re-run once it is."""


class CandidateFatal(BaseException):
    """A candidate call that ended the test (time, memory, output limit, load failure)."""


class CandidateError(Exception):
    """A candidate's exception whose type is not a builtin one."""


_BOUND_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def free_names(tree):
    """Names a test reads but never binds: candidates for the program's functions."""
    loads, bound = set(), set()
    for node in ast.walk(tree):
        if _isinstance(node, ast.Name):
            (loads if _isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif _isinstance(node, _BOUND_NODES):
            bound.add(node.name)
        elif _isinstance(node, ast.arg):
            bound.add(node.arg)
        elif _isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split('.')[0])
        elif _isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return loads - bound


def call_key(name, targs):
    return name + '\x00' + _dumps(targs, sort_keys=True, separators=(',', ':'))


def _write_back(a, new):
    if _type(a) is list and _type(new) is list:
        a[:] = new
    elif (_type(a) is dict and _type(new) is dict) or (_type(a) is set and _type(new) is set):
        a.clear()
        a.update(new)


class Unknown:
    """Discovery: what a candidate call returns before its answer is known. Every operation
    on it gives another Unknown and it is true, so a body runs on and shows which calls it makes
    with arguments that do not depend on answers (a loop over computed arguments)."""
    __slots__ = ()

    def _same(self, *a, **k):
        return self

    def __bool__(self):
        return True

    def __len__(self):
        return 0

    def __iter__(self):
        return iter(())

    def __index__(self):
        return 0

    __int__ = __index__

    def __float__(self):
        return 0.0

    def __hash__(self):
        return 0

    def __str__(self):
        return '<unknown>'

    __repr__ = __str__


for _m in ('eq', 'ne', 'lt', 'le', 'gt', 'ge', 'add', 'radd', 'sub', 'rsub', 'mul', 'rmul', 'truediv',
           'rtruediv', 'floordiv', 'rfloordiv', 'mod', 'rmod', 'pow', 'rpow', 'neg', 'pos', 'abs',
           'and', 'rand', 'or', 'ror', 'xor', 'rxor', 'getitem', 'getattr', 'call', 'contains', 'round'):
    setattr(Unknown, '__%s__' % _m, Unknown._same)


_TEST_BASE = []


def test_globals():
    """Fresh globals for a test body: the prelude's names (run once per child), copied."""
    if not _TEST_BASE:
        base = {'__name__': '__test__', '__builtins__': builtins}
        exec(PRELUDE_CODE, base)
        _TEST_BASE.append(base)
    return dict(_TEST_BASE[0])


class DiscoveryFull(BaseException):
    pass


MAX_DISCOVERED = 1000


def exec_test_body(tree, proxied, entry, proxy_for):
    """Runs a test body with the program's names (and `candidate`) bound to proxies; raises
    whatever the body raises. Used by call discovery and by judging, so both see one body."""
    g = test_globals()
    free = free_names(tree)
    for n in free:
        if n in proxied:
            g[n] = proxy_for(n)
    if entry and 'candidate' in free:
        g['candidate'] = proxy_for(entry)
    exec(compile(tree, '<test>', 'exec'), g)
    # HumanEval style: the test defines check(candidate) and expects the harness to call it.
    if entry and _isinstance(g.get('check'), types_function) and 'check' not in free:
        g['check'](proxy_for(entry))


def discover_calls(payload):
    """Runs a test body with every candidate call answered by Unknown: -> the calls it made."""
    calls, seen = [], set()
    proxied = set(payload.get('names') or [])
    entry = payload.get('entry')
    try:
        tree = ast.parse(payload['code'], '<test>', 'exec')
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        return {'error': {'type': _type(e).__name__, 'message': str(e)[:300]}}

    def proxy_for(name):
        def proxy(*args, **kwargs):
            if not kwargs:
                targs = [tag(a) for a in args]
                key = call_key(name, targs)
                if key not in seen:
                    seen.add(key)
                    calls.append({'name': name, 'args': targs, 'key': key})
                    if _len(calls) >= MAX_DISCOVERED:
                        raise DiscoveryFull()
            return Unknown()
        return proxy

    try:
        exec_test_body(tree, proxied, entry, proxy_for)
    except BaseException:  # noqa: BLE001 - discovery keeps what it saw before any failure
        pass
    return {'calls': calls}


def run_judge(payload, memo):
    """Runs an assert test's body here, in the oracle. Each name of the program it calls is a
    proxy: its arguments are serialized, and its result comes from the memo of calls the
    candidate's process answered. An unknown call ends this pass with 'need'; Node runs it in
    the candidate's process and runs the body again with the answer."""
    code, entry = payload['code'], payload.get('entry')
    proxied = set(payload.get('names') or [])
    tree = ast.parse(code, '<test>', 'exec')
    state = {'stop': None}
    raised = []

    def proxy_for(name):
        def proxy(*args, **kwargs):
            if kwargs:
                raise TypeError('keyword arguments to the candidate are not supported')
            targs = [tag(a) for a in args]
            key = call_key(name, targs)
            r = memo.get(key)
            if r is None:
                if state['stop'] is None:
                    state['stop'] = {'s': 'need', 'name': name, 'args': targs, 'key': key}
                raise NeedCall()
            if r['kind'] == 'fatal':
                if state['stop'] is None:
                    state['stop'] = {'s': 'fatal', 'key': key}
                raise CandidateFatal()
            if r['kind'] == 'exc':
                cls = getattr(builtins, r['type'], None)
                if not (_isinstance(cls, _type) and issubclass(cls, Exception)):
                    cls = CandidateError
                try:
                    e = cls(r['message'])
                except Exception:  # noqa: BLE001 - exception types with other signatures
                    e = CandidateError(r['message'])
                raised.append((e, r['type'], r['message']))
                raise e
            for a, t in zip(args, r.get('args') or []):
                if t is not None:
                    _write_back(a, untag(t))
            return untag(r['value'])
        proxy.__name__ = name
        return proxy

    try:
        exec_test_body(tree, proxied, entry, proxy_for)
    except BaseException as e:  # noqa: BLE001
        if state['stop'] is not None:
            return state['stop']
        for x, typ, msg in raised:
            if x is e:
                return {'s': 'cand_exc', 'type': typ, 'message': msg}
        if _isinstance(e, AssertionError):
            return {'s': 'assert_fail', 'message': exc_info(e)['message'] or 'assertion failed'}
        if _isinstance(e, MemoryError):
            return {'s': 'memory'}
        return {'s': 'exc', **exc_info(e)}
    # A test that swallowed a NeedCall (a bare except) still waits for the call.
    return state['stop'] if state['stop'] is not None else {'s': 'ok'}


types_function = _type(free_names)


def _is_literal(node):
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def plan_calls(code, entry, names):
    """Calls of the program in a test whose arguments are literals: run before the test body,
    in one request, so most tests need one pass. -> list of {name, args, key} or an error."""
    try:
        tree = ast.parse(code, '<test>', 'exec')
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        return {'error': {'type': _type(e).__name__, 'message': str(e)[:300]}}
    calls, seen = [], set()
    free = free_names(tree)
    for node in ast.walk(tree):
        if not (_isinstance(node, ast.Call) and _isinstance(node.func, ast.Name)) or node.keywords:
            continue
        fname = node.func.id
        name = entry if fname == 'candidate' else fname if fname in names and fname in free else None
        if not name or any(_isinstance(a, ast.Starred) or not _is_literal(a) for a in node.args):
            continue
        try:
            targs = [tag(ast.literal_eval(a)) for a in node.args]
        except Exception:  # noqa: BLE001
            continue
        key = call_key(name, targs)
        if key not in seen:
            seen.add(key)
            calls.append({'name': name, 'args': targs, 'key': key})
    return {'calls': calls}


# ---------------------------------------------------------------- run directories
STATE = {'code': None, 'error': None, 'entry': None, 'prelude': False}
RUN_SEQ = [0]
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_DEPTH = 64  # directory fds held at once while removing a tree


def make_rundir():
    try:
        os.mkdir(RUNDIR, 0o700)
    except FileExistsError:
        remove_rundir()
        os.mkdir(RUNDIR, 0o700)  # still there: this test is a sandbox_error, never a shared dir
    if IS_ROOT:
        os.chown(RUNDIR, UID, UID)


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
            if _len(stack) >= MAX_DEPTH:
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


def remove_rundir():
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


def run_child(mode, payload, limits, stdin_bytes=b''):
    """Forks one child for one test and classifies how it ended. Returns a plain dict."""
    rl = rlimit_values(limits)
    make_rundir()
    fin = memfd('stdin', stdin_bytes)
    fout = memfd('stdout')
    ferr = memfd('stderr')
    fres = memfd('result')
    # Setup failures travel on a pipe the child closes before any program code runs, so no
    # program can claim one (a record on fd 9 is only the program's own claim).
    sr, sw = os.pipe()
    vm = vm_bytes()
    cg = CG.before(limits['mem_mb'])
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(sr)
            os.dup2(fin, 0)
            os.dup2(fout, 1)
            os.dup2(ferr, 2)
            os.dup2(fres, 9)
            os.dup2(sw, 10)
            os.closerange(3, 9)
            os.closerange(11, 1 << 16)
            child_setup(rl, vm)
        except BaseException as e:  # noqa: BLE001
            try:
                os.write(10, ('%s: %s' % (_type(e).__name__, e)).encode()[:500] or b'?')
            finally:
                os._exit(4)
        os.close(10)
        child_main(mode, payload, 9)
    os.close(sw)
    killed_wall = False
    try:
        pidfd = os.pidfd_open(pid)
        ready, _, _ = select.select([pidfd], [], [], limits['wall_s'])
        if not ready:
            killed_wall = True
            os.kill(pid, signal.SIGKILL)
        os.close(pidfd)
        _, status, ru = os.wait4(pid, 0)
    except BaseException:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        _, status, ru = os.wait4(pid, 0)
    wall = time.monotonic() - t0
    if SECCOMP is None and IS_ROOT:
        reap_uid()
    setup = os.read(sr, 1000)
    os.close(sr)
    peak, oom = CG.after(cg)
    out, out_size = read_fd(fout, limits['out_bytes'] + 1)
    err, _ = read_fd(ferr, 4096)
    resb, res_size = read_fd(fres, limits['out_bytes'] + 65536)
    for fd in (fin, fout, ferr, fres):
        os.close(fd)
    remove_rundir()
    loaded, rec = parse_record(resb, mode) if res_size <= limits['out_bytes'] + 65536 else \
        (False, {'s': 'garbled', 'why': 'result record over the output limit'})
    return {
        'status': status, 'signal': os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        'code': os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        'cpu': ru.ru_utime + ru.ru_stime, 'wall': wall, 'maxrss': ru.ru_maxrss, 'peak': peak, 'oom': oom,
        'killed_wall': killed_wall, 'rec': rec, 'loaded': loaded, 'setup': setup.decode('utf-8', 'replace'),
        'out': out, 'out_size': out_size, 'err': err,
    }


def reap_uid():
    """Without seccomp a program could leave processes behind: kill everything of its uid."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setuid(UID)
            os.kill(-1, signal.SIGKILL)
        except BaseException:  # noqa: BLE001
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def classify(r, mode, limits, want_output):
    """How the child ended -> verdict fields. Comparison with expected values is not done here."""
    rec, sig = r['rec'], r['signal']
    s = rec.get('s') if rec else None
    res = {'cpu_ms': round(r['cpu'] * 1000, 3), 'wall_ms': round(r['wall'] * 1000, 3), 'memory_kb': r['maxrss'],
           'phase': 'load' if mode == 'call' and not r['loaded'] else 'test'}
    if r['peak'] is not None:
        res['memory_peak_kb'] = r['peak'] // 1024
    # stdio: the whole stdout, compared in Node; otherwise only a bounded excerpt for reports.
    # Base64: its size is 4/3 of the bytes whatever they are (JSON escapes can be 6x).
    raw = r['out'] if mode == 'stdio' else r['out'][:OUTPUT_CAP] if want_output else None
    out = {'out_b64': base64.b64encode(raw).decode()} if raw is not None else {}
    if r['setup']:
        return {**res, 'verdict': 'sandbox_error', 'message': 'child setup failed: ' + r['setup']}
    if r['killed_wall'] or sig in (signal.SIGXCPU,) or r['cpu'] > limits['cpu_s'] and s not in ('exc', 'memory', 'cand_exc'):
        # Over the CPU budget but still finished (fractional limits): too slow, unless it
        # stopped on an error or on its memory budget first.
        return {**res, 'verdict': 'time_limit', 'message': 'wall-clock limit' if r['killed_wall'] else 'CPU limit'}
    if sig == signal.SIGKILL and r['cpu'] >= max(1, math.ceil(limits['cpu_s'])):
        return {**res, 'verdict': 'time_limit', 'message': 'CPU limit'}
    if r['oom']:
        return {**res, 'verdict': 'memory_limit', 'message': 'memory cgroup limit'}
    if sig == signal.SIGXFSZ or r['out_size'] > limits['out_bytes']:
        return {**res, 'verdict': 'output_limit', 'message': 'output over %d bytes' % limits['out_bytes']}
    if s == 'memory':
        return {**res, 'verdict': 'memory_limit'}
    if sig is not None:
        if r['maxrss'] * 1024 > limits['mem_mb'] * (1 << 20) * 0.9:
            return {**res, 'verdict': 'memory_limit', 'message': 'killed by signal %d' % sig}
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        return {**res, 'verdict': 'runtime_error', 'exception_type': name, 'message': 'killed by ' + name, **out}
    if s == 'garbled':
        return {**res, 'verdict': 'runtime_error', 'exception_type': 'MalformedResult',
                'message': 'the program wrote an invalid result record: ' + rec.get('why', ''), **out}
    if s == 'exc':
        if rec.get('type') == 'MemoryError':
            return {**res, 'verdict': 'memory_limit'}
        if rec.get('type') == 'OSError' and 'File too large' in rec.get('message', ''):
            return {**res, 'verdict': 'output_limit', 'message': rec.get('message')}
        return {**res, 'verdict': 'runtime_error', 'exception_type': rec.get('type'), 'message': rec.get('message'), **out}
    if mode == 'stdio':
        # A clean exit is enough: os._exit(0) after a flush is a common speed idiom.
        if r['code'] == 0 and (rec is None or s == 'ok'):
            return {**res, 'verdict': 'ran', **out}
        code = rec.get('code') if s == 'exit' else r['code']
        return {**res, 'verdict': 'runtime_error', 'exception_type': 'SystemExit', 'message': 'exit status %s' % code, **out}
    if r['code'] == 0 and s == 'value':
        v = {**res, 'verdict': 'ran', 'value': rec.get('value'), **out}
        if 'args' in rec:
            v['args'] = rec['args']
        return v
    if mode == 'judge' and r['code'] == 0 and s is not None:
        v = judge_outcome(rec, res)
        if v is not None:
            return v
    return {**res, 'verdict': 'runtime_error', 'exception_type': 'SystemExit',
            'message': 'exited (status %s) before the test finished' % r['code'], **out}


def judge_outcome(rec, res):
    """An assert body's record (from the oracle) -> verdict fields, or None."""
    s = rec['s']
    if s == 'ok':
        return {**res, 'verdict': 'ran'}
    if s == 'assert_fail':
        return {**res, 'verdict': 'assert_failed', 'message': rec.get('message') or 'assertion failed'}
    if s == 'cand_exc':
        return {**res, 'verdict': 'runtime_error', 'exception_type': rec['type'], 'message': rec['message'], 'by': 'candidate'}
    if s == 'need':
        return {**res, 'verdict': 'need', 'call': {'name': rec['name'], 'args': rec['args'], 'key': rec['key']}}
    if s == 'fatal':
        return {**res, 'verdict': 'fatal', 'key': rec['key']}
    if s == 'memory':
        return {**res, 'verdict': 'memory_limit'}
    if s == 'exc':
        return {**res, 'verdict': 'runtime_error', 'exception_type': rec.get('type'), 'message': rec.get('message')}
    return None


def judge_all(msg):
    """All assert bodies of one program: in one oracle child when they finish there within their
    summed limits, else (one ran out of time or memory) each in a child of its own."""
    items, limits, memo = msg['items'], msg['limits'], msg.get('memo') or []
    if _len(items) > 1:
        n = _len(items)
        lim = {**limits, 'cpu_s': min(limits['cpu_s'] * n, 120), 'wall_s': min(limits['wall_s'] * n, 240)}
        r = run_child('judge_many', {'items': items, 'memo': memo}, lim)
        rec = r['rec']
        if r['code'] == 0 and r['signal'] is None and not r['setup'] and not r['killed_wall'] and rec and rec.get('s') == 'many' \
                and _len(rec['results']) == n:
            res = {'cpu_ms': 0, 'wall_ms': 0, 'memory_kb': r['maxrss'], 'phase': 'test'}
            out = [judge_outcome(x, res) for x in rec['results']]
            if all(x is not None for x in out):
                return out
    return [classify(run_child('judge', {**item, 'memo': memo}, limits), 'judge', limits, False) for item in items]


def load(msg):
    """Compiles the request's program. -> compile error or None."""
    STATE.update(code=None, error=None, entry=msg.get('entry'), prelude=bool(msg.get('prelude')))
    try:
        STATE['code'] = compile(msg['program'], '<program>', 'exec', dont_inherit=True)
    except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError) as e:
        STATE['error'] = {'type': _type(e).__name__, 'message': str(e)[:500]}
    return STATE['error']


HELD = [b'']  # the last test's frame, kept back to go out with the final reply in one write


def run_tests(msg):
    """All tests of one program, one forked child each, a reply frame per test as it finishes."""
    ce = load(msg)
    if ce is not None:
        return {'ok': False, 'compile_error': ce}
    limits, rid, n = msg['limits'], msg.get('id'), _len(msg['items'])
    for k, item in enumerate(msg['items']):
        mode, payload = item['mode'], item.get('payload') or {}
        try:
            if mode not in ('stdio', 'call'):
                raise ValueError('mode %r is not for candidates' % mode)
            stdin = payload.get('input', '').encode() if mode == 'stdio' else b''
            r = run_child(mode, payload, limits, stdin)
            part = {'k': k, 'result': classify(r, mode, limits, item.get('want_output', False))}
        except Exception as e:  # noqa: BLE001 - this test is a sandbox_error; the next may run
            part = {'k': k, 'error': '%s: %s' % (_type(e).__name__, e)}
        part['id'] = rid
        if k + 1 < n:
            write_all(frame(part))
        else:
            HELD[0] = frame(part)
    return {'ok': True, 'n': n}


def set_oracle_program(code):
    STATE.update(code=code, error=None, entry=None, prelude=True)


def handle(msg):
    op = msg.get('op')
    if op == 'ping':
        return {'ok': True, 'seccomp': SECCOMP is not None, 'root': IS_ROOT, 'uid': UID,
                'stack': resource.getrlimit(resource.RLIMIT_STACK)[0],
                'layers': {**LAYERS, 'seccomp': SECCOMP is not None, 'cgroup': CG.ok, 'uid_drop': IS_ROOT}}
    if op == 'run':
        return run_tests(msg)
    if op == 'discover':
        # Oracle role: which calls each assert body makes, found by running it (sandboxed)
        # with unknown answers; literal calls only, found by parsing, when that run fails.
        set_oracle_program(compile('', '<empty>', 'exec'))
        STATE['prelude'] = False
        items, limits = msg['items'], msg['limits']
        lim = {**limits, 'cpu_s': min(limits['cpu_s'] * _len(items), 60), 'wall_s': min(limits['wall_s'] * _len(items), 120)}
        r = run_child('discover', {'items': items}, lim)
        rec = r['rec']
        if r['code'] == 0 and r['signal'] is None and not r['setup'] and rec and rec.get('s') == 'calls' \
                and _len(rec['results']) == _len(items):
            return {'ok': True, 'results': rec['results']}
        return {'ok': True, 'results': [plan_calls(x['code'], x.get('entry'), set(x.get('names') or [])) for x in items]}
    if op == 'plan':
        names = set(msg.get('names') or [])
        return {'ok': True, 'results': [plan_calls(c, msg.get('entry'), names) for c in msg['codes']]}
    if op == 'judge':
        # Oracle role: assert bodies run here against serialized candidate results.
        set_oracle_program(compile('', '<empty>', 'exec'))
        STATE['prelude'] = False
        return {'ok': True, 'results': judge_all(msg)}
    if op == 'check':
        set_oracle_program(compile(msg['checker'], '<checker>', 'exec'))
        expr = 'bool(check(%s, %s, %s))' % (_repr(msg['input']), _repr(msg['output']), _repr(msg['expected']))
        r = run_child('expr', {'expr': expr}, msg['limits'])
        return {'ok': True, 'result': classify(r, 'expr', msg['limits'], False)}
    return {'ok': False, 'error': 'unknown op %r' % op}


EOF_INPUT = 10  # a request server's exit status when fd 0 is at its end
SPARE = 2  # request servers forked ahead, waiting for their turn


def serve_one(baton_r, baton_w, zygote):
    """A request server: waits for the baton (its turn), reads one request, answers it, passes
    the baton on and exits (its memory dies with it). Forked ahead of its turn, so the fork is
    off the path of a request; the baton keeps requests and replies in order."""
    _prctl(1, 9)  # PR_SET_PDEATHSIG SIGKILL: die with the zygote
    if os.getppid() != zygote:
        return 1
    os.read(baton_r, 1)
    try:
        msg = read_message()
        if msg is None:
            return EOF_INPUT
        try:
            reply = handle(msg)
        except BaseException as e:  # noqa: BLE001 - a server fault is a sandbox_error upstream
            reply = {'ok': False, 'error': '%s: %s' % (_type(e).__name__, e)}
        reply['id'] = msg.get('id')
        write_all(HELD[0] + frame(reply))
        return 0
    finally:
        os.write(baton_w, b'.')


def main():
    server_setup()
    # Objects that exist now are never collected: children's GC passes then leave these pages
    # unwritten, so fewer copy-on-write faults per fork.
    gc.collect()
    gc.freeze()
    baton_r, baton_w = os.pipe()
    os.write(baton_w, b'.')
    me, live, ending = os.getpid(), set(), False

    def spawn():
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = serve_one(baton_r, baton_w, me)
            except BaseException as e:  # noqa: BLE001
                try:
                    sys.__stderr__.write('request server failed: %s: %s\n' % (_type(e).__name__, e))
                    sys.__stderr__.flush()
                except BaseException:  # noqa: BLE001
                    pass
            finally:
                os._exit(code)
        live.add(pid)

    for _ in range(SPARE):
        spawn()
    while live:
        pid, status = os.wait()
        live.discard(pid)
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            if not ending:
                spawn()
            continue
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == EOF_INPUT:
            ending = True  # the others find the end too, in turn
            continue
        sys.stderr.write('request server ended with status %d\n' % status)
        sys.exit(1)


if __name__ == '__main__':
    main()
