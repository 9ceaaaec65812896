"""The coordinator's judgement of how children ended: the strict record grammar, classify()
for a candidate and combine() for an assert test, on hand-made inputs shaped like finish()'s."""
import os
import signal
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from crucible_sandbox import server  # noqa: E402

LIM = {'cpu_s': 1.0, 'wall_s': 3.0, 'mem_mb': 256, 'out_bytes': 1000, 'nproc': 4}


def ended(**kw):
    """A child's end as finish() returns it (a clean exit with a value, unless told)."""
    r = {'signal': None, 'code': 0, 'cpu': 0.05, 'wall': 0.1, 'maxrss': 20000, 'killed_wall': False,
         'rec': {'s': 'value', 'value': 1}, 'loaded': True, 'setup': '', 'out': b'', 'out_size': 0,
         'peak': None, 'oom': False}
    r.update(kw)
    return r


def verdict(mode='call', want_output=False, lim=LIM, **kw):
    return server.classify(ended(**kw), mode, lim, want_output)


class CheckRecord(unittest.TestCase):
    def test_valid_records_pass(self):
        for rec, mode in [({'s': 'ok'}, 'stdio'), ({'s': 'exit', 'code': 3}, 'stdio'), ({'s': 'memory'}, 'stdio'),
                          ({'s': 'value', 'value': [1, {'$float': '2.0'}]}, 'call'),
                          ({'s': 'value', 'value': {'$repr': '<x>', '$type': 'X'}}, 'call'),
                          ({'s': 'oversize'}, 'call'), ({'s': 'served'}, 'serve'), ({'s': 'oversize'}, 'serve'),
                          ({'s': 'exc', 'type': 'pkg.Error_2', 'message': 'm'}, 'serve')]:
            with self.subTest(rec=rec, mode=mode):
                self.assertEqual(server.check_record(dict(rec), mode), rec)

    def test_garbled(self):
        cases = [
            ({'s': 'ok'}, 'call'), ({'s': 'value', 'value': 1}, 'stdio'), ({'s': 'served'}, 'call'),
            ({'s': 'value', 'value': 1}, 'serve'), ({'s': 'nosuch'}, 'call'), ({}, 'call'), ({'s': 1}, 'call'),
            ({'s': 'ok', 'extra': 1}, 'stdio'), ({'s': 'value', 'value': 1, 'type': 'x'}, 'call'),
            ({'s': 'exc', 'type': 'Bad Name', 'message': ''}, 'call'), ({'s': 'exc', 'type': '', 'message': ''}, 'call'),
            ({'s': 'exc', 'type': 5, 'message': ''}, 'call'), ({'s': 'exc', 'message': 'no type'}, 'call'),
            ({'s': 'exc', 'type': 'E', 'message': 5}, 'call'), ({'s': 'exc', 'type': 'E<script>', 'message': ''}, 'call'),
            ({'s': 'exc', 'type': 'Caf\xe9', 'message': ''}, 'call'),
            ({'s': 'exit', 'code': '1'}, 'stdio'), ({'s': 'exit'}, 'stdio'), ({'s': 'exit', 'code': 1.0}, 'stdio'),
            ({'s': 'value', 'value': {'$nosuch': 1}}, 'call'), ({'s': 'value', 'value': 2 ** 60}, 'call'),
            ({'s': 'value', 'value': {'$h': 1, 'c': {'id': 1}}}, 'call'), ({'s': 'value', 'value': {'$ref': 0}}, 'call'),
            ({'s': 'value', 'value': {'$repr': 'r', '$type': 'T', 'x': 1}}, 'call'),
            ({'s': 'value', 'value': {'$dict': [[[1], 2]]}}, 'call'),
        ]
        for rec, mode in cases:
            with self.subTest(rec=rec, mode=mode):
                out = server.check_record(dict(rec), mode)
                self.assertEqual(out['s'], 'garbled')
                self.assertIsInstance(out['why'], str)
        g = {'s': 'garbled', 'why': 'from finish()'}
        self.assertEqual(server.check_record(dict(g), 'call'), g)

    def test_exception_fields_bounded(self):
        rec = server.check_record({'s': 'exc', 'type': 'E' * 300, 'message': 'm' * 3000}, 'call')
        self.assertEqual((len(rec['type']), len(rec['message'])), (100, 500))
        self.assertEqual(server.check_record({'s': 'exc', 'type': 'E'}, 'call')['message'], '')

    def test_a_huge_deque_maxlen_is_garbled(self):
        rec = {'s': 'value', 'value': {'$deque': [], 'maxlen': 10 ** 30}}
        self.assertEqual(server.check_record(rec, 'call')['s'], 'garbled')


class Classify(unittest.TestCase):
    def test_a_clean_value(self):
        r = verdict(rec={'s': 'value', 'value': [1, 2]}, cpu=0.0123, wall=0.5, maxrss=777, peak=5 << 20)
        self.assertEqual(r, {'cpu_ms': 12.3, 'wall_ms': 500.0, 'memory_kb': 777, 'memory_peak_kb': 5120,
                             'phase': 'test', 'verdict': 'ran', 'value': [1, 2]})

    def test_time_limit(self):
        for kw, msg in [({'cpu': 1.5}, 'CPU limit'), ({'killed_wall': True, 'signal': signal.SIGKILL}, 'wall-clock limit'),
                        ({'signal': signal.SIGXCPU, 'rec': None}, 'CPU limit'),
                        ({'signal': signal.SIGKILL, 'cpu': 1.0, 'rec': None}, 'CPU limit'),
                        ({'cpu': 1.5, 'rec': {'s': 'garbled', 'why': 'x'}}, 'CPU limit')]:
            for mode in ('stdio', 'call', 'serve'):
                with self.subTest(kw=kw, mode=mode):
                    r = verdict(mode=mode, **kw)
                    self.assertEqual((r['verdict'], r['message']), ('time_limit', msg))
        # Over the CPU limit with the program's own exception: its exception is the verdict.
        self.assertEqual(verdict(cpu=1.5, rec={'s': 'exc', 'type': 'ValueError', 'message': 'v'})['verdict'],
                         'runtime_error')
        self.assertEqual(verdict(cpu=1.5, rec={'s': 'memory'})['verdict'], 'memory_limit')
        # Killed early (not by the CPU limit, little memory): a runtime error named by the signal.
        r = verdict(signal=signal.SIGKILL, cpu=0.2, rec=None)
        self.assertEqual((r['verdict'], r['exception_type']), ('runtime_error', 'SIGKILL'))

    def test_memory_limit(self):
        for kw in ({'oom': True, 'signal': signal.SIGKILL, 'rec': None}, {'rec': {'s': 'memory'}},
                   {'signal': signal.SIGKILL, 'maxrss': 250 * 1024, 'rec': None},
                   {'signal': signal.SIGSEGV, 'maxrss': 240 * 1024, 'rec': None},
                   {'rec': {'s': 'exc', 'type': 'MemoryError', 'message': ''}}):
            with self.subTest(kw=kw):
                self.assertEqual(verdict(**kw)['verdict'], 'memory_limit')
        r = verdict(signal=signal.SIGSEGV, maxrss=1000, rec=None)
        self.assertEqual((r['verdict'], r['exception_type'], r['message']), ('runtime_error', 'SIGSEGV', 'killed by SIGSEGV'))

    def test_output_limit(self):
        for kw in ({'out_size': 1001}, {'rec': {'s': 'oversize'}}, {'signal': signal.SIGXFSZ, 'rec': None},
                   {'rec': {'s': 'exc', 'type': 'OSError', 'message': '[Errno 27] File too large'}}):
            for mode in ('stdio', 'call'):
                if mode == 'stdio' and kw.get('rec') == {'s': 'oversize'}:
                    continue  # not a stdio status (garbled there)
                with self.subTest(kw=kw, mode=mode):
                    self.assertEqual(verdict(mode=mode, **kw)['verdict'], 'output_limit')
        self.assertEqual(verdict(out_size=1000)['verdict'], 'ran')  # at the limit is fine
        big = dict(LIM, out_bytes=1 << 40)  # Node cannot read more than NODE_MAX whatever the limit
        self.assertEqual(verdict(lim=big, out_size=server.NODE_MAX + 1)['verdict'], 'output_limit')

    def test_setup_failure_is_a_sandbox_error(self):
        r = verdict(setup='OSError: no', cpu=5.0)
        self.assertEqual((r['verdict'], r['message']), ('sandbox_error', 'child setup failed: OSError: no'))

    def test_load_phase(self):
        r = verdict(loaded=False, rec={'s': 'exc', 'type': 'ImportError', 'message': 'x'})
        self.assertEqual((r['phase'], r['verdict'], r['exception_type']), ('load', 'runtime_error', 'ImportError'))
        self.assertEqual(verdict(mode='serve', loaded=False, rec=None)['phase'], 'load')
        self.assertEqual(verdict(mode='stdio', loaded=False, rec={'s': 'ok'})['phase'], 'test')  # stdio has no load phase

    def test_records(self):
        r = verdict(rec={'s': 'exc', 'type': 'KeyError', 'message': "'k'"}, code=0)
        self.assertEqual((r['verdict'], r['exception_type'], r['message']), ('runtime_error', 'KeyError', "'k'"))
        r = verdict(rec={'s': 'bogus'})
        self.assertEqual((r['verdict'], r['exception_type']), ('runtime_error', 'MalformedResult'))
        self.assertIn('invalid result record', r['message'])
        r = verdict(rec=None)  # a call that ended without a record
        self.assertEqual((r['verdict'], r['exception_type']), ('runtime_error', 'SystemExit'))
        r = verdict(code=1)  # a value record, then a non-zero exit
        self.assertEqual((r['verdict'], r['exception_type']), ('runtime_error', 'SystemExit'))
        self.assertEqual(verdict(mode='serve', rec={'s': 'served'})['verdict'], 'ran')

    def test_stdio(self):
        r = verdict(mode='stdio', rec={'s': 'ok'}, out=b'hi\n', out_size=3)
        self.assertEqual((r['verdict'], r['out_b64']), ('ran', 'aGkK'))
        self.assertEqual(verdict(mode='stdio', rec=None)['verdict'], 'ran')  # a clean exit is enough
        r = verdict(mode='stdio', rec={'s': 'exit', 'code': 2})
        self.assertEqual((r['verdict'], r['exception_type'], r['message']), ('runtime_error', 'SystemExit', 'exit status 2'))
        r = verdict(mode='stdio', rec=None, code=3)
        self.assertEqual(r['message'], 'exit status 3')
        self.assertEqual(verdict(mode='stdio', rec={'s': 'value', 'value': 1})['exception_type'], 'MalformedResult')

    def test_output_only_when_wanted(self):
        self.assertNotIn('out_b64', verdict(out=b'x', out_size=1))
        self.assertEqual(verdict(want_output=True, out=b'x', out_size=1)['out_b64'], 'eA==')
        r = verdict(want_output=True, out=b'y' * (server.OUTPUT_CAP + 10), out_size=server.OUTPUT_CAP + 10,
                    lim=dict(LIM, out_bytes=1 << 20))
        self.assertEqual(len(r['out_b64']), (server.OUTPUT_CAP + 2) // 3 * 4)  # capped


OLIM = LIM


def oracle_end(**kw):
    r = ended(rec={'s': 'ok'})
    r.update(kw)
    return r


def assert_verdict(cand=None, **orc):
    c = server.classify(cand or ended(rec={'s': 'served'}), 'serve', LIM, False)
    return server.combine(c, oracle_end(**orc), OLIM)


class Combine(unittest.TestCase):
    def test_passes_and_fails(self):
        self.assertEqual(assert_verdict()['verdict'], 'ran')
        r = assert_verdict(rec={'s': 'assert_fail', 'message': 'x != 1'})
        self.assertEqual((r['verdict'], r['phase'], r['message']), ('assert_failed', 'test', 'x != 1'))
        self.assertEqual(assert_verdict(rec={'s': 'assert_fail'})['message'], 'assertion failed')

    def test_exceptions_by_candidate_or_test(self):
        r = assert_verdict(rec={'s': 'cand_exc', 'type': 'KeyError', 'message': "'k'"})
        self.assertEqual((r['verdict'], r['exception_type'], r['by']), ('runtime_error', 'KeyError', 'candidate'))
        r = assert_verdict(rec={'s': 'exc', 'type': 'NameError', 'message': 'n'})
        self.assertEqual((r['verdict'], r['exception_type']), ('runtime_error', 'NameError'))
        self.assertNotIn('by', r)

    def test_candidate_limits_win(self):
        for cand in (ended(rec={'s': 'served'}, cpu=2.0), ended(rec={'s': 'memory'}),
                     ended(rec={'s': 'oversize'}), ended(rec={'s': 'served'}, setup='x')):
            with self.subTest(cand=cand):
                c = server.classify(cand, 'serve', LIM, False)
                self.assertEqual(server.combine(c, oracle_end(rec={'s': 'ok'}), OLIM), c)

    def test_load_phase_failure_is_the_candidates(self):
        c = server.classify(ended(loaded=False, rec={'s': 'exc', 'type': 'SyntaxWarning', 'message': ''}),
                            'serve', LIM, False)
        r = server.combine(c, oracle_end(rec={'s': 'cand_load'}), OLIM)
        self.assertEqual((r['verdict'], r['phase'], r['exception_type']), ('runtime_error', 'load', 'SyntaxWarning'))

    def test_oracle_limits(self):
        for orc in ({'cpu': 1.5}, {'killed_wall': True, 'signal': signal.SIGKILL}, {'signal': signal.SIGXCPU, 'rec': None}):
            with self.subTest(orc=orc):
                r = assert_verdict(**orc)
                self.assertEqual((r['verdict'], r['phase']), ('time_limit', 'test'))
        r = assert_verdict(rec={'s': 'memory'})
        self.assertEqual(r['verdict'], 'memory_limit')
        r = assert_verdict(rec=None, signal=signal.SIGKILL, maxrss=250 * 1024)
        self.assertEqual(r['verdict'], 'memory_limit')
        r = assert_verdict(rec=None, signal=signal.SIGSEGV, maxrss=100)
        self.assertEqual((r['verdict'], r['exception_type']), ('runtime_error', 'TestCrashed'))
        r = assert_verdict(setup='EPERM')
        self.assertEqual((r['verdict'], r['message']), ('sandbox_error', 'oracle setup failed: EPERM'))
        self.assertEqual(assert_verdict(rec=None)['verdict'], 'sandbox_error')  # no record, no signal

    def test_channel_failures(self):
        r = assert_verdict(rec={'s': 'cand_oversize'})
        self.assertEqual((r['verdict'], r['message']), ('output_limit', 'a value over 1000 bytes'))
        r = assert_verdict(rec={'s': 'cand_broken', 'why': 'garbage'})
        self.assertEqual((r['verdict'], r['exception_type']), ('runtime_error', 'MalformedResult'))
        self.assertIn('garbage', r['message'])
        # The candidate ended cleanly ('served') but the oracle lost it mid-test.
        r = assert_verdict(rec={'s': 'cand_gone'})
        self.assertEqual((r['verdict'], r['exception_type']), ('runtime_error', 'SystemExit'))
        self.assertEqual(r['message'], 'the program exited before the test finished')
        # The candidate exited without a record (os._exit(0)): its own verdict stands.
        r = assert_verdict(ended(rec=None), rec={'s': 'cand_gone'})
        self.assertEqual((r['verdict'], r['exception_type']), ('runtime_error', 'SystemExit'))
        self.assertIn('before the test finished', r['message'])
        # A candidate killed by a signal: its verdict, whatever the oracle says.
        r = assert_verdict(ended(rec=None, signal=signal.SIGSEGV), rec={'s': 'ok'})
        self.assertEqual(r['exception_type'], 'SIGSEGV')

    def test_figures_are_the_candidates(self):
        c = ended(rec={'s': 'served'}, cpu=0.25, wall=0.5, maxrss=4321, peak=2048 * 1024)
        r = assert_verdict(c, rec={'s': 'assert_fail'}, cpu=0.9, maxrss=99999)
        self.assertEqual((r['cpu_ms'], r['wall_ms'], r['memory_kb'], r['memory_peak_kb']), (250.0, 500.0, 4321, 2048))


if __name__ == '__main__':
    unittest.main()
