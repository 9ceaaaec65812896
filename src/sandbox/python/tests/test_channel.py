"""The channel between an oracle and a candidate: two Peers over a socketpair, the candidate
side in a forked child (channel.ACTIVE is per process), or raw frames written by the test."""
import json
import os
import signal
import socket
import struct
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from crucible_sandbox import channel, codec  # noqa: E402

ORACLE_ALLOW = frozenset(('call',))

PROGRAM = '''
import os


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def norm1(self):
        return abs(self.x) + abs(self.y)

    def __eq__(self, other):  # lies: equality of proxies must never ask it
        return True

    __hash__ = object.__hash__

    def __len__(self):
        return 2

    def __iter__(self):
        return iter([self.x, self.y])


class Slotted:
    __slots__ = ('a',)

    def __init__(self, a):
        self.a = a


class MyError(ValueError):
    pass


def add(a, b=0, *, c=0):
    return a + b + c


def ident(a):
    return a


def pair(a):
    return [a, a]


def sort_first(rows):
    rows[0].sort()
    rows.append(99)


def grow_inner(t):
    t[0].append('x')
    t[1]['k'] = 'v'


def boom(msg):
    raise ValueError(msg)


def boom_mine(msg):
    raise MyError(msg, 2)


def apply(f, *xs):
    return f(*xs)


def peek(f):
    return f.__code__


def poke(f):
    f.attr = 1


def make(x, y):
    return Point(x, y)


def slotted(a):
    return Slotted(a)


def big(n):
    return 'x' * n


def die():
    os._exit(0)


def kinds(*xs, **kw):
    return [type(x).__name__ for x in xs] + sorted(kw)
'''

# How the candidate child ended (its exit status).
END, CLOSED, BROKEN, OVERSIZE, OTHER = 0, 2, 3, 4, 5


def _serve_child(sock, limit):
    """The candidate's side: exports the program's names, then serves until 'end'."""
    code = OTHER
    try:
        signal.alarm(60)  # a stuck test never leaves this child behind
        g = {'__name__': 'solution'}
        exec(compile(PROGRAM, '<program>', 'exec'), g)
        peer = channel.Peer(sock.fileno(), limit, channel.REQUESTS)
        enc = peer.encoder()
        peer.send(['ready', {k: enc.enc(v, 0) for k, v in g.items() if not k.startswith('__') and k != 'os'}])
        while True:
            msg = peer.recv()
            if msg[0] == 'end':
                code = END
                break
            peer.serve(msg)
    except channel.ChannelClosed:
        code = CLOSED
    except channel.ChannelBroken:
        code = BROKEN
    except codec.Oversize:
        code = OVERSIZE
    finally:
        os._exit(code)


class Candidate:
    """A forked candidate and the oracle's Peer for it (in this process)."""

    def __init__(self, child_limit=1 << 20, limit=1 << 20):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            a.close()
            _serve_child(b, child_limit)
        b.close()
        self.sock, self.pid, self.status = a, pid, None
        self.peer = channel.Peer(a.fileno(), limit, ORACLE_ALLOW)
        ready = self.peer.recv()
        d = self.peer.decoder()
        self.ns = {k: d.dec(v, 0) for k, v in ready[1].items()}

    def __getattr__(self, name):  # the program's exported names
        if name == 'ns':
            raise AttributeError(name)
        return self.ns[name]

    def end(self):
        if self.status is None:
            try:
                self.peer.send(['end'])
            except BaseException:  # noqa: BLE001 - the child may be gone already
                pass
            self.status = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
            self.sock.close()
        return self.status


def _alarm(signum, frame):
    raise TimeoutError('the channel test hung')


class ChannelCase(unittest.TestCase):
    def setUp(self):
        self.old = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(30)
        self.cands = []

    def tearDown(self):
        for c in self.cands:
            c.end()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, self.old)
        channel.ACTIVE[0] = None

    def cand(self, **kw):
        c = Candidate(**kw)
        self.cands.append(c)
        return c


class Calls(ChannelCase):
    def test_args_kwargs_and_value_types(self):
        c = self.cand()
        self.assertEqual(c.add(1, 2, c=3), 6)
        self.assertEqual(c.add(1), 1)
        self.assertEqual(c.add('a', b='b', c='c'), 'abc')
        self.assertEqual(c.kinds(3.0, 3, True, 2 ** 60, (1,), {1}, b'x', None, k=1, j=2),
                         ['float', 'int', 'bool', 'int', 'tuple', 'set', 'bytes', 'NoneType', 'j', 'k'])
        with self.assertRaises(TypeError):  # the candidate's own TypeError, as Python raises it
            c.add()
        self.assertIsNone(c.peer.failure)
        self.assertEqual(c.end(), END)

    def test_result_aliasing_an_argument_is_the_callers_object(self):
        c = self.cand()
        a = [1, 2]
        self.assertIs(c.ident(a), a)
        r = c.pair(a)
        self.assertIs(r[0], a)
        self.assertIs(r[1], a)
        d = {'k': [1]}
        self.assertIs(c.ident(d), d)
        inner = [5]
        self.assertIs(c.ident((inner,))[0], inner)

    def test_writeback_of_nested_lists_and_lists_in_tuples(self):
        c = self.cand()
        rows = [[3, 1, 2], [5, 4]]
        first, second = rows
        self.assertIsNone(c.sort_first(rows))
        self.assertEqual(rows, [[1, 2, 3], [5, 4], 99])
        self.assertIs(rows[0], first)
        self.assertIs(rows[1], second)
        lst, dct = [1], {'a': 1}
        t = (lst, dct)
        c.grow_inner(t)
        self.assertEqual(lst, [1, 'x'])
        self.assertEqual(dct, {'a': 1, 'k': 'v'})
        self.assertIs(t[0], lst)

    def test_exceptions_keep_builtin_classes_and_program_subclasses(self):
        c = self.cand()
        with self.assertRaises(ValueError) as cm:
            c.boom('bad')
        self.assertIs(type(cm.exception), ValueError)
        self.assertEqual(cm.exception.args, ('bad',))
        try:
            c.boom_mine('mine')
        except ValueError as e:  # a program's subclass is caught by the builtin's except
            self.assertIsNot(type(e), ValueError)
            self.assertEqual(type(e).__name__, 'MyError')
            self.assertEqual(e.args, ('mine', 2))
            self.assertIsInstance(e, c.MyError)  # the same local class as the exported one
        else:
            self.fail('no exception')
        self.assertIsNone(c.peer.failure)  # an exception is an answer, not a failure


class Handles(ChannelCase):
    def test_attributes_methods_len_iteration_isinstance(self):
        c = self.cand()
        p = c.make(1, -2)
        self.assertIsInstance(p, c.Point)
        self.assertIs(type(p), c.Point)
        self.assertNotIsInstance(p, c.Slotted)
        self.assertEqual(p.x, 1)
        self.assertEqual(p.norm1(), 3)
        p.x = 5
        self.assertEqual(p.x, 5)
        self.assertEqual(p.norm1(), 7)
        self.assertEqual(len(p), 2)
        self.assertEqual(list(p), [5, -2])
        with self.assertRaises(AttributeError):
            p.nosuch
        del p.x
        with self.assertRaises(AttributeError):
            p.x
        q = c.Point(3, 4)  # the class constructs in the candidate's process
        self.assertIsInstance(q, c.Point)
        self.assertEqual(q.norm1(), 7)
        # The same remote object comes back as the same proxy.
        self.assertIs(c.ident(q), q)

    def test_structural_equality_never_uses_the_remote_eq(self):
        c = self.cand()
        a, b, other = c.make(1, 2), c.make(1, 2), c.make(1, 3)
        self.assertTrue(a == a)
        self.assertTrue(a == b)
        self.assertFalse(a != b)
        self.assertFalse(a == other)  # Point.__eq__ says True: not asked
        self.assertTrue(a != other)
        self.assertFalse(a == 5)
        self.assertFalse(a == c.slotted(1))
        self.assertTrue(c.slotted(1) == c.slotted(1))
        self.assertFalse(c.slotted(1) == c.slotted(2))
        self.assertTrue(c.make(c.make(1, 2), 3) == c.make(c.make(1, 2), 3))
        self.assertFalse(c.make(c.make(1, 2), 3) == c.make(c.make(1, 9), 3))


class Callbacks(ChannelCase):
    def test_candidate_calls_a_function_of_the_oracle(self):
        c = self.cand()
        seen = []

        def mul(x, y):
            seen.append((x, y))
            return x * y
        self.assertEqual(c.apply(mul, 6, 7), 42)
        self.assertEqual(seen, [(6, 7)])
        self.assertEqual(c.apply(sorted, [3, 1, 2]), [1, 2, 3])

        def fails():
            raise KeyError('k')
        with self.assertRaises(KeyError):
            c.apply(fails)

    def test_oracle_refuses_anything_but_calls(self):
        c = self.cand()
        with self.assertRaises(Exception) as cm:
            c.peek(lambda: 0)
        self.assertEqual(type(cm.exception).__name__, 'Refused')
        with self.assertRaises(Exception) as cm:
            c.poke(lambda: 0)
        self.assertEqual(type(cm.exception).__name__, 'Refused')
        self.assertIsNone(c.peer.failure)
        self.assertEqual(c.add(1, 1), 2)  # the channel still works


class Failures(ChannelCase):
    def test_frame_over_the_receivers_limit(self):
        c = self.cand(limit=1000)
        self.assertEqual(c.big(100), 'x' * 100)
        with self.assertRaises(channel.ChannelBroken) as cm:
            c.big(5000)
        self.assertTrue(cm.exception.oversize)
        self.assertEqual(c.peer.failure, {'s': 'cand_oversize'})
        with self.assertRaises(channel.ChannelClosed):  # nothing more after a failure
            c.add(1)

    def test_value_over_the_senders_limit(self):
        c = self.cand(child_limit=1000)
        with self.assertRaises(channel.ChannelClosed):
            c.big(5000)
        self.assertEqual(c.peer.failure, {'s': 'cand_gone'})
        self.assertEqual(c.end(), OVERSIZE)  # the candidate's own encoder refused it

    def test_other_side_exiting(self):
        c = self.cand()
        with self.assertRaises(channel.ChannelClosed):
            c.die()
        self.assertEqual(c.peer.failure, {'s': 'cand_gone'})
        with self.assertRaises(channel.ChannelClosed):
            c.add(1)


def frame(obj):
    data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return struct.pack('>I', len(data)) + data


class RawFrames(ChannelCase):
    """The oracle's Peer against frames this test writes (no child)."""

    LIMIT = 1 << 18

    def setUp(self):
        super().setUp()
        self.a = self.b = None
        self.fresh()

    def fresh(self):
        """A new socket pair and oracle Peer (each case of a loop starts clean)."""
        self.close()
        self.a, self.b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.peer = channel.Peer(self.a.fileno(), self.LIMIT, ORACLE_ALLOW)

    def close(self):
        for s in (self.a, self.b):
            if s is not None:
                s.close()

    def tearDown(self):
        self.close()
        super().tearDown()

    def call(self, *frames, args=()):
        """The oracle calls the candidate's handle 1; `frames` are already waiting for it."""
        # From a thread: frames bigger than the socket's buffer would block this one.
        w = threading.Thread(target=self.b.sendall, args=(b''.join(frames),))
        w.start()
        try:
            return self.peer.request('call', {'$p': 1}, tuple(args), {})
        finally:
            w.join()

    def sent(self):
        """Frames the oracle wrote, after its request."""
        self.b.setblocking(False)
        buf = b''
        try:
            while True:
                chunk = self.b.recv(65536)
                if not chunk:
                    break
                buf += chunk
        except BlockingIOError:
            pass
        out = []
        while buf:
            (n,) = struct.unpack('>I', buf[:4])
            out.append(json.loads(buf[4:4 + n]))
            buf = buf[4 + n:]
        return out

    def test_a_plain_reply(self):
        self.assertEqual(self.call(frame(['ret', 1, [], {'$tuple': [1, {'$float': '2.0'}]}])), (1, 2.0))
        self.assertEqual(self.sent(), [['call', 1, {'$p': 1}, [], []]])
        self.assertIsNone(self.peer.failure)

    def test_writeback_applied_in_place(self):
        arg = [3, 2, 1]
        self.assertIsNone(self.call(frame(['ret', 1, [[1, [1, 2]]], None]), args=(arg,)))
        self.assertEqual(arg, [1, 2])

    def test_garbage_frames_break_the_channel(self):
        cases = [
            b'\x00\x00\x00\x03abc', frame(b'{}'), frame(b'[]'), frame(b'[1]'), frame(b'"x"'), frame(b'\xff\xfe'),
            frame(b'[' * 100000), frame(['hello']), frame(['ret', 1, 5, 0]), frame(['ret', 1, [[99, []]], 0]),
            frame(['ret', 1, [[0, {'$dict': []}]], 0]), frame(['ret', 1, [], {'$nosuch': 1}]),
            frame(['ret', 1, [], {'$p': 12345}]), frame(['exc', 1, [], 5]), frame(['call', 'x', 1]),
            frame(['ret', 1, [], {'$h': 1, 'c': {'id': 1}}]),
        ]
        for f in cases:
            with self.subTest(frame=f[:40]):
                self.fresh()
                with self.assertRaises(channel.ChannelBroken) as cm:
                    self.call(f)
                self.assertFalse(cm.exception.oversize)
                self.assertEqual(self.peer.failure['s'], 'cand_broken')
                self.assertIsInstance(self.peer.failure['why'], str)

    def test_a_frame_over_the_limit(self):
        with self.assertRaises(channel.ChannelBroken) as cm:
            self.call(struct.pack('>I', self.LIMIT + 1))  # the header alone decides
        self.assertTrue(cm.exception.oversize)
        self.assertEqual(self.peer.failure, {'s': 'cand_oversize'})
        # A frame of exactly the limit is read.
        self.fresh()
        n = self.LIMIT - len(json.dumps(['ret', 1, [], '']))
        body = json.dumps(['ret', 1, [], 'y' * n]).encode()
        self.assertEqual(len(body), self.LIMIT)
        self.assertEqual(self.call(frame(body)), 'y' * n)

    def test_sending_over_the_limit(self):
        with self.assertRaises(codec.Oversize):
            self.peer.request('call', {'$p': 1}, ('x' * self.LIMIT,), {})

    def test_closed_and_ended(self):
        self.b.sendall(struct.pack('>I', 50) + b'[')
        self.b.close()
        with self.assertRaises(channel.ChannelClosed):
            self.peer.request('call', {'$p': 1}, (), {})
        self.assertEqual(self.peer.failure, {'s': 'cand_gone'})
        self.fresh()
        with self.assertRaises(channel.ChannelClosed):
            self.call(frame(['end']))
        self.assertEqual(self.peer.failure, {'s': 'cand_gone'})

    def test_refused_requests_are_answered_with_refused(self):
        def victim():
            raise AssertionError('never called')
        victim_handle = self.peer.export(victim)['$h']
        reqs = [['getattr', 7, {'$p': victim_handle}, '__globals__'],
                ['setattr', 8, {'$p': victim_handle}, 'x', 1],
                ['delattr', 9, {'$p': victim_handle}, '__name__'],
                ['op', 10, {'$p': victim_handle}, 'repr', []],
                ['state', 11, {'$p': victim_handle}]]
        self.assertEqual(self.call(*[frame(r) for r in reqs], frame(['ret', 1, [], 'done'])), 'done')
        replies = self.sent()[1:]
        self.assertEqual([r[:2] for r in replies], [['exc', 7], ['exc', 8], ['exc', 9], ['exc', 10], ['exc', 11]])
        # The class is described once, then named by its id.
        self.assertEqual(replies[0][3]['$exc']['n'], 'Refused')
        self.assertEqual({r[3]['$exc']['id'] for r in replies}, {replies[0][3]['$exc']['id']})
        self.assertIsNone(self.peer.failure)
        self.assertEqual(victim.__name__, 'victim')

    def test_a_call_of_what_the_oracle_passed_is_served(self):
        got = []
        h = self.peer.export(lambda x: got.append(x) or x * 2)['$h']
        self.assertEqual(self.call(frame(['call', 7, {'$p': h}, [21], []]), frame(['ret', 1, [], 0])), 0)
        self.assertEqual(self.sent()[1], ['ret', 7, [], 42])
        self.assertEqual(got, [21])

    # A target named by value ({"$builtin": "exec"}) would let the other side run code here:
    # only this side's own handles are served, and anything else breaks the channel.
    def test_a_call_of_a_builtin_is_refused(self):
        with self.assertRaises(channel.ChannelBroken):
            self.call(frame(['call', 7, {'$builtin': 'len'}, [[1, 2, 3]], []]), frame(['ret', 1, [], 0]))
        self.assertEqual(self.peer.failure['s'], 'cand_broken')

    def test_malformed_class_descriptions_break_the_channel(self):
        for c in ({'id': 1, 'n': [], 'm': 'builtins', 'h': 1, 'b': []},
                  {'id': 2, 'n': 'ValueError', 'm': 'builtins', 'h': 1, 'b': [], 'x': True}):
            with self.subTest(c=c):
                self.fresh()
                with self.assertRaises(channel.ChannelBroken):
                    self.call(frame(['ret', 1, [], {'$h': 1, 'c': c}]))


if __name__ == '__main__':
    unittest.main()
