"""What runs in a candidate's child: the program, loaded as a harness loads it, then one test.

- stdio: the program is the main script; its stdin, stdout and stderr are memfds.
- call: the module is imported (`__name__ == "solution"`), the entry point is called once with
  the test's arguments, and the value goes to the judge through the codec.
- serve (assert tests): the module is imported, then every operation the oracle's test body
  asks of the program (calls, attributes, operators) runs here, in order, in this one process,
  until the test ends. Module state therefore carries from one call of a test to the next.

Whatever the mode, the program ends as CPython ends it: non-daemon threads are joined, atexit
handlers run, and buffers are flushed (within the test's limits), then the record is written.

Fds: 0-2 the program's stdio, 7 the channel to the oracle (serve), 8 this child's data (a
length-prefixed JSON header and the marshalled code object), 9 the result record: b'L\\n' once
the module has loaded, then one JSON record. Everything written there is the program's own
claim and is parsed strictly by the server.
"""
import atexit
import builtins
import json
import marshal
import os
import sys

from . import channel, codec

import random as _random_mod
import _random
_reseed, _random_inst = _random.Random.seed, _random_mod._inst

# A program may patch builtins (`builtins.isinstance = lambda *a: True`) in the process this
# module also runs in: its names resolve to the builtins as they were at import.
globals().update({_k: _v for _k, _v in vars(builtins).items() if not _k.startswith('__')})

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
# Modules the prelude imports: a test's name for one of them is the harness's module, never a
# program's definition.
HARNESS_MODULES = frozenset(('sys', 'math', 'itertools', 'collections', 'heapq', 'bisect', 'functools',
                             'string', 're', 'random', 'typing', 'os'))
PROGRAM_FILE = '<program>'
_type = type
_len = len
_write = os.write
_exit = os._exit


def read_data(fd=8):
    """-> (header, code object or None). The server wrote both; no program code has run yet."""
    buf = os.pread(fd, os.fstat(fd).st_size, 0)
    os.close(fd)
    return marshal.loads(buf)


def is_program_defined(v, module_name, depth=0):
    """A function or class the program itself defined (directly, or under a decorator that
    keeps `__wrapped__`): what a test may reach by name."""
    if depth > 8:
        return False
    code = getattr(v, '__code__', None) if _type(v).__name__ in ('function', 'method') else None
    if code is not None:
        return getattr(code, 'co_filename', None) == PROGRAM_FILE
    if isinstance(v, type):
        return getattr(v, '__module__', None) == module_name
    wrapped = getattr(v, '__wrapped__', None) if not isinstance(v, type) else None
    if wrapped is not None:
        return is_program_defined(wrapped, module_name, depth + 1)
    func = getattr(v, 'func', None)  # functools.partial
    return func is not None and is_program_defined(func, module_name, depth + 1)


def resolve_entry(g, entry):
    """The function a test calls: `Class.method` on a fresh instance; for a bare name, the
    program's own definition first, then a method of `class Solution` (as LeetCode and APPS
    harnesses call it), then any other binding of the name (an import)."""
    if not entry:
        raise NameError('no entry point given for a call test')
    if '.' in entry:
        cls, meth = entry.split('.', 1)
        if cls not in g:
            raise NameError("name '%s' is not defined" % cls)
        return getattr(g[cls](), meth)
    v = g.get(entry)
    if v is not None and is_program_defined(v, g.get('__name__')):
        return v
    sol = g.get('Solution')
    if isinstance(sol, type) and hasattr(sol, entry):
        return getattr(sol(), entry)
    if v is not None:
        return v
    raise NameError("name '%s' is not defined" % entry)


def finish():
    """CPython's shutdown, as far as a program can see it: wait for non-daemon threads, run
    atexit handlers, flush what the program buffered."""
    modules = sys.modules
    if 'threading' in modules:
        try:
            modules['threading']._shutdown()
        except BaseException:  # noqa: BLE001
            pass
    if atexit._ncallbacks():
        try:
            atexit._run_exitfuncs()
        except BaseException:  # noqa: BLE001
            pass
    _flush(sys.stdout)
    _flush(sys.stderr)
    if sys.stdout is not sys.__stdout__:
        _flush(sys.__stdout__)


def _flush(s):
    try:
        s.flush()
    except BaseException:  # noqa: BLE001
        pass


def exc_record(e):
    msg = ''
    try:
        msg = BaseException.__str__(e)
    except Exception:  # noqa: BLE001
        pass
    return {'s': 'exc', 'type': _type(e).__name__, 'message': msg[:500]}


_CONSTANT = {'ok': b'{"s":"ok"}', 'served': b'{"s":"served"}'}


def write_record(rec, text=None):
    """The record, last: `text` is a value already encoded (a call's result)."""
    if text is None and _len(rec) == 1 and rec['s'] in _CONSTANT:
        _write(9, _CONSTANT[rec['s']])
        return
    try:
        body = codec._dumps(rec)
        data = (body[:-1] + ',"value":' + text + '}' if text is not None else body).encode()
    except BaseException:  # noqa: BLE001
        data = b'{"s":"exc","type":"SerializationError","message":"result could not be serialized"}'
    try:
        _write(9, data)
    except BaseException:  # noqa: BLE001
        _exit(3)


def load(header, code):
    """Runs the module. -> its globals; raises what the module raised."""
    stdio = header['mode'] == 'stdio'
    g = {'__name__': '__main__' if stdio else 'solution', '__builtins__': builtins}
    if header.get('prelude'):
        exec(PRELUDE_CODE, g)
    exec(code, g)
    return g


def make_child_streams():
    """The child's sys.stdin/stdout/stderr, built once in the server (a child building its own
    costs page copies) while fds 0-2 are, as in every child, fresh memfds at offset 0: the
    objects cache what they learn (seekable, position) and must learn what a child would.
    Undecodable bytes are replaced: a program's output is judged, never its encoding errors."""
    import io
    saved = [os.dup(fd) for fd in (0, 1, 2)]
    blank = os.memfd_create('blank', 0)
    try:
        for fd in (0, 1, 2):
            os.dup2(blank, fd)
        streams = (
            io.TextIOWrapper(io.BufferedReader(io.FileIO(0, 'r', closefd=False)), encoding='utf-8', errors='replace'),
            io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, 'w', closefd=False)), encoding='utf-8', errors='replace'),
            io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, 'w', closefd=False)), encoding='utf-8', errors='replace',
                             line_buffering=True),
        )
    finally:
        for fd, old in zip((0, 1, 2), saved):
            os.dup2(old, fd)
            os.close(old)
        os.close(blank)
    return streams


CHILD_STREAMS = []


def prepare():
    """In the server, before any fork: the child's streams become this process's own sys
    streams (the server writes to fds directly), so no child pays for replacing them, and
    no atexit handler of the server's modules is left for a child to run."""
    CHILD_STREAMS[:] = make_child_streams()
    keep = (sys.stdin, sys.stdout, sys.stderr)
    CHILD_STREAMS.extend(keep)  # the interpreter's own streams are never freed in a child
    sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__ = CHILD_STREAMS[:3]
    atexit._clear()


def main():
    """The child's whole life after its setup. Never returns."""
    _reseed(_random_inst, None)  # what random's at-fork hook would do: a fresh seed per child
    header, code = read_data()
    mode = header['mode']
    rec, text = None, None
    try:
        if mode == 'stdio':
            try:
                load(header, code)
                rec = {'s': 'ok'}
            except SystemExit as e:
                c = e.code
                rec = {'s': 'ok'} if c is None or c == 0 else {'s': 'exit', 'code': c if _type(c) is int else 1}
        else:
            g = load(header, code)
            _write(9, b'L\n')
            if mode == 'call':
                fn = resolve_entry(g, header.get('entry'))
                args = codec.decode(header['args'])
                value = fn(*args)
                try:
                    text = codec.Encoder(limit=header['limit']).dumps(value)
                    rec = {'s': 'value'}
                except codec.Oversize:
                    rec = {'s': 'oversize'}
                except (codec.EncodeError, RecursionError) as e:
                    rec = {'s': 'exc', 'type': 'TypeError', 'message': 'the returned value cannot be judged: %s' % str(e)[:200]}
            else:
                rec = serve(g, header)
    except MemoryError:
        rec = {'s': 'memory'}
    except SystemExit as e:
        rec = {'s': 'exc', 'type': 'SystemExit', 'message': repr(e.code)[:200]}
    except BaseException as e:  # noqa: BLE001 - every candidate failure is reported
        rec = exc_record(e)
        if mode == 'serve':
            _tell_load_error()
    finish()
    write_record(rec, text)
    _exit(0)


def _tell_load_error():
    try:
        channel.Peer(7, 1 << 16, frozenset()).send(['load_error'])
    except BaseException:  # noqa: BLE001
        pass


def serve(g, header, fd=7):
    """Answers the oracle until the test ends. -> the record."""
    peer = channel.Peer(fd, header['limit'], channel.REQUESTS)
    try:
        hello = peer.recv()
        if hello[0] != 'hello' or len(hello) != 3 or _type(hello[1]) is not list:
            return {'s': 'served'}
        exports = {}
        enc = peer.encoder()
        for name in hello[1]:
            if _type(name) is str and name in g and is_program_defined(g[name], g['__name__']):
                exports[name] = enc.enc(g[name], 0)
        entry, entry_error = None, None
        if _type(hello[2]) is str and hello[2]:
            try:
                entry = enc.enc(resolve_entry(g, hello[2]), 0)
            except Exception as e:  # noqa: BLE001 - the test sees it when it calls the candidate
                entry_error = exc_record(e)
        peer.send(['ready', exports, entry, entry_error])
        while True:
            msg = peer.recv()
            if msg[0] == 'end':
                break
            if msg[0] not in channel.REQUESTS:
                break
            peer.serve(msg)
    except codec.Oversize:
        return {'s': 'oversize'}
    except (channel.ChannelClosed, channel.ChannelBroken):
        pass
    return {'s': 'served'}
