"""Each loss against values computed by hand on tiny tensors."""

import math
import unittest

import fixtures  # noqa: F401  (puts the package on sys.path)
import torch

from gpu_bridge import losses as L


def sig(x):
    return 1.0 / (1.0 + math.exp(-x))


def ratios_to_logp(ratios):
    old = torch.full((1, len(ratios)), -1.0)
    logp = (old + torch.log(torch.tensor([ratios]))).requires_grad_(True)
    return logp, old


class GrpoTest(unittest.TestCase):
    def test_positive_advantage_clips_high_only(self):
        logp, old = ratios_to_logp([1.5, 0.5])
        cfg = L.GrpoConfig(clip_low=0.2, clip_high=0.28)
        loss = L.grpo_loss(logp, old, torch.tensor([1.0]), torch.ones(1, 2), cfg)
        # token 1: max(-1.5, -1.28) = -1.28 (clipped); token 2: max(-0.5, -0.8) = -0.5
        self.assertAlmostEqual(loss.item(), (-1.28 - 0.5) / 2, places=6)
        loss.backward()
        # d/dlogp of -A*r is -r; the clipped token gets none; /2 for the token mean
        self.assertAlmostEqual(logp.grad[0, 0].item(), 0.0, places=7)
        self.assertAlmostEqual(logp.grad[0, 1].item(), -0.25, places=6)

    def test_negative_advantage_clips_low_only(self):
        logp, old = ratios_to_logp([1.5, 0.5])
        cfg = L.GrpoConfig(clip_low=0.2, clip_high=0.28)
        per, st = L.grpo_token_losses(logp, old, torch.tensor([-1.0]), cfg)
        # token 1: max(1.5, 1.28) = 1.5; token 2: max(0.5, 0.8) = 0.8 (clipped low)
        self.assertEqual([round(x, 6) for x in per[0].tolist()], [1.5, 0.8])
        self.assertEqual(st["clip_low"][0].tolist(), [0.0, 1.0])
        self.assertEqual(st["clip_high"][0].tolist(), [0.0, 0.0])

    def test_clip_boundary(self):
        # At exactly 1 + clip_high both branches are equal: not counted as clipped, gradient flows.
        # Just above it, the token is clipped and gets no gradient.
        logp, old = ratios_to_logp([1.28, 1.2801, 1.2799])
        cfg = L.GrpoConfig(clip_low=0.2, clip_high=0.28)
        per, st = L.grpo_token_losses(logp, old, torch.tensor([2.0]), cfg)
        self.assertEqual(st["clip_high"][0].tolist(), [0.0, 1.0, 0.0])
        per.sum().backward()
        g = logp.grad[0].tolist()
        self.assertAlmostEqual(g[1], 0.0, places=7)
        self.assertAlmostEqual(g[2], -2.0 * 1.2799, places=4)

    def test_dual_clip_caps_negative_advantage(self):
        logp, old = ratios_to_logp([4.0, 2.9, 3.0])
        cfg = L.GrpoConfig(clip_low=0.2, clip_high=0.28, dual_clip=3.0)
        per, st = L.grpo_token_losses(logp, old, torch.tensor([-1.0]), cfg)
        # ratio 4: PPO loss 4, capped at c * |A| = 3; 2.9 stays; 3.0 sits on the cap (not counted)
        self.assertEqual([round(x, 5) for x in per[0].tolist()], [3.0, 2.9, 3.0])
        self.assertEqual(st["dual_clip"][0].tolist(), [1.0, 0.0, 0.0])
        per.sum().backward()
        self.assertAlmostEqual(logp.grad[0, 0].item(), 0.0, places=7)
        self.assertAlmostEqual(logp.grad[0, 1].item(), 2.9, places=4)

    def test_dual_clip_leaves_positive_advantage_alone(self):
        logp, old = ratios_to_logp([4.0])
        per, _ = L.grpo_token_losses(logp, old, torch.tensor([1.0]), L.GrpoConfig(dual_clip=3.0))
        self.assertAlmostEqual(per.item(), -1.28, places=6)

    def test_k3_kl_term(self):
        logp = torch.log(torch.tensor([[0.5]]))
        ref = torch.log(torch.tensor([[0.25]]))
        # d = log(0.25/0.5) = -ln 2; exp(d) - d - 1 = 0.5 + ln 2 - 1
        k3 = 0.5 + math.log(2) - 1
        self.assertAlmostEqual(L.k3_kl(logp, ref).item(), k3, places=6)
        loss = L.grpo_loss(logp, logp.detach(), torch.tensor([0.0]), torch.ones(1, 1), L.GrpoConfig(kl_coef=0.1), ref_logp=ref)
        self.assertAlmostEqual(loss.item(), 0.1 * k3, places=6)
        with self.assertRaises(ValueError):
            L.grpo_loss(logp, logp, torch.tensor([0.0]), torch.ones(1, 1), L.GrpoConfig(kl_coef=0.1))

    def test_aggregations(self):
        per = torch.tensor([[4.0, 9.0, 9.0], [1.0, 2.0, 3.0]])
        mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
        den = L.Denominators.of(mask, constant=4.0)
        self.assertAlmostEqual(L.aggregate(per, mask, "token-mean", den).item(), (4 + 6) / 4)
        self.assertAlmostEqual(L.aggregate(per, mask, "seq-mean-token-mean", den).item(), (4 + 2) / 2)
        self.assertAlmostEqual(L.aggregate(per, mask, "constant", den).item(), 10 / (2 * 4))
        with self.assertRaises(ValueError):
            L.aggregate(per, mask, "sum", den)

    def test_config_checks(self):
        for bad in (L.GrpoConfig(clip_low=1.0), L.GrpoConfig(dual_clip=0.5), L.GrpoConfig(aggregation="x"),
                    L.GrpoConfig(aggregation="constant", constant=0)):
            with self.assertRaises(ValueError):
                bad.check()


class KtoTest(unittest.TestCase):
    def test_batch_of_three(self):
        pol = torch.tensor([-1.0, -2.0, -3.0], requires_grad=True)
        ref = torch.tensor([-1.5, -1.5, -2.5])
        labels = torch.tensor([True, False, True])
        # mismatched pairs (prompt i, completion i-1): policy minus reference 0.5, 0.2, 0.1
        mm_pol = torch.tensor([-2.0, -1.0, -4.0], requires_grad=True)
        mm_ref = torch.tensor([-2.5, -1.2, -4.1])
        cfg = L.KtoConfig(beta=0.1, desirable_weight=1.0, undesirable_weight=1.5)
        loss, z0 = L.kto_loss(pol, ref, labels, mm_pol, mm_ref, cfg)
        z = (0.5 + 0.2 + 0.1) / 3
        self.assertAlmostEqual(z0.item(), z, places=6)
        expect = ((1 - sig(0.1 * (0.5 - z))) + 1.5 * (1 - sig(0.1 * (z + 0.5))) + (1 - sig(0.1 * (-0.5 - z)))) / 3
        self.assertAlmostEqual(loss.item(), expect, places=6)
        loss.backward()
        self.assertIsNone(mm_pol.grad)  # the reference point is detached
        # desirable sample 0: d/dr of (1 - sig(b(r - z))) / 3 = -b s (1 - s) / 3
        s0 = sig(0.1 * (0.5 - z))
        self.assertAlmostEqual(pol.grad[0].item(), -0.1 * s0 * (1 - s0) / 3, places=6)
        s1 = sig(0.1 * (z + 0.5))
        self.assertAlmostEqual(pol.grad[1].item(), 1.5 * 0.1 * s1 * (1 - s1) / 3, places=6)

    def test_reference_point_clamped_at_zero(self):
        z0 = L.kto_reference_point(torch.tensor([-3.0, -3.0]), torch.tensor([-1.0, -2.0]))
        self.assertEqual(z0.item(), 0.0)

    def test_rotation_pairs_no_sample_with_itself(self):
        self.assertEqual(L.rotate_completions(3), [2, 0, 1])
        self.assertEqual(L.rotate_completions(1), [0])


class SftTest(unittest.TestCase):
    def test_masked_token_mean(self):
        logp = torch.tensor([[-1.0, -2.0, -3.0], [-4.0, -5.0, -6.0]], requires_grad=True)
        mask = torch.tensor([[0.0, 1.0, 1.0], [0.0, 0.0, 1.0]])
        loss = L.sft_loss(logp, mask)
        self.assertAlmostEqual(loss.item(), (2 + 3 + 6) / 3, places=6)
        loss.backward()
        torch.testing.assert_close(logp.grad, torch.tensor([[0.0, -1 / 3, -1 / 3], [0.0, 0.0, -1 / 3]]))

    def test_prompt_tokens_do_not_count(self):
        mask = torch.tensor([[0.0, 1.0]])
        a = L.sft_loss(torch.tensor([[-100.0, -1.0]]), mask)
        b = L.sft_loss(torch.tensor([[-0.1, -1.0]]), mask)
        self.assertEqual(a.item(), b.item())


class EncodeTest(unittest.TestCase):
    def test_mask_marks_completion_targets(self):
        from gpu_bridge.batch import Sample, encode

        enc = encode([Sample([256, 1, 2], [3, 4]), Sample([256, 9], [7])], 258, torch.device("cpu"), 64)
        self.assertEqual(enc.ids.tolist(), [[256, 1, 2, 3, 4], [256, 9, 7, 258, 258]])
        # targets are ids[:, 1:]: [1, 2, 3, 4] and [9, 7, pad, pad]
        self.assertEqual(enc.mask.tolist(), [[0.0, 0.0, 1.0, 1.0], [0.0, 1.0, 0.0, 0.0]])


if __name__ == "__main__":
    unittest.main()
