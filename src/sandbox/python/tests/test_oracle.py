"""The oracle's side: the names a test reaches, compiling tests, and whole assert tests run
against a forked candidate (harness.serve on the other end of a socketpair)."""
import ast
import json
import math
import os
import signal
import socket
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from crucible_sandbox import channel, harness, oracle  # noqa: E402


def free(src):
    return oracle.free_names(ast.parse(src))


class Names(unittest.TestCase):
    def test_free_names(self):
        cases = {
            'assert f(x) == 1': {'f', 'x'},
            'def g(y):\n    return y + z\nassert g(1)': {'z'},
            'import math\nfrom collections import deque as dq\nimport os.path\nassert math.gcd(1, 2) and dq and os': set(),
            'try:\n    f()\nexcept ValueError as e:\n    print(e)': {'f', 'ValueError', 'print'},
            'assert [i * k for i in r]': {'k', 'r'},
            'class K:\n    pass\nassert K() != candidate(1)': {'candidate'},
            'h = lambda a, *b, c=1, **d: a + w\n': {'w'},
            'x = f()\nassert x': {'f'},
            'for (a, b) in pairs:\n    assert a < b': {'pairs'},
            'with open(p) as fh:\n    pass': {'open', 'p'},
            'async def co(q):\n    await q\n': set(),
            'assert (n := f(1)) and n': {'f'},
        }
        for src, want in cases.items():
            with self.subTest(src=src):
                self.assertEqual(free(src), want)

    def test_wanted_names_never_builtins_harness_modules_or_candidate(self):
        src = ('assert f(len(x)) and math.sqrt(2) and candidate(1) and Counter and Solution and print and ValueError '
               'and collections and typing and os and sys and re and heapq and ListNode')
        self.assertEqual(oracle.wanted_names(free(src)), ['Counter', 'ListNode', 'Solution', 'f', 'x'])
        self.assertEqual(oracle.wanted_names({'zeta', 'alpha', 'len', 'candidate'}), ['alpha', 'zeta'])
        for n in harness.HARNESS_MODULES:
            self.assertEqual(oracle.wanted_names({n}), [])

    def test_test_globals_are_fresh_copies_with_the_prelude(self):
        g = oracle.test_globals()
        self.assertIs(g['gcd'], math.gcd)
        self.assertIn('Counter', g)
        g['gcd'] = 'changed'
        self.assertIs(oracle.test_globals()['gcd'], math.gcd)
        self.assertIsNot(oracle.test_globals(), oracle.test_globals())


class PrepareTest(unittest.TestCase):
    def test_compiles_and_lists_free_names(self):
        code, names, err = oracle.prepare_test('assert f(1) == g\nx = 2\n')
        self.assertIsNone(err)
        self.assertEqual(names, ['f', 'g'])
        self.assertEqual(code.co_filename, '<test>')
        g = {'f': lambda n: n, 'g': 1}
        exec(code, g)
        self.assertEqual(g['x'], 2)

    def test_compile_errors_are_records(self):
        sources = ['assert (', 'return 1', 'break', 'nonlocal q', 'await x', 'def f(:\n', 'x = \x00',
                   '(' * 300 + ')' * 300, '-' * 100000 + '1', 'x = ' + '9' * 5000, 'f"{x!z}"', '\ud800 = 1']
        for src in sources:
            with self.subTest(src=src[:30]):
                code, names, err = oracle.prepare_test(src)
                if err is None:
                    # Only a huge int literal may compile (where the int digit limit is off).
                    self.assertTrue(src.startswith('x = 9'), src[:30])
                    continue
                self.assertIsNone(code)
                self.assertIsNone(names)
                self.assertEqual(set(err), {'s', 'type', 'message'})
                self.assertEqual(err['s'], 'exc')
                self.assertIsInstance(err['type'], str)
                self.assertTrue(err['message'].startswith('the test does not compile: '), err)


def _alarm(signum, frame):
    raise TimeoutError('the assert test hung')


class RunAssert(unittest.TestCase):
    """oracle.run_assert here, the candidate (harness.serve) in a forked child."""

    def setUp(self):
        self.old = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(30)

    def tearDown(self):
        signal.alarm(0)
        signal.signal(signal.SIGALRM, self.old)
        channel.ACTIVE[0] = None

    def fork_candidate(self, program, entry, sock, keep=()):
        pid = os.fork()
        if pid == 0:
            try:
                signal.alarm(30)
                for s in keep:
                    s.close()
                try:
                    g = harness.load({'mode': 'serve', 'prelude': True}, compile(program, harness.PROGRAM_FILE, 'exec'))
                except BaseException:  # noqa: BLE001 - what harness.main tells the oracle
                    channel.Peer(sock.fileno(), 1 << 16, frozenset()).send(['load_error'])
                    os._exit(1)
                harness.serve(g, {'limit': 1 << 20, 'entry': entry}, sock.fileno())
            finally:
                os._exit(0)
        return pid

    def run_test(self, program, test, entry='f'):
        code, names, err = oracle.prepare_test(test)
        self.assertIsNone(err)
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = self.fork_candidate(program, entry, b, keep=(a,))
        b.close()
        try:
            return oracle.run_assert({'test_code': code, 'free': names, 'entry': entry, 'limit': 1 << 20}, a.fileno())
        finally:
            a.close()
            os.waitpid(pid, 0)

    PROG = 'def f(x):\n    return x + 1\n'

    def test_outcomes(self):
        cases = [
            (self.PROG, 'assert f(1) == 2', {'s': 'ok'}),
            (self.PROG, 'assert candidate(1) == 2 and f(2) == 3', {'s': 'ok'}),
            (self.PROG, 'assert f(1) == 3', {'s': 'assert_fail', 'message': 'assertion failed'}),
            (self.PROG, 'assert f(1) == 3, "nope"', {'s': 'assert_fail', 'message': 'nope'}),
            (self.PROG, 'def check(candidate):\n    assert candidate(1) == 2\n', {'s': 'ok'}),
            (self.PROG, 'def check(candidate):\n    assert candidate(1) == 5\n', {'s': 'assert_fail', 'message': 'assertion failed'}),
            (self.PROG, '1 / 0', {'s': 'exc', 'type': 'ZeroDivisionError', 'message': 'division by zero'}),
            ('def f(x):\n    raise KeyError(x)\n', 'f(7)', {'s': 'cand_exc', 'type': 'KeyError', 'message': '7'}),
            ('def f(x):\n    raise KeyError(x)\n', 'try:\n    f(7)\nexcept KeyError:\n    pass', {'s': 'ok'}),
            ('class E(ValueError):\n    pass\ndef f(x):\n    raise E("no")\n',
             'try:\n    f(1)\nexcept E as e:\n    assert e.args == ("no",)', {'s': 'ok'}),
            ('def f(x):\n    import os\n    os._exit(0)\n', 'f(1)', {'s': 'cand_gone'}),
            # A body that swallows the candidate's end still lost its candidate.
            ('def f(x):\n    import os\n    os._exit(0)\n', 'try:\n    f(1)\nexcept BaseException:\n    pass',
             {'s': 'cand_gone'}),
            ('def g(x):\n    return x\n', 'candidate(1)', {'s': 'cand_exc', 'type': 'NameError', 'message': "name 'f' is not defined"}),
            ('raise RuntimeError("at load")\n', 'f(1)', {'s': 'cand_load'}),
            ('class ListNode:\n    def __init__(self, v, nxt=None):\n        self.v, self.nxt = v, nxt\n'
             'def f(n):\n    return ListNode(n.v + 1, n.nxt)\n',
             'r = f(ListNode(1, ListNode(5)))\nassert isinstance(r, ListNode) and r == ListNode(2, ListNode(5))',
             {'s': 'ok'}),
            ('def f(rows):\n    rows[0].sort()\n', 'rows = [[3, 1]]\nf(rows)\nassert rows == [[1, 3]]', {'s': 'ok'}),
            ('def f(cb):\n    return cb(20) + 1\n', 'assert f(lambda v: v * 2) == 41', {'s': 'ok'}),
        ]
        for program, test, want in cases:
            with self.subTest(test=test):
                self.assertEqual(self.run_test(program, test), want)

    def test_a_candidate_cannot_run_code_in_the_oracle(self):
        r, w = os.pipe()
        code, names, _ = oracle.prepare_test('assert f(1) == 2')
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        program = ('import sys\n'
                   'def f(x):\n'
                   '    ch = sys.modules["crucible_sandbox.channel"]\n'
                   '    ch.ACTIVE[0].request("call", {"$builtin": "exec"},\n'
                   '                         ("import os; os.write(%d, b\'FORGED\'); os._exit(0)",), {})\n'
                   '    return 0\n' % w)
        cpid = self.fork_candidate(program, 'f', b, keep=(a,))
        opid = os.fork()
        if opid == 0:  # the oracle in its own child: the payload would end this process
            try:
                signal.alarm(30)
                b.close()
                os.close(r)
                rec = oracle.run_assert({'test_code': code, 'free': names, 'entry': 'f', 'limit': 1 << 20}, a.fileno())
                os.write(w, json.dumps(rec).encode())
            finally:
                os._exit(0)
        a.close()
        b.close()
        os.close(w)
        out = b''
        while True:
            chunk = os.read(r, 1000)
            if not chunk:
                break
            out += chunk
        os.close(r)
        os.waitpid(cpid, 0)
        os.waitpid(opid, 0)
        # Asking the oracle for a builtin breaks the channel: the program's malformed result.
        self.assertNotEqual(out, b'FORGED')
        self.assertEqual(json.loads(out)['s'], 'cand_broken')


if __name__ == '__main__':
    unittest.main()
