"""Limits and run directories (no seccomp, uid change or namespace is made in this process)."""
import os
import stat
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from crucible_sandbox import limits  # noqa: E402


class RlimitValues(unittest.TestCase):
    def test_values(self):
        lim = {'cpu_s': 1.2, 'wall_s': 3, 'mem_mb': 256, 'out_bytes': 1000, 'nproc': 4}
        self.assertEqual(limits.rlimit_values(lim), ((2, 3), (1001, 1001), (4, 4), 256 << 20))
        # Never a CPU limit of 0 (it would mean none); whole seconds, the hard one a second later.
        self.assertEqual(limits.rlimit_values(dict(lim, cpu_s=0.1))[0], (1, 2))
        self.assertEqual(limits.rlimit_values(dict(lim, cpu_s=2))[0], (2, 3))
        self.assertEqual(limits.rlimit_values(dict(lim, mem_mb=0.5))[3], 1 << 19)
        for v in limits.rlimit_values(lim)[:3]:
            self.assertTrue(all(type(x) is int for x in v))


class WorldWritableDirs(unittest.TestCase):
    def test_shape(self):
        dirs = limits.world_writable_dirs()
        self.assertIsInstance(dirs, list)
        for d in dirs:
            with self.subTest(d=d):
                self.assertTrue(os.path.isabs(d))
                st = os.lstat(d)
                self.assertTrue(stat.S_ISDIR(st.st_mode))
                self.assertTrue(st.st_mode & 0o002)
                parts = d.strip('/').split('/')
                self.assertLessEqual(len(parts), 3)
                self.assertNotIn('/' + parts[0], ('/proc', '/sys', '/usr'))
                self.assertNotEqual(d, '/tmp')
                # None is below another (one tmpfs over the top one covers it).
                self.assertFalse(any(d.startswith(o + '/') for o in dirs if o != d))
        self.assertEqual(len(dirs), len(set(dirs)))
        top = limits.world_writable_dirs(max_depth=1)
        self.assertTrue(all(d.count('/') == 1 for d in top), top)
        self.assertTrue(set(top) <= set(dirs))

    def test_finds_known_ones(self):
        # Debian's /var/tmp is world-writable (sticky); so is /dev/shm where mounted.
        known = [d for d in ('/var/tmp', '/dev/shm') if os.path.isdir(d) and not os.path.islink(d)
                 and os.lstat(d).st_mode & 0o002]
        if not known:
            self.skipTest('no world-writable /var/tmp or /dev/shm on this machine')
        dirs = limits.world_writable_dirs()
        for d in known:
            self.assertIn(d, dirs)


class RunDirs(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix='crucible-limits-test-')

    def tearDown(self):
        limits.remove_rundir(self.tmp)
        if os.path.exists(self.tmp):  # never leave a test's tree behind, even if the code failed
            import shutil
            shutil.rmtree(self.tmp, ignore_errors=True)

    def deep_tree(self, top, depth):
        """`depth` nested directories with a file at every level, made through directory fds."""
        fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
        for i in range(depth):
            with open(os.open('f%d' % i, os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), 'w') as f:
                f.write('x')
            os.mkdir('d', dir_fd=fd)
            nfd = os.open('d', os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        os.close(fd)

    def test_removes_a_deep_tree(self):
        run = os.path.join(self.tmp, 'run')
        os.mkdir(run)
        self.deep_tree(run, 200)
        os.mkdir(os.path.join(run, 'unreadable'))
        os.mkdir(os.path.join(run, 'unreadable', 'inner'))
        os.chmod(os.path.join(run, 'unreadable'), 0)
        os.mkfifo(os.path.join(run, 'fifo'))
        limits.remove_rundir(run)
        self.assertFalse(os.path.lexists(run))
        self.assertEqual(os.listdir(self.tmp), [])  # nothing moved aside

    def test_never_follows_links(self):
        run = os.path.join(self.tmp, 'run')
        outside = os.path.join(self.tmp, 'outside')
        os.mkdir(run)
        os.mkdir(outside)
        with open(os.path.join(outside, 'keep'), 'w') as f:
            f.write('k')
        os.symlink(outside, os.path.join(run, 'link'))
        os.symlink(os.path.join(outside, 'keep'), os.path.join(run, 'filelink'))
        limits.remove_rundir(run)
        self.assertFalse(os.path.lexists(run))
        self.assertTrue(os.path.exists(os.path.join(outside, 'keep')))
        # The run directory itself a link: the link goes, never its target.
        os.symlink(outside, run)
        limits.remove_rundir(run)
        self.assertFalse(os.path.lexists(run))
        self.assertTrue(os.path.exists(os.path.join(outside, 'keep')))

    def test_missing_path_never_raises(self):
        self.assertIsNone(limits.remove_rundir(os.path.join(self.tmp, 'nope')))
        self.assertIsNone(limits.remove_rundir(os.path.join(self.tmp, 'nope', 'deeper')))

    def test_make_rundir_recreates_a_leftover(self):
        run = os.path.join(self.tmp, 'run')
        limits.make_rundir(run, 61000)
        st = os.stat(run)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o700)
        if limits.IS_ROOT:
            self.assertEqual((st.st_uid, st.st_gid), (61000, 61000))
        with open(os.path.join(run, 'left'), 'w') as f:
            f.write('old')
        os.mkdir(os.path.join(run, 'sub'))
        limits.make_rundir(run, 61001)
        self.assertEqual(os.listdir(run), [])
        st = os.stat(run)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o700)
        if limits.IS_ROOT:
            self.assertEqual(st.st_uid, 61001)


class Module(unittest.TestCase):
    def test_no_cgroup_without_the_variable(self):
        # The cgroup is only opened when CRUCIBLE_CG_MEMORY names one.
        if os.environ.get('CRUCIBLE_CG_MEMORY'):
            self.skipTest('CRUCIBLE_CG_MEMORY is set in this environment')
        self.assertFalse(limits.CG.ok)
        self.assertEqual(limits.CG.before(256), None)
        self.assertEqual(limits.CG.after(None), (None, False))
        self.assertEqual(limits.ORACLE_UID, limits.CANDIDATE_UID + 1)

    def test_seccomp_filter_shape(self):
        if limits.SECCOMP is None:
            self.skipTest('no seccomp filter on this machine (not x86_64, or CRUCIBLE_NO_SECCOMP)')
        arr, prog = limits.SECCOMP
        self.assertEqual(prog.len, len(arr))
        self.assertEqual(arr[len(arr) - 1].k, limits.RET_ALLOW)  # the last instruction allows
        self.assertEqual((arr[0].code, arr[0].k), (0x20, 4))  # loads the arch first
        nrs = [i.k for i in arr if i.code == 0x15]
        for nr in list(limits.DENY.values()) + list(limits.ENOSYS_DENY.values()):
            self.assertIn(nr, nrs)


if __name__ == '__main__':
    unittest.main()


class Fork(unittest.TestCase):
    """limits.fork: libc's fork without Python's at-fork hooks, in a fresh single-threaded
    interpreter as the launcher is; a child can still use threads as CPython's shutdown does."""

    def test_child_runs_threads_and_skips_hooks(self):
        import subprocess
        script = '''
import os, sys, threading
sys.path.insert(0, %r)
from crucible_sandbox import limits
os.register_at_fork(after_in_child=lambda: os.write(1, b'hook ran\\n'))
r, w = os.pipe()
pid = limits.fork()
if pid == 0:
    out = []
    t = threading.Thread(target=lambda: out.append(threading.current_thread() is not threading.main_thread()))
    t.start()
    threading._shutdown()  # joins t, as harness.finish does
    os.write(w, ('%%s %%s' %% (out == [True], threading.current_thread() is threading.main_thread())).encode())
    os._exit(7)
os.close(w)
_, status = os.waitpid(pid, 0)
print(os.read(r, 100).decode(), os.waitstatus_to_exitcode(status))
''' % os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        out = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, timeout=20)
        self.assertEqual(out.stderr, '')
        self.assertEqual(out.stdout.strip(), 'True True 7')
