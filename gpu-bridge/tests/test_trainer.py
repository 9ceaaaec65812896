"""train_step: accumulation equals one batch, idempotency, version and hash checks, failures
apply nothing."""

import os
import unittest

import fixtures
import torch
from fixtures import TINY, Bridge, call, grpo_rows, ok, write_batch


def params(bridge, name="default"):
    return [p.detach().clone() for p in bridge.policies[name].policy.model.parameters()]


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


class AccumulationTest(unittest.TestCase):
    """1 micro-batch vs N: equal gradients within float tolerance, for every loss and aggregation."""

    def setUp(self):
        self.dir = fixtures.tmpdir(self)
        self.bridge = Bridge()
        ok(self.bridge, "load_policy", {"backend": "toy", "config": TINY, "seed": 3, "reference": True})
        # One SFT step so the policy differs from its reference (KL and KTO terms are not trivial).
        b = write_batch(self.dir, [{"prompt": "a", "completion": "bcd"}], "warm.jsonl")
        ok(self.bridge, "train_step", {"batch_id": "warm", "expected_version": 0, "algorithm": "sft", "batch": b,
                                       "hyper": {"lr": 1e-2}})
        self.st = self.bridge.policies["default"]

    def grads(self, samples, algorithm, hyper, mb):
        self.st.optimizer.zero_grad(set_to_none=True)
        metrics = self.st._accumulate(samples, algorithm, hyper, mb, lambda p: None)
        g = [p.grad.detach().clone() for p in self.st.policy.trainable_parameters()]
        self.st.optimizer.zero_grad(set_to_none=True)
        return g, metrics

    def check(self, rows, algorithm, hyper):
        from gpu_bridge.batch import read_batch

        b = write_batch(self.dir, rows)
        samples = read_batch(b["path"], b["sha256"], algorithm, self.st.policy.tokenizer)
        g1, m1 = self.grads(samples, algorithm, hyper, len(samples))
        for mb in (1, 2, 4):
            gn, mn = self.grads(samples, algorithm, hyper, mb)
            for a, c in zip(g1, gn):
                torch.testing.assert_close(a, c, rtol=1e-4, atol=1e-6)
            self.assertAlmostEqual(m1["loss"], mn["loss"], places=5)
        self.assertGreater(sum(float(x.abs().sum()) for x in g1), 0.0)
        return m1

    def test_grpo_every_aggregation(self):
        rows = grpo_rows(6)
        # old log-probabilities off the current ones make ratios != 1, so clipping happens
        for i, r in enumerate(rows):
            r["old_logprobs"] = [-5.0 - 0.3 * ((i + j) % 3) for j in range(len(r["completion"]))]
        for agg in ("token-mean", "seq-mean-token-mean", "constant"):
            with self.subTest(aggregation=agg):
                m = self.check(rows, "grpo", {"aggregation": agg, "constant": 32, "kl_coef": 0.05, "dual_clip": 3.0})
                self.assertGreater(m["clip_fraction"], 0.0)
                self.assertIsNotNone(m["kl"])

    def test_kto(self):
        rows = [{"prompt": f"q{i}", "completion": c, "label": i % 2 == 0} for i, c in enumerate(["ab", "cde", "f", "ghij", "kl"])]
        m = self.check(rows, "kto", {"beta": 0.5, "desirable_weight": 1.0, "undesirable_weight": 1.3})
        self.assertGreaterEqual(m["kto_reference_point"], 0.0)

    def test_sft(self):
        self.check([{"prompt": "p", "completion": "x" * (i + 1)} for i in range(5)], "sft", {})


class KtoReferencePointTest(unittest.TestCase):
    def test_batch_of_three_matches_rotated_pairs(self):
        d = fixtures.tmpdir(self)
        br = Bridge()
        ok(br, "load_policy", {"backend": "toy", "config": TINY, "seed": 5, "reference": True})
        warm = write_batch(d, [{"prompt": "q", "completion": "yes"}], "warm.jsonl")
        ok(br, "train_step", {"batch_id": "w", "expected_version": 0, "algorithm": "sft", "batch": warm, "hyper": {"lr": 5e-2}})
        rows = [{"prompt": "q1 ", "completion": "yes", "label": True},
                {"prompt": "q2 ", "completion": "no!", "label": False},
                {"prompt": "q3 ", "completion": "yes yes", "label": True}]
        # Mismatched pairs: prompt i with completion i-1.
        items = [{"prompt": rows[i]["prompt"], "completion": rows[(i - 1) % 3]["completion"]} for i in range(3)]
        pol = ok(br, "logprobs", {"items": items})["sums"]
        ref = ok(br, "logprobs", {"items": items, "reference": True})["sums"]
        expect = max(0.0, sum(p - r for p, r in zip(pol, ref)) / 3)
        b = write_batch(d, rows)
        res = ok(br, "train_step", {"batch_id": "k", "expected_version": 1, "algorithm": "kto", "batch": b, "hyper": {"beta": 0.1}})
        self.assertAlmostEqual(res["kto_reference_point"], expect, places=5)
        self.assertNotEqual(sum(pol), sum(ref))


class StepSafetyTest(unittest.TestCase):
    def setUp(self):
        self.dir = fixtures.tmpdir(self)
        self.bridge = Bridge()
        ok(self.bridge, "load_policy", {"backend": "toy", "config": TINY, "seed": 1, "optimizer": {"lr": 1e-3}})
        self.batch = write_batch(self.dir, grpo_rows(4))

    def step(self, batch_id="b1", expected=0, batch=None, **extra):
        return call(self.bridge, "train_step", {"batch_id": batch_id, "expected_version": expected, "algorithm": "grpo",
                                                 "batch": batch or self.batch, **extra})

    def test_applies_and_reports_metrics(self):
        before = params(self.bridge)
        r = self.step(micro_batch_size=2)
        self.assertTrue(r["ok"], r)
        m = r["result"]
        self.assertEqual(m["version"], 1)
        self.assertEqual(m["micro_batches"], 2)
        for key in ("loss", "clip_fraction", "entropy", "grad_norm", "tokens_per_s", "peak_memory_bytes"):
            self.assertIsNotNone(m[key], key)
        self.assertGreater(m["grad_norm"], 0)
        self.assertFalse(same(before, params(self.bridge)))

    def test_same_batch_id_applies_once(self):
        first = self.step()
        after_first = params(self.bridge)
        again = self.step()  # a retry after a lost reply: the expected version is now stale, still fine
        self.assertTrue(again["ok"], again)
        self.assertTrue(again["result"]["duplicate"])
        self.assertEqual(again["result"]["version"], first["result"]["version"])
        self.assertTrue(same(after_first, params(self.bridge)))
        self.assertEqual(ok(self.bridge, "status")["policies"]["default"]["version"], 1)

    def test_same_batch_id_other_content_refused(self):
        self.step()
        other = write_batch(self.dir, grpo_rows(3), "other.jsonl")
        r = self.step(batch=other, expected=1)
        self.assertEqual(r["error"]["code"], "batch_id_conflict")

    def test_wrong_expected_version_refused(self):
        before = params(self.bridge)
        r = self.step(expected=3)
        self.assertFalse(r["ok"])
        self.assertEqual(r["error"]["code"], "version_mismatch")
        self.assertIn("version 0", r["error"]["message"])
        self.assertTrue(same(before, params(self.bridge)))

    def test_hash_mismatch_refused(self):
        before = params(self.bridge)
        with open(self.batch["path"], "a") as f:
            f.write('{"prompt": "x", "completion": "y", "advantage": 9}\n')
        r = self.step()
        self.assertEqual(r["error"]["code"], "hash_mismatch")
        self.assertTrue(same(before, params(self.bridge)))
        self.assertEqual(self.bridge.policies["default"].version, 0)

    def test_bad_row_names_its_line(self):
        rows = grpo_rows(3)
        del rows[1]["advantage"]
        r = self.step(batch=write_batch(self.dir, rows, "bad.jsonl"))
        self.assertEqual(r["error"]["code"], "bad_batch")
        self.assertIn("bad.jsonl:2", r["error"]["message"])

    def test_crash_mid_step_applies_nothing(self):
        st = self.bridge.policies["default"]
        before = params(self.bridge)
        real = st.policy.forward_logits
        calls = {"n": 0}

        def failing(ids, att):
            calls["n"] += 1
            if calls["n"] == 2:
                raise RuntimeError("device lost")
            return real(ids, att)

        st.policy.forward_logits = failing
        r = self.step(micro_batch_size=2)
        self.assertEqual(r["error"]["code"], "step_failed")
        self.assertIn("nothing applied", r["error"]["message"])
        self.assertEqual(st.version, 0)
        self.assertTrue(same(before, params(self.bridge)))
        self.assertTrue(all(p.grad is None for p in st.policy.trainable_parameters()))
        # The same batch id is not marked applied: a retry runs it.
        st.policy.forward_logits = real
        r = self.step(micro_batch_size=2)
        self.assertTrue(r["ok"], r)
        self.assertFalse(r["result"]["duplicate"])
        self.assertEqual(st.version, 1)

    def test_oom_is_retryable(self):
        st = self.bridge.policies["default"]

        def oom(ids, att):
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

        st.policy.forward_logits = oom
        r = self.step()
        self.assertEqual(r["error"]["code"], "oom")
        self.assertTrue(r["error"]["retryable"])
        self.assertEqual(st.version, 0)

    def test_kl_without_reference_refused(self):
        r = self.step(hyper={"kl_coef": 0.1})
        self.assertEqual(r["error"]["code"], "no_reference")

    def test_idem_key_replays_reply(self):
        a = call(self.bridge, "publish", {"root": os.path.join(self.dir, "ck")}, idem="p-1")
        b = call(self.bridge, "publish", {"root": os.path.join(self.dir, "ck")}, idem="p-1")
        self.assertEqual(a, b)


class IdenticalSuitesTest(unittest.TestCase):
    """Why a test policy that writes one suite learns nothing: a GRPO group's advantages sum to
    zero, so identical completions (one prompt) cancel to a gradient of exactly 0 whatever their
    rewards; one suite that differs is enough for the step to move the weights."""

    SUITE = "```python\nassert f(38) == 2\nassert f(7) == 7\n```"
    ADVANTAGES = [1.5, -0.5, -0.5, -0.5]  # group-normalized: they sum to 0

    def step(self, completions):
        d = fixtures.tmpdir(self)
        bridge = Bridge()
        ok(bridge, "load_policy", {"backend": "toy", "config": TINY, "seed": 1, "optimizer": {"lr": 1e-3}})
        rows = [{"prompt": "Tests for f: ", "completion": c, "eos": True, "advantage": a} for c, a in zip(completions, self.ADVANTAGES)]
        before = params(bridge)
        r = ok(bridge, "train_step", {"batch_id": "g", "expected_version": 0, "algorithm": "grpo", "batch": write_batch(d, rows)})
        return r, same(before, params(bridge))

    def test_identical_suites_give_no_gradient(self):
        r, _ = self.step([self.SUITE] * 4)
        # Float residue only (Adam, which divides by the gradient's own scale, still turns it
        # into a step of about lr in a direction that means nothing).
        self.assertLess(r["grad_norm"], 1e-6)

    def test_one_different_suite_moves_the_weights(self):
        r, unchanged = self.step([self.SUITE.replace("(7) == 7", "(9) == 9")] + [self.SUITE] * 3)
        self.assertGreater(r["grad_norm"], 1e-3)
        self.assertFalse(unchanged)


class GenerateTest(unittest.TestCase):
    def setUp(self):
        self.bridge = Bridge()
        ok(self.bridge, "load_policy", {"backend": "toy", "config": TINY, "seed": 4})

    def test_batched_prompts_match_prompts_alone(self):
        # Left padding must not leak: a prompt decoded beside longer ones gives what it gives alone.
        prompts = ["a", "a much longer prompt than the first", "mid length"]
        args = {"n": 2, "max_tokens": 12, "temperature": 0, "logprobs": True}
        together = ok(self.bridge, "generate", {"prompts": prompts, **args})["outputs"]
        for p, got in zip(prompts, together):
            alone = ok(self.bridge, "generate", {"prompts": [p], **args})["outputs"][0]
            self.assertEqual([s["token_ids"] for s in got], [s["token_ids"] for s in alone])
            for a, b in zip(got, alone):
                for x, y in zip(a["logprobs"], b["logprobs"]):
                    self.assertAlmostEqual(x, y, places=4)

    def test_sampled_logprobs_equal_the_trainers(self):
        # generate's logprobs are what train_step computes, so they can go back as old_logprobs.
        g = ok(self.bridge, "generate", {"prompts": ["def f(x):", "y"], "n": 2, "max_tokens": 10, "seed": 9, "logprobs": True})
        for p, outs in zip(["def f(x):", "y"], g["outputs"]):
            for o in outs:
                lp = ok(self.bridge, "logprobs", {"items": [{"prompt": p, "completion_ids": o["token_ids"]}]})["logprobs"][0]
                for x, y in zip(o["logprobs"], lp):
                    self.assertAlmostEqual(x, y, places=4)

    def test_same_seed_same_samples_and_stop_strings(self):
        a = ok(self.bridge, "generate", {"prompts": ["x", "yy"], "n": 3, "max_tokens": 8, "seed": 5})
        b = ok(self.bridge, "generate", {"prompts": ["x", "yy"], "n": 3, "max_tokens": 8, "seed": 5})
        self.assertEqual(a["outputs"], b["outputs"])
        full = ok(self.bridge, "generate", {"prompts": ["x"], "max_tokens": 8, "temperature": 0})["outputs"][0][0]
        stop = full["text"][3:5]
        if not stop:
            self.skipTest("greedy output too short")
        cut = ok(self.bridge, "generate", {"prompts": ["x"], "max_tokens": 8, "temperature": 0, "stop": [stop]})["outputs"][0][0]
        self.assertEqual(cut["finish_reason"], "stop")
        self.assertEqual(cut["text"], full["text"][: full["text"].index(stop)])


class BackendAvailabilityTest(unittest.TestCase):
    def test_hello_and_hf_without_transformers(self):
        import importlib.util

        br = Bridge()
        hello = ok(br, "hello")
        caps = hello["capabilities"]["backends"]
        self.assertTrue(caps["toy"]["available"])
        # The BLAS files loaded, by path (Debian's torch loads the one its alternatives name).
        self.assertTrue(all(p.startswith("/") for p in hello["blas"]))
        if torch.__file__.startswith("/usr/lib/python3/"):
            self.assertTrue(any("blas" in p for p in hello["blas"]), hello["blas"])
        if importlib.util.find_spec("transformers") is not None:
            self.skipTest("transformers is installed here; this checks the message where it is absent")
        self.assertFalse(caps["hf"]["available"])
        self.assertIn("transformers", caps["hf"]["missing"])
        r = call(br, "load_policy", {"backend": "hf", "model": "some/model"})
        self.assertEqual(r["error"]["code"], "unsupported")
        self.assertIn("transformers", r["error"]["message"])


if __name__ == "__main__":
    unittest.main()
