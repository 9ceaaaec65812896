"""crucible's fork-server: the entry point Node starts (inside bubblewrap when available).

The work is in the `crucible_sandbox` package beside this file: `server` (the coordinator and
the launcher), `harness` (a candidate's child), `oracle` (an assert test's body, checkers),
`channel` (calls between the two), `codec` (values), `limits` (rlimits, seccomp, cgroups,
namespaces, run directories). This file prepares the interpreter every child inherits.
"""
import os
import resource
import sys

# Deep recursion (lru_cache chains) needs a big C stack; the main thread's stack can only grow to
# the limit in force at exec time, so re-exec once with a large one.
BIG_STACK = 1 << 30
_soft, _hard = resource.getrlimit(resource.RLIMIT_STACK)
if _soft != resource.RLIM_INFINITY and _soft < BIG_STACK and os.environ.get('CRUCIBLE_REEXEC') != '1':
    if _hard == resource.RLIM_INFINITY or _hard >= BIG_STACK:
        resource.setrlimit(resource.RLIMIT_STACK, (BIG_STACK, _hard))
        os.environ['CRUCIBLE_REEXEC'] = '1'
        os.execv(sys.executable, [sys.executable] + sys.orig_argv[1:])

import _thread
# Threads would otherwise reserve the (huge) main stack size each, defeating RLIMIT_AS. Set
# through _thread: importing `threading` here would leave its at-fork hook in every child.
_thread.stack_size(16 << 20)
# Python's int-to-str limit would turn a correct 10**5000 answer into a runtime_error.
sys.set_int_max_str_digits(0)

# Modules programs commonly import, loaded once here so children start warm. random registers
# an at-fork hook when imported; it is imported without it and each child reseeds itself.
import bisect, collections, copy, decimal, fractions, functools, heapq, itertools, re, \
    string, typing, operator  # noqa: E401,F401
_register_at_fork = os.register_at_fork
os.register_at_fork = lambda **kw: None
try:
    import random, statistics  # noqa: E401,F401
finally:
    os.register_at_fork = _register_at_fork

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from crucible_sandbox import server  # noqa: E402
del sys.path[0]  # a program's own imports never find the harness's modules by accident

if __name__ == '__main__':
    server.main()
