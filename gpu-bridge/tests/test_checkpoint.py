"""Atomic publish (old or new, never torn) and bit-for-bit resume from save_state."""

import json
import os
import shutil
import signal
import sys
import time
import unittest

import fixtures
from fixtures import TINY, Bridge, Proc, grpo_rows, ok, write_batch

from gpu_bridge import checkpoint as ck


class PublishTest(unittest.TestCase):
    def setUp(self):
        self.dir = fixtures.tmpdir(self)
        self.root = os.path.join(self.dir, "versions")
        self.bridge = Bridge()
        ok(self.bridge, "load_policy", {"backend": "toy", "config": TINY})

    def test_publish_is_verifiable_and_idempotent(self):
        a = ok(self.bridge, "publish", {"root": self.root})
        self.assertEqual(a["version"], 0)
        self.assertTrue(a["path"].endswith("v000000"))
        self.assertEqual(ck.verify(a["path"], deep=True), a["sha256"])
        self.assertEqual(ok(self.bridge, "publish", {"root": self.root}), a)
        self.assertEqual(ck.stable_versions(self.root), [0])

    def test_load_policy_from_a_published_version(self):
        ok(self.bridge, "load_policy", {"backend": "toy", "config": TINY, "version": 4, "seed": 9})
        a = ok(self.bridge, "publish", {"root": self.root})
        r = ok(self.bridge, "load_policy", {"policy": "copy", "backend": "toy", "model": a["path"]})
        self.assertEqual((r["version"], r["published"]["sha256"]), (4, a["sha256"]))
        greedy = {"prompts": ["x"], "temperature": 0, "max_tokens": 6, "logprobs": True}
        self.assertEqual(ok(self.bridge, "generate", greedy)["outputs"], ok(self.bridge, "generate", {**greedy, "policy": "copy"})["outputs"])

    def test_failure_while_writing_leaves_nothing(self):
        ok(self.bridge, "publish", {"root": self.root})
        self.bridge.policies["default"].version = 1

        def broken(d):
            with open(os.path.join(d, "model.pt"), "wb") as f:
                f.write(b"half")
            raise OSError("disk full")

        with self.assertRaises(OSError):
            ck.publish(self.root, 1, broken, {})
        self.assertEqual(ck.stable_versions(self.root), [0])
        self.assertFalse(os.path.exists(ck.version_dir(self.root, 1)))
        # the next publish sweeps the leftover temporary dir and succeeds
        r = ok(self.bridge, "publish", {"root": self.root})
        self.assertEqual(ck.stable_versions(self.root), [0, 1])
        self.assertEqual([n for n in os.listdir(self.root) if n.startswith(".tmp")], [])
        self.assertEqual(ck.resolve(root=self.root)[1], r["sha256"])

    def test_renamed_but_unmarked_version_is_ignored_then_replaced(self):
        ok(self.bridge, "publish", {"root": self.root})
        torn = ck.version_dir(self.root, 1)
        shutil.copytree(ck.version_dir(self.root, 0), torn)
        os.remove(os.path.join(torn, ck.STABLE))
        self.assertEqual(ck.stable_versions(self.root), [0])
        with self.assertRaises(Exception) as e:
            ck.resolve(path=torn)
        self.assertEqual(e.exception.code, "torn_checkpoint")
        self.bridge.policies["default"].version = 1
        ok(self.bridge, "publish", {"root": self.root})
        self.assertEqual(ck.stable_versions(self.root), [0, 1])

    def test_corrupted_file_fails_deep_verify(self):
        a = ok(self.bridge, "publish", {"root": self.root})
        with open(os.path.join(a["path"], "model.pt"), "r+b") as f:
            f.seek(100)
            f.write(b"\x00\x01\x02")
        r = fixtures.call(self.bridge, "load_policy", {"policy": "p2", "backend": "toy", "model": a["path"]})
        self.assertEqual(r["error"]["code"], "torn_checkpoint")


class SigkillDuringPublishTest(unittest.TestCase):
    """A real bridge killed at several moments of a publish: the root always holds v0 intact,
    and the new version is either absent/unmarked or complete and verified."""

    def test_old_or_new_never_torn(self):
        d = fixtures.tmpdir(self)
        root = os.path.join(d, "versions")
        big = {"d_model": 256, "n_layers": 4, "n_heads": 4, "d_ff": 1024, "max_seq_len": 256}  # ~13 MB of weights
        outcomes = set()
        for k, delay in enumerate([0.0, 0.02, 0.06, 0.2]):
            br = Proc()
            try:
                br.ok("load_policy", {"backend": "toy", "config": big, "seed": 0, "version": k})
                if k == 0:
                    br.ok("publish", {"root": root})
                    continue
                br.send_raw((json.dumps({"v": 1, "id": "pub", "op": "publish", "args": {"root": root}}) + "\n").encode())
                time.sleep(delay)
                br.p.send_signal(signal.SIGKILL)
            finally:
                br.kill()
            self.assertIn(0, ck.stable_versions(root))
            ck.resolve(root=root, version=0)  # old version readable, every file hash checked
            vdir = ck.version_dir(root, k)
            if os.path.isdir(vdir) and ck.verify(vdir) is not None:
                ck.resolve(path=vdir)  # marked stable means complete
                outcomes.add("new")
            else:
                self.assertNotIn(k, ck.stable_versions(root))
                outcomes.add("old")
        self.assertTrue(outcomes)


class ResumeTest(unittest.TestCase):
    """Kill a bridge between steps; a new one loads the saved state and continues bit for bit."""

    def test_bit_for_bit_after_sigkill(self):
        d = fixtures.tmpdir(self)
        cfg = dict(TINY, dropout=0.1)  # dropout draws from the RNG, so RNG state must resume too
        b1 = write_batch(d, grpo_rows(4), "b1.jsonl")
        b2 = write_batch(d, grpo_rows(6), "b2.jsonl")
        step = {"algorithm": "grpo", "micro_batch_size": 2}
        a = Proc()
        try:
            a.ok("load_policy", {"backend": "toy", "config": cfg, "seed": 7, "optimizer": {"lr": 1e-3}})
            a.ok("train_step", {**step, "batch_id": "b1", "expected_version": 0, "batch": b1})
            state = a.ok("save_state", {"path": os.path.join(d, "state.pt")})
            r2 = a.ok("train_step", {**step, "batch_id": "b2", "expected_version": 1, "batch": b2})
            pa = a.ok("publish", {"root": os.path.join(d, "a")})
        finally:
            a.kill()
        b = Proc()
        try:
            st = b.ok("load_state", {"path": state["path"], "sha256": state["sha256"]})
            self.assertEqual(st["version"], 1)
            self.assertTrue(b.ok("train_step", {**step, "batch_id": "b1", "expected_version": 1, "batch": b1})["duplicate"])
            r2b = b.ok("train_step", {**step, "batch_id": "b2", "expected_version": 1, "batch": b2})
            pb = b.ok("publish", {"root": os.path.join(d, "b")})
        finally:
            b.kill()
        self.assertEqual(r2["loss"], r2b["loss"])
        self.assertEqual(r2["grad_norm"], r2b["grad_norm"])
        self.assertEqual(pa["sha256"], pb["sha256"])  # manifest lists every weight file's sha256



class OptimizerInCheckpointTest(unittest.TestCase):
    """A published version carries Adam's moments: a bridge killed after step 2 and restarted
    from the version-2 checkpoint takes step 3 exactly as a bridge that never stopped."""

    def steps(self, d):
        return [write_batch(d, grpo_rows(4 + i), f"b{i}.jsonl") for i in range(1, 4)]

    def step(self, proc, i, batch):
        return proc.ok("train_step", {"algorithm": "grpo", "batch_id": f"b{i}", "expected_version": i - 1, "batch": batch})

    def weights_sha(self, path):
        return ck.manifest(path)["files"]["model.pt"]["sha256"]

    def run_interrupted(self, d, batches, optimizer: bool):
        load = {"backend": "toy", "config": TINY, "seed": 3, "optimizer": {"lr": 1e-3}}
        a = Proc()
        try:
            a.ok("load_policy", load)
            self.step(a, 1, batches[0])
            self.step(a, 2, batches[1])
            v2 = a.ok("publish", {"root": os.path.join(d, "cut"), "optimizer": optimizer})
        finally:
            a.kill()  # SIGKILL: nothing but the checkpoint survives
        self.assertEqual(v2["optimizer"], optimizer)
        b = Proc()
        try:
            loaded = b.ok("load_policy", {**load, "model": v2["path"]})
            self.assertEqual((loaded["version"], loaded["published"]["optimizer_restored"]), (2, optimizer))
            r3 = self.step(b, 3, batches[2])
            v3 = b.ok("publish", {"root": os.path.join(d, "cut")})
        finally:
            b.kill()
        return r3, self.weights_sha(v3["path"])

    def test_step_after_restart_equals_the_uninterrupted_step(self):
        d = fixtures.tmpdir(self)
        batches = self.steps(d)
        a = Proc()
        try:
            a.ok("load_policy", {"backend": "toy", "config": TINY, "seed": 3, "optimizer": {"lr": 1e-3}})
            for i, batch in enumerate(batches, 1):
                r3 = self.step(a, i, batch)
            whole = self.weights_sha(a.ok("publish", {"root": os.path.join(d, "whole")})["path"])
        finally:
            a.kill()
        cut, cut_sha = self.run_interrupted(d, batches, optimizer=True)
        self.assertEqual((cut["loss"], cut["grad_norm"]), (r3["loss"], r3["grad_norm"]))
        self.assertEqual(cut_sha, whole)
        # Without the moments the restarted Adam takes a first step again: other weights.
        d2 = fixtures.tmpdir(self)
        _, fresh_sha = self.run_interrupted(d2, self.steps(d2), optimizer=False)
        self.assertNotEqual(fresh_sha, whole)

    def test_optimizer_file_is_hashed_like_the_weights(self):
        d = fixtures.tmpdir(self)
        bridge = Bridge()
        ok(bridge, "load_policy", {"backend": "toy", "config": TINY})
        ok(bridge, "train_step", {"algorithm": "grpo", "batch_id": "b1", "expected_version": 0, "batch": write_batch(d, grpo_rows(4))})
        p = ok(bridge, "publish", {"root": os.path.join(d, "v")})["path"]
        self.assertIn("optimizer.pt", ck.manifest(p)["files"])
        with open(os.path.join(p, "optimizer.pt"), "ab") as f:
            f.write(b"x")
        r = fixtures.call(bridge, "load_policy", {"policy": "again", "backend": "toy", "model": p})
        self.assertEqual(r["error"]["code"], "torn_checkpoint")

if __name__ == "__main__":
    unittest.main()
