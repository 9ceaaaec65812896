"""Policy losses as pure functions of tensors (no model, no I/O).

Shapes: per-token tensors are (B, T) with a 0/1 `mask` marking completion tokens; per-sequence
tensors are (B,). Every loss takes its normalizers (`Denominators`) from the caller so that a batch
split into micro-batches sums to exactly the loss of the whole batch: the trainer computes the
denominators once over the full batch and passes them to every micro-batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import torch

AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "constant")


@dataclass(frozen=True)
class Denominators:
    """Normalizers measured over the whole batch (not the micro-batch)."""

    tokens: float  # completion tokens in the batch
    sequences: float  # samples in the batch
    constant: float = 1.0  # Dr.GRPO: a fixed length (e.g. the max completion length)

    @staticmethod
    def of(mask: torch.Tensor, constant: float = 1.0) -> "Denominators":
        return Denominators(tokens=float(mask.sum().item()), sequences=float(mask.shape[0]), constant=constant)


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, mode: str, den: Denominators) -> torch.Tensor:
    """Reduce per-token values to a scalar.

    token-mean: sum over all tokens / tokens in the batch (long answers weigh more; DAPO).
    seq-mean-token-mean: each sequence's token mean, then the mean over sequences (GRPO paper).
    constant: sum over all tokens / (sequences * constant) (Dr.GRPO: no length bias).
    """
    m = mask.to(per_token.dtype)
    if mode == "token-mean":
        return (per_token * m).sum() / max(den.tokens, 1.0)
    if mode == "seq-mean-token-mean":
        lens = m.sum(dim=-1).clamp(min=1.0)
        return ((per_token * m).sum(dim=-1) / lens).sum() / max(den.sequences, 1.0)
    if mode == "constant":
        return (per_token * m).sum() / (max(den.sequences, 1.0) * den.constant)
    raise ValueError(f"unknown aggregation {mode!r}; expected one of {', '.join(AGGREGATIONS)}")


def masked_sum(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask.to(x.dtype)).sum()


def masked_sum_rows(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-sequence sum over masked tokens: (B, T) -> (B,) (sequence log-probabilities)."""
    return (x * mask.to(x.dtype)).sum(dim=-1)


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor, bound: float = 10.0) -> torch.Tensor:
    """Schulman's k3 estimator of KL(policy || reference) per token: exp(d) - d - 1 with
    d = ref - policy. Unbiased, always >= 0; clamped like verl's low_var_kl to keep one wild token
    from dominating."""
    d = torch.clamp(ref_logp - logp, min=-20.0, max=20.0)
    return torch.clamp(torch.exp(d) - d - 1.0, min=-bound, max=bound)


@dataclass(frozen=True)
class GrpoConfig:
    clip_low: float = 0.2
    clip_high: float = 0.28  # clip-higher (DAPO): a larger upper bound keeps exploration alive
    dual_clip: Optional[float] = None  # c > 1 caps the loss of negative-advantage tokens (dual-clip PPO)
    kl_coef: float = 0.0
    aggregation: str = "token-mean"
    constant: float = 1.0

    def check(self) -> "GrpoConfig":
        if not (0 <= self.clip_low < 1):
            raise ValueError(f"clip_low must be in [0, 1), got {self.clip_low}")
        if self.clip_high < 0:
            raise ValueError(f"clip_high must be >= 0, got {self.clip_high}")
        if self.dual_clip is not None and self.dual_clip <= 1:
            raise ValueError(f"dual_clip must be > 1, got {self.dual_clip}")
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {', '.join(AGGREGATIONS)}, got {self.aggregation!r}")
        if self.aggregation == "constant" and self.constant <= 0:
            raise ValueError(f"constant must be > 0, got {self.constant}")
        return self


def grpo_token_losses(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    cfg: GrpoConfig,
    ref_logp: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    """Per-token PPO-clip loss with asymmetric clip and optional dual-clip and k3 KL.

    `advantages` is (B,), one per sample (GRPO broadcasts a sequence's advantage to its tokens).
    Returns the per-token loss (B, T) and per-token indicator/value tensors for metrics.
    """
    adv = advantages.to(logp.dtype).unsqueeze(-1).expand_as(logp)
    ratio = torch.exp(torch.clamp(logp - old_logp, min=-20.0, max=20.0))
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1.0 - cfg.clip_low, 1.0 + cfg.clip_high)
    pg = torch.maximum(unclipped, clipped)
    # A token is "clipped" when the clipped branch wins, i.e. its gradient is cut.
    clip_low_hit = (clipped > unclipped) & (adv < 0)
    clip_high_hit = (clipped > unclipped) & (adv > 0)
    dual_hit = torch.zeros_like(pg, dtype=torch.bool)
    if cfg.dual_clip is not None:
        # For negative advantages the loss -A*ratio grows without bound as ratio grows;
        # dual-clip caps it at -A*c (no gradient beyond).
        cap = -adv * cfg.dual_clip
        capped = torch.minimum(pg, cap)
        dual_hit = (adv < 0) & (cap < pg)
        pg = torch.where(adv < 0, capped, pg)
    stats: Dict[str, torch.Tensor] = {
        "pg": pg.detach(),
        "ratio": ratio.detach(),
        "clip_low": clip_low_hit.to(logp.dtype),
        "clip_high": clip_high_hit.to(logp.dtype),
        "dual_clip": dual_hit.to(logp.dtype),
    }
    loss = pg
    if cfg.kl_coef != 0.0:
        if ref_logp is None:
            raise ValueError("kl_coef is set but no reference log-probabilities were given")
        kl = k3_kl(logp, ref_logp)
        stats["kl"] = kl.detach()
        loss = loss + cfg.kl_coef * kl
    return loss, stats


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    cfg: GrpoConfig,
    ref_logp: Optional[torch.Tensor] = None,
    den: Optional[Denominators] = None,
) -> torch.Tensor:
    """The scalar GRPO loss of a (micro-)batch; `den` defaults to this batch's own."""
    per_token, _ = grpo_token_losses(logp, old_logp, advantages, cfg, ref_logp)
    return aggregate(per_token, mask, cfg.aggregation, den or Denominators.of(mask, cfg.constant))


def sft_loss(logp: torch.Tensor, mask: torch.Tensor, den: Optional[Denominators] = None) -> torch.Tensor:
    """Masked negative log-likelihood, token mean over the whole batch (prompt tokens excluded)."""
    d = den or Denominators.of(mask)
    return -masked_sum(logp, mask) / max(d.tokens, 1.0)


@dataclass(frozen=True)
class KtoConfig:
    beta: float = 0.1
    desirable_weight: float = 1.0
    undesirable_weight: float = 1.0

    def check(self) -> "KtoConfig":
        if self.beta <= 0:
            raise ValueError(f"beta must be > 0, got {self.beta}")
        if self.desirable_weight < 0 or self.undesirable_weight < 0:
            raise ValueError("desirable_weight and undesirable_weight must be >= 0")
        return self


def rotate_completions(n: int) -> list:
    """Index of the completion paired with prompt i for the KL estimate: the previous sample's
    (i - 1 mod n), so no prompt is paired with its own completion when n > 1."""
    return [(i - 1) % n for i in range(n)]


def kto_reference_point(mismatched_policy_logps: torch.Tensor, mismatched_ref_logps: torch.Tensor) -> torch.Tensor:
    """z0: the batch's KL(policy || reference) estimated on mismatched (prompt, completion) pairs,
    detached (no gradient flows through the reference point) and clamped at 0."""
    return (mismatched_policy_logps - mismatched_ref_logps).mean().detach().clamp(min=0.0)


def kto_sample_losses(
    policy_logps: torch.Tensor,
    ref_logps: torch.Tensor,
    desirable: torch.Tensor,
    z0: torch.Tensor,
    cfg: KtoConfig,
) -> torch.Tensor:
    """Per-sample KTO loss: w_d (1 - sigmoid(beta (r - z0))) for desirable samples,
    w_u (1 - sigmoid(beta (z0 - r))) for undesirable ones, with r the sequence log-ratio
    (sum over completion tokens of policy minus reference log-probabilities)."""
    r = policy_logps - ref_logps
    z = z0.detach()
    good = cfg.desirable_weight * (1.0 - torch.sigmoid(cfg.beta * (r - z)))
    bad = cfg.undesirable_weight * (1.0 - torch.sigmoid(cfg.beta * (z - r)))
    return torch.where(desirable.bool(), good, bad)


def kto_loss(
    policy_logps: torch.Tensor,
    ref_logps: torch.Tensor,
    desirable: torch.Tensor,
    mismatched_policy_logps: torch.Tensor,
    mismatched_ref_logps: torch.Tensor,
    cfg: KtoConfig,
    sequences: Optional[float] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Mean KTO loss over the batch and the reference point used. `sequences` is the full batch
    size when this is a micro-batch (then z0 must come from the full batch too: pass its
    mismatched log-probabilities, or use kto_sample_losses directly)."""
    z0 = kto_reference_point(mismatched_policy_logps, mismatched_ref_logps)
    losses = kto_sample_losses(policy_logps, ref_logps, desirable, z0, cfg)
    n = sequences if sequences is not None else float(policy_logps.shape[0])
    return losses.sum() / max(n, 1.0), z0


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of each position's next-token distribution, (B, T, V) -> (B, T)."""
    logz = torch.log_softmax(logits.float(), dim=-1)
    return -(logz.exp() * logz).sum(dim=-1)
