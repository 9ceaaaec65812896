"""The candidate's side: which function a call test reaches, what counts as the program's own
definition, and CPython's shutdown (threads joined, atexit handlers run)."""
import functools
import math
import os
import signal
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from crucible_sandbox import harness  # noqa: E402


def load(source, prelude=False, mode='call'):
    """The program's globals, as a candidate's child makes them."""
    return harness.load({'mode': mode, 'prelude': prelude}, compile(source, harness.PROGRAM_FILE, 'exec'))


def outside():  # a function compiled from this file, not from <program>
    return 0


class ResolveEntry(unittest.TestCase):
    def test_program_function_first(self):
        g = load('def gcd(a, b):\n    return "mine"\nclass Solution:\n    def gcd(self, a, b):\n        return "method"\n',
                 prelude=True)
        self.assertEqual(harness.resolve_entry(g, 'gcd')(1, 2), 'mine')

    def test_solution_method_before_a_prelude_import(self):
        g = load('class Solution:\n    def gcd(self, a, b):\n        return "method"\n', prelude=True)
        self.assertIs(g['gcd'], math.gcd)  # the prelude did bind it
        f = harness.resolve_entry(g, 'gcd')
        self.assertEqual(f(4, 6), 'method')
        self.assertIsInstance(f.__self__, g['Solution'])

    def test_other_bindings_last(self):
        g = load('x = 1\n', prelude=True)
        self.assertIs(harness.resolve_entry(g, 'gcd'), math.gcd)
        g = load('from math import gcd as g2\n')
        self.assertIs(harness.resolve_entry(g, 'g2'), math.gcd)

    def test_dotted_entry_on_a_fresh_instance(self):
        g = load('class Solution:\n    n = 0\n    def __init__(self):\n        Solution.n += 1\n'
                 '    def twice(self, x):\n        return 2 * x\n')
        f = harness.resolve_entry(g, 'Solution.twice')
        self.assertEqual(f(21), 42)
        self.assertEqual(g['Solution'].n, 1)
        harness.resolve_entry(g, 'Solution.twice')
        self.assertEqual(g['Solution'].n, 2)  # a new instance each time
        with self.assertRaises(NameError):
            harness.resolve_entry(g, 'Nope.twice')
        with self.assertRaises(AttributeError):
            harness.resolve_entry(g, 'Solution.nope')

    def test_missing_entries(self):
        g = load('def f():\n    pass\nclass Solution:\n    pass\n')
        for entry in ('g', '', None):
            with self.subTest(entry=entry):
                with self.assertRaises(NameError):
                    harness.resolve_entry(g, entry)

    def test_module_name_by_mode(self):
        self.assertEqual(load('n = __name__\n')['n'], 'solution')
        self.assertEqual(load('n = __name__\n', mode='stdio')['n'], '__main__')
        self.assertNotIn('gcd', load('x = 1\n'))  # no prelude unless asked


class IsProgramDefined(unittest.TestCase):
    def test_definitions(self):
        g = load('import functools\n'
                 'def f():\n    return 1\n'
                 'class C:\n    def m(self):\n        return 2\n'
                 '@functools.lru_cache(maxsize=None)\n'
                 'def cached(n):\n    return n\n'
                 '@functools.cache\ndef cached2(n):\n    return n\n'
                 'p = functools.partial(f)\n'
                 'lam = lambda: 0\n'
                 'from math import gcd\nfrom collections import Counter\n', prelude=True)
        name = g['__name__']
        for key in ('f', 'C', 'cached', 'cached2', 'p', 'lam'):
            with self.subTest(key=key):
                self.assertTrue(harness.is_program_defined(g[key], name))
        self.assertTrue(harness.is_program_defined(g['C']().m, name))
        for v in (math.gcd, g['gcd'], g['Counter'], len, outside, functools.partial(outside), 5, 'f', None,
                  functools.lru_cache(maxsize=None)(outside), g['functools']):
            with self.subTest(v=v):
                self.assertFalse(harness.is_program_defined(v, name))
        # A class of another module, even with the program's name elsewhere.
        self.assertFalse(harness.is_program_defined(g['C'], 'other'))

    def test_wrapper_chains_are_bounded(self):
        class W:
            pass
        w = W()
        w.__wrapped__ = w  # a cycle of __wrapped__: False, not a RecursionError
        self.assertFalse(harness.is_program_defined(w, 'solution'))


def read_all(fd):
    out = b''
    while True:
        b = os.read(fd, 100)
        if not b:
            os.close(fd)
            return out
        out += b


class Finish(unittest.TestCase):
    def test_joins_threads_and_runs_atexit_in_order(self):
        # In a forked child: finish() runs this process's atexit handlers and joins threads.
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                signal.alarm(20)
                os.close(r)
                import atexit
                import threading
                import time
                atexit._clear()  # the test runner's own handlers are not the program's
                os.write(w, b'S')

                def late():
                    time.sleep(0.3)
                    os.write(w, b'T')
                threading.Thread(target=late).start()
                threading.Thread(target=lambda: (time.sleep(5), os.write(w, b'D')), daemon=True).start()
                atexit.register(os.write, w, b'A')
                atexit.register(os.write, w, b'B')  # atexit runs last-registered first
                harness.finish()
                os.write(w, b'F')
            finally:
                os._exit(0)
        os.close(w)
        out = read_all(r)
        os.waitpid(pid, 0)
        self.assertEqual(out, b'STBAF')

    def test_a_failing_atexit_handler_does_not_escape(self):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                import atexit
                atexit._clear()
                sys.stderr = open(os.devnull, 'w')  # atexit prints the handler's traceback

                def bad():
                    raise SystemExit(3)
                atexit.register(os.write, w, b'A')
                atexit.register(bad)
                harness.finish()
                os.write(w, b'F')
            finally:
                os._exit(0)
        os.close(w)
        out = read_all(r)
        os.waitpid(pid, 0)
        self.assertEqual(out, b'AF')  # the next handler ran, then finish() returned


class Records(unittest.TestCase):
    def test_exc_record(self):
        self.assertEqual(harness.exc_record(ValueError('bad', 2)), {'s': 'exc', 'type': 'ValueError', 'message': "('bad', 2)"})

        class E(Exception):
            def __str__(self):
                raise RuntimeError('no')
        rec = harness.exc_record(E('x'))
        self.assertEqual((rec['type'], rec['message']), ('E', 'x'))  # BaseException.__str__, not the program's
        self.assertEqual(len(harness.exc_record(KeyError('k' * 2000))['message']), 500)


if __name__ == '__main__':
    unittest.main()
