"""crucible fork-server: runs untrusted Python programs on tests, one forked child per test.

Protocol: requests on fd 0, each its byte length (9 decimal digits and a newline) then JSON;
replies on fd 1 as JSON lines. Requests may be queued (pipelined): they are answered in order.
  {"op": "run", "key": K, "program": SRC?, "entry": NAME|null, "prelude": bool, "limits": {...},
   "items": [{"mode": "stdio"|"call"|"expr"|"exec", "payload": {...}, "want_output": bool}...]}
      -> one line per test as it finishes: {"k": INDEX, "result": {...}} | {"k": INDEX, "error": MSG}
         then {"ok": true, "n": COUNT} | {"ok": false, "compile_error": {"type", "message"}}
      The program is compiled when K differs from the loaded key (`program` may then be omitted
      while K stays loaded).
  {"op": "eval", "exprs": [SRC...], "limits": {...}}     (oracle role: no candidate program)
  {"op": "check", "checker": SRC, "input", "output", "expected", "limits"}
  {"op": "split", "codes": [SRC...]}
  {"op": "ping"}
This process never receives expected outputs of candidate tests: a forked child inherits all of
its memory, so only inputs, call expressions and the program travel here. Comparison of results
with expected values happens in the Node process.

Speed: every page a child writes is a copy-on-write fault (~4 us here), so whatever can be done
once is done in the server before any fork (dispositions, environment, no_new_privs, limits
values), the child runs as little Python as possible, and no module with an at-fork hook
(threading, random's reseed) is left registered.
"""
import ast
import builtins
import gc
import ctypes
import io
import json
import math
import os
import resource
import select
import shutil
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

# ---------------------------------------------------------------- seccomp (x86_64 only)
AUDIT_ARCH_X86_64 = 0xC000003E
RET_ALLOW = 0x7FFF0000
RET_KILL = 0x80000000
def RET_ERRNO(e): return 0x00050000 | e
EPERM, ENOSYS = 1, 38
NR = {'fork': 57, 'vfork': 58, 'execve': 59, 'execveat': 322, 'clone': 56, 'clone3': 435,
      'socket': 41, 'ptrace': 101, 'kill_unused': -1}


class SockFilter(ctypes.Structure):
    _fields_ = [('code', ctypes.c_ushort), ('jt', ctypes.c_ubyte), ('jf', ctypes.c_ubyte), ('k', ctypes.c_uint)]


class SockFprog(ctypes.Structure):
    _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.POINTER(SockFilter))]


def _build_filter():
    LD, JEQ, JSET, JGE, RET = 0x20, 0x15, 0x45, 0x35, 0x06
    ins = [(LD, 0, 0, 4), (JEQ, 1, 0, AUDIT_ARCH_X86_64), (RET, 0, 0, RET_KILL), (LD, 0, 0, 0),
           (JGE, 0, 1, 0x40000000), (RET, 0, 0, RET_ERRNO(ENOSYS))]  # no x32 ABI
    # No new processes and no programs: threads stay allowed (clone with CLONE_THREAD).
    for name, action in (('fork', RET_ERRNO(EPERM)), ('vfork', RET_ERRNO(EPERM)),
                         ('execve', RET_ERRNO(EPERM)), ('execveat', RET_ERRNO(EPERM)),
                         ('clone3', RET_ERRNO(ENOSYS)), ('ptrace', RET_ERRNO(EPERM))):
        ins += [(JEQ, 0, 1, NR[name]), (RET, 0, 0, action)]
    ins += [(JEQ, 0, 4, NR['clone']), (LD, 0, 0, 16), (JSET, 0, 1, 0x00010000),
            (RET, 0, 0, RET_ALLOW), (RET, 0, 0, RET_ERRNO(EPERM))]
    # Only AF_UNIX sockets: no network even where no network namespace exists.
    ins += [(JEQ, 0, 4, NR['socket']), (LD, 0, 0, 16), (JEQ, 0, 1, 1),
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
except Exception:  # pragma: no cover - reported through hello
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


# ---------------------------------------------------------------- protocol I/O
HEADER = 10  # each request is framed: its length as 9 decimal digits and a newline, then JSON


def read_exact(n):
    """Exactly n bytes from fd 0 (None at end of input). Never more: requests queued behind this
    one stay in the pipe, so the children of this request cannot read them in our memory."""
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


def write_message(obj, held=b''):
    """Writes `held` (lines kept back) and obj's line in one write: one wake-up for the reader."""
    data = held + (json.dumps(obj, separators=(',', ':')) + '\n').encode()
    view = memoryview(data)
    while view:
        n = os.write(1, view)
        view = view[n:]


def encode_message(obj):
    return (json.dumps(obj, separators=(',', ':')) + '\n').encode()


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
    """Everything a child needs that forks can inherit, done once: a child then only does what
    cannot be inherited (session, death signal, cwd, per-test limits, uid, filter, streams)."""
    # Default dispositions, as a fresh program has (Python ignores SIGPIPE and SIGXFSZ).
    for s in (signal.SIGPIPE, signal.SIGINT, signal.SIGTERM, signal.SIGXFSZ, signal.SIGXCPU):
        signal.signal(s, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.environ.clear()
    os.environ.update(CHILD_ENV)
    sys.setrecursionlimit(10000)
    sys.argv = ['main.py']
    os.makedirs(WORK, exist_ok=True)
    remove_rundir()
    global CHILD_STREAMS
    CHILD_STREAMS = make_child_streams()


def child_setup(rl, vm):
    """In the forked child: limits, identity and filter. NPROC is set before the uid changes."""
    # What this server allocated since its last freeze joins the permanent generation (a list
    # splice): the child's collections then never walk, and so never copy, inherited pages.
    _gc_freeze()
    setrlimit = resource.setrlimit
    os.setsid()
    _prctl(1, 9)  # PR_SET_PDEATHSIG SIGKILL: die with the server
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


def child_main(mode, payload, res_fd):
    """Runs the candidate and writes one record to res_fd. Never returns."""
    rec = None
    try:
        # Only a stdio program is the main script; a program under call/assert tests is a module
        # whose own `if __name__ == "__main__":` self-checks must not run (as harnesses import it).
        g = {'__name__': '__main__' if mode == 'stdio' else 'solution', '__builtins__': builtins}
        # The test is compiled before the program runs: patched builtins cannot break the rewrite.
        test_code = compile_exec_test(payload['code']) if mode == 'exec' else None
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
            elif mode == 'call':
                fn = resolve_entry(g, STATE['entry'])
                args = json.loads(payload['args'])
                rec = {'s': 'value', 'value': tag(fn(*args))}
            elif mode == 'expr':
                rec = {'s': 'value', 'value': tag(eval(compile(payload['expr'], '<test>', 'eval'), g))}
            elif mode == 'exec':
                run_exec_test(g, test_code)
                rec = {'s': 'ok'}
    except MemoryError:
        rec = {'s': 'memory'}
    except AssertionError as e:
        # Failed assert of the test itself (not one inside the program): a wrong answer.
        tb, where = e.__traceback__, None
        while tb is not None:
            where, tb = tb.tb_frame.f_code.co_filename, tb.tb_next
        mine = _type(e) is TestAssertion or where == '<test>'
        rec = {'s': 'assert_fail' if mine else 'exc', **exc_info(e)}
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


class TestAssertion(AssertionError):
    pass


class _EqRewriter(ast.NodeTransformer):
    """`assert A == B` -> comparison of serialized values, so `__eq__` overrides earn nothing."""

    def visit_Assert(self, node):
        t = node.test
        if _isinstance(t, ast.Compare) and _len(t.ops) == 1 and _isinstance(t.ops[0], ast.Eq):
            call = ast.Call(func=ast.Name('__crucible_eq__', ast.Load()), args=[t.left, t.comparators[0]], keywords=[])
            return ast.copy_location(ast.Expr(call), node)
        return node


def _same(a, b):
    if _type(a) in (int, float) and _type(b) in (int, float) and _type(a) is not bool and _type(b) is not bool:
        return a == b
    if _type(a) is not _type(b):
        return False
    if _type(a) is list:
        return _len(a) == _len(b) and all(_same(x, y) for x, y in zip(a, b))
    if _type(a) is dict:
        if set(a) != set(b):
            return False
        return all(_same(a[k], b[k]) for k in a)
    return a == b


def _tagged_equal(a, b):
    ta, tb = tag(a), tag(b)
    if _isinstance(ta, dict) and '$set' in ta and _isinstance(tb, dict) and '$set' in tb:
        sa = sorted(_dumps(x, sort_keys=True) for x in ta['$set'])
        sb = sorted(_dumps(x, sort_keys=True) for x in tb['$set'])
        return sa == sb
    if _isinstance(ta, dict) and '$dict' in ta and _isinstance(tb, dict) and '$dict' in tb:
        da = sorted(_dumps(x, sort_keys=True) for x in ta['$dict'])
        db = sorted(_dumps(x, sort_keys=True) for x in tb['$dict'])
        return da == db
    return _same(ta, tb)


def compile_exec_test(code):
    tree = ast.parse(code, '<test>', 'exec')
    return compile(ast.fix_missing_locations(_EqRewriter().visit(tree)), '<test>', 'exec')


def run_exec_test(g, test_code):

    def eq(a, b):
        if not _tagged_equal(a, b):
            raise TestAssertion('values differ')
    g['__crucible_eq__'] = eq
    before = set(g)
    exec(test_code, g)
    # HumanEval style: the test defines check(candidate) and expects the harness to call it.
    if 'check' in g and 'check' not in before and STATE['entry']:
        g['check'](resolve_entry(g, STATE['entry']))


def split_assert(src):
    try:
        tree = ast.parse(src, '<test>', 'exec')
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    body = tree.body
    if _len(body) != 1 or not _isinstance(body[0], ast.Assert):
        return None
    t = body[0].test
    if not (_isinstance(t, ast.Compare) and _len(t.ops) == 1 and _isinstance(t.ops[0], ast.Eq)):
        return None
    left, right = t.left, t.comparators[0]
    if not _isinstance(left, ast.Call) and _isinstance(right, ast.Call):
        left, right = right, left  # `assert 3 == f(x)`
    if not _isinstance(left, ast.Call):
        return None
    call, expected = ast.get_source_segment(src, left), ast.get_source_segment(src, right)
    if call is None or expected is None:
        return None
    return {'call': call, 'expected': expected}


STATE = {'key': None, 'code': None, 'error': None, 'entry': None, 'prelude': False}
RUN_SEQ = [0]
HELD = [b'']  # a reply line kept back to go out with the next one


def make_rundir():
    try:
        os.mkdir(RUNDIR, 0o700)
    except FileExistsError:
        remove_rundir()
        os.mkdir(RUNDIR, 0o700)  # still there: this test is a sandbox_error, never a shared dir
    if IS_ROOT:
        os.chown(RUNDIR, UID, UID)


def remove_rundir():
    try:
        os.rmdir(RUNDIR)  # the common case: the program left nothing behind
        return
    except FileNotFoundError:
        return
    except OSError:
        pass
    shutil.rmtree(RUNDIR, ignore_errors=True)
    if os.path.lexists(RUNDIR):
        # Something could not be removed: move it aside, so the next test still starts empty.
        RUN_SEQ[0] += 1
        os.rename(RUNDIR, '%s.stale-%d' % (RUNDIR, RUN_SEQ[0]))


def run_child(mode, payload, limits, stdin_bytes=b''):
    """Forks one child for one test and classifies how it ended. Returns a plain dict."""
    rl = rlimit_values(limits)
    make_rundir()
    fin = memfd('stdin', stdin_bytes)
    fout = memfd('stdout')
    ferr = memfd('stderr')
    fres = memfd('result')
    vm = vm_bytes()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(fin, 0)
            os.dup2(fout, 1)
            os.dup2(ferr, 2)
            os.dup2(fres, 9)
            os.closerange(3, 9)
            os.closerange(10, 1 << 16)
            child_setup(rl, vm)
        except BaseException as e:  # noqa: BLE001
            try:
                os.write(9, _dumps({'s': 'setup', 'message': '%s: %s' % (_type(e).__name__, e)}).encode())
            finally:
                os._exit(4)
        child_main(mode, payload, 9)
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
    out, out_size = read_fd(fout, limits['out_bytes'] + 1)
    err, _ = read_fd(ferr, 4096)
    resb, _ = read_fd(fres, limits['out_bytes'] + 4096)
    for fd in (fin, fout, ferr, fres):
        os.close(fd)
    remove_rundir()
    rec = None
    if resb:
        try:
            rec = json.loads(resb)
        except ValueError:
            rec = {'s': 'garbled'}
    return {
        'status': status, 'signal': os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        'code': os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        'cpu': ru.ru_utime + ru.ru_stime, 'wall': wall, 'maxrss': ru.ru_maxrss,
        'killed_wall': killed_wall, 'rec': rec, 'out': out, 'out_size': out_size, 'err': err,
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
    res = {'cpu_ms': round(r['cpu'] * 1000, 3), 'wall_ms': round(r['wall'] * 1000, 3), 'memory_kb': r['maxrss']}
    # stdio: the whole stdout, compared in Node; otherwise only a bounded excerpt for reports.
    text = r['out'].decode('utf-8', 'replace') if mode == 'stdio' else \
        r['out'][:OUTPUT_CAP].decode('utf-8', 'replace') if want_output else None
    if rec and rec.get('s') == 'setup':
        return {**res, 'verdict': 'sandbox_error', 'message': 'child setup failed: ' + rec.get('message', '')}
    if r['killed_wall'] or sig in (signal.SIGXCPU,) or r['cpu'] > limits['cpu_s'] and (rec is None or rec.get('s') not in ('exc', 'memory')):
        # Over the CPU budget but still finished (fractional limits): too slow, unless it
        # stopped on an error or on its memory budget first.
        return {**res, 'verdict': 'time_limit', 'message': 'wall-clock limit' if r['killed_wall'] else 'CPU limit'}
    if sig == signal.SIGKILL and r['cpu'] >= max(1, math.ceil(limits['cpu_s'])):
        return {**res, 'verdict': 'time_limit', 'message': 'CPU limit'}
    if sig == signal.SIGXFSZ or r['out_size'] > limits['out_bytes']:
        return {**res, 'verdict': 'output_limit', 'message': 'output over %d bytes' % limits['out_bytes']}
    if rec and rec.get('s') == 'memory':
        return {**res, 'verdict': 'memory_limit'}
    if sig is not None:
        if r['maxrss'] * 1024 > limits['mem_mb'] * (1 << 20) * 0.9:
            return {**res, 'verdict': 'memory_limit', 'message': 'killed by signal %d' % sig}
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        return {**res, 'verdict': 'runtime_error', 'exception_type': name, 'message': 'killed by ' + name, 'output': text}
    if rec and rec.get('s') == 'assert_fail':
        return {**res, 'verdict': 'assert_failed', 'message': rec.get('message') or 'assertion failed'}
    if rec and rec.get('s') == 'exc':
        if rec.get('type') == 'MemoryError':
            return {**res, 'verdict': 'memory_limit'}
        if rec.get('type') == 'OSError' and 'File too large' in rec.get('message', ''):
            return {**res, 'verdict': 'output_limit', 'message': rec.get('message')}
        return {**res, 'verdict': 'runtime_error', 'exception_type': rec.get('type'), 'message': rec.get('message'), 'output': text}
    if mode == 'stdio':
        # A clean exit is enough: os._exit(0) after a flush is a common speed idiom.
        if r['code'] == 0 and (rec is None or rec.get('s') == 'ok'):
            return {**res, 'verdict': 'ran', 'output': text}
        code = rec.get('code') if rec and rec.get('s') == 'exit' else r['code']
        return {**res, 'verdict': 'runtime_error', 'exception_type': 'SystemExit', 'message': 'exit status %s' % code, 'output': text}
    if r['code'] == 0 and rec and rec.get('s') == 'value':
        return {**res, 'verdict': 'ran', 'value': rec.get('value')}
    if r['code'] == 0 and rec and rec.get('s') == 'ok':
        return {**res, 'verdict': 'ran'}
    return {**res, 'verdict': 'runtime_error', 'exception_type': 'SystemExit',
            'message': 'exited (status %s) before the test finished' % r['code']}


def load(msg):
    """Compiles the request's program unless its key is the one loaded. -> compile error or None."""
    key = msg.get('key')
    if key is None or key != STATE['key']:
        STATE.update(key=None, code=None, error=None, entry=msg.get('entry'), prelude=bool(msg.get('prelude')))
        if 'program' not in msg:
            raise KeyError('program %s is not loaded and was not sent' % key)
        try:
            STATE['code'] = compile(msg['program'], '<program>', 'exec', dont_inherit=True)
        except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError) as e:
            STATE['error'] = {'type': _type(e).__name__, 'message': str(e)[:500]}
        STATE['key'] = key
    return STATE['error']


def run_tests(msg):
    """All tests of one program, one forked child each, a reply line per test as it finishes."""
    ce = load(msg)
    if ce is not None:
        return {'ok': False, 'compile_error': ce}
    limits, rid, n = msg['limits'], msg.get('id'), _len(msg['items'])
    for k, item in enumerate(msg['items']):
        mode, payload = item['mode'], item.get('payload') or {}
        try:
            stdin = payload.get('input', '').encode() if mode == 'stdio' else b''
            r = run_child(mode, payload, limits, stdin)
            part = {'k': k, 'result': classify(r, mode, limits, item.get('want_output', False))}
        except Exception as e:  # noqa: BLE001 - this test is a sandbox_error; the next may run
            part = {'k': k, 'error': '%s: %s' % (_type(e).__name__, e)}
        part['id'] = rid
        if k + 1 < n:
            write_message(part)
        else:
            HELD[0] = encode_message(part)  # goes out with the final reply, in one write
    return {'ok': True, 'n': n}


def set_oracle_program(code):
    STATE.update(key=None, code=code, error=None, entry=None, prelude=True)


def handle(msg):
    op = msg.get('op')
    if op == 'ping':
        return {'ok': True, 'seccomp': SECCOMP is not None, 'root': IS_ROOT, 'uid': UID,
                'stack': resource.getrlimit(resource.RLIMIT_STACK)[0]}
    if op == 'run':
        return run_tests(msg)
    if op == 'split':
        # Oracle role: `assert CALL == EXPECTED` -> the two sources, so the expected side is
        # evaluated here and compared in Node, never in the candidate's process.
        out = []
        for src in msg['codes']:
            out.append(split_assert(src))
        return {'ok': True, 'results': out}
    if op == 'eval':
        # Oracle role: evaluate expected-value expressions of asserts, without any program.
        set_oracle_program(compile('', '<empty>', 'exec'))
        out = []
        for src in msg['exprs']:
            r = run_child('expr', {'expr': src}, msg['limits'])
            out.append(classify(r, 'expr', msg['limits'], False))
        return {'ok': True, 'results': out}
    if op == 'check':
        set_oracle_program(compile(msg['checker'], '<checker>', 'exec'))
        expr = 'bool(check(%s, %s, %s))' % (_repr(msg['input']), _repr(msg['output']), _repr(msg['expected']))
        r = run_child('expr', {'expr': expr}, msg['limits'])
        return {'ok': True, 'result': classify(r, 'expr', msg['limits'], False)}
    return {'ok': False, 'error': 'unknown op %r' % op}


def main():
    server_setup()
    # Objects that exist now are never collected: children's GC passes then leave these pages
    # unwritten, so fewer copy-on-write faults per fork.
    gc.collect()
    gc.freeze()
    while True:
        msg = read_message()
        if msg is None:
            return
        try:
            reply = handle(msg)
        except BaseException as e:  # noqa: BLE001 - a server fault is a sandbox_error upstream
            reply = {'ok': False, 'error': '%s: %s' % (_type(e).__name__, e)}
        reply['id'] = msg.get('id')
        held, HELD[0] = HELD[0], b''
        write_message(reply, held)


if __name__ == '__main__':
    main()
