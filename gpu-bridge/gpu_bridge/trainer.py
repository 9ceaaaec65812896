"""One loaded policy and its training step.

A step reads the whole batch, splits it into micro-batches whose losses are normalized by the
whole batch (so accumulated gradients equal one big batch's), and calls optimizer.step only after
every micro-batch succeeded and the gradient norm is finite. The version counts applied steps.
"""

from __future__ import annotations

import math
import resource
import time
from collections import OrderedDict
from dataclasses import asdict
from typing import Callable, Dict, List, Optional

import torch

from . import losses as L
from .batch import Encoded, Sample, encode, read_batch, token_logprobs
from .errors import BridgeError, bad_request

# Applied batch ids remembered for idempotency (also saved with the state).
APPLIED_KEEP = 4096

Progress = Callable[[dict], None]


def _num(h: dict, key: str, default, kind=float):
    v = h.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise bad_request(f"hyper.{key} must be a number, got {v!r}")
    return kind(v)


def is_oom(e: BaseException) -> bool:
    return isinstance(e, RuntimeError) and "out of memory" in str(e).lower()


def peak_memory(device: torch.device) -> dict:
    if device.type == "cuda":
        return {"peak_memory_bytes": int(torch.cuda.max_memory_allocated(device)), "memory_kind": "cuda_allocated"}
    return {"peak_memory_bytes": int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024, "memory_kind": "process_rss"}


class PolicyState:
    def __init__(self, name: str, backend: str, policy, create_args: dict, opt_args: dict,
                 version: int, with_reference: bool):
        self.name = name
        self.backend = backend
        self.policy = policy
        self.create_args = create_args
        self.opt_args = opt_args
        self.version = version
        self.reference = policy.make_reference() if with_reference else None
        params = policy.trainable_parameters()
        if not params:
            raise bad_request("the model has no trainable parameters")
        self.optimizer = torch.optim.AdamW(
            params,
            lr=float(opt_args.get("lr", 1e-5)),
            betas=tuple(opt_args.get("betas", (0.9, 0.999))),
            eps=float(opt_args.get("eps", 1e-8)),
            weight_decay=float(opt_args.get("weight_decay", 0.0)),
        )
        self.applied: "OrderedDict[str, dict]" = OrderedDict()
        self.steps = 0

    def describe(self) -> dict:
        return {"policy": self.name, "version": self.version, "steps": self.steps,
                "reference": self.reference is not None, "device": str(self.policy.device),
                "applied_batches": len(self.applied), **self.policy.describe()}

    # --- the step -----------------------------------------------------------------------

    def train_step(self, args: dict, progress: Progress) -> dict:
        batch_id = args.get("batch_id")
        if not isinstance(batch_id, str) or not batch_id:
            raise bad_request("train_step needs batch_id (a non-empty string)")
        ref = args.get("batch")
        if not isinstance(ref, dict) or not isinstance(ref.get("path"), str) or not isinstance(ref.get("sha256"), str):
            raise bad_request("train_step needs batch: {path, sha256}")
        done = self.applied.get(batch_id)
        if done is not None:
            if done["sha256"] != ref["sha256"].lower():
                raise BridgeError("batch_id_conflict", f"batch {batch_id} was applied with sha256 {done['sha256']}, now given {ref['sha256']}")
            return {**done["result"], "duplicate": True}
        expected = args.get("expected_version")
        if not isinstance(expected, int) or isinstance(expected, bool):
            raise bad_request("train_step needs expected_version (an integer)")
        if expected != self.version:
            raise BridgeError("version_mismatch", f"policy {self.name} is at version {self.version}, the batch expects {expected}; nothing applied")
        algorithm = args.get("algorithm")
        hyper = args.get("hyper") or {}
        if not isinstance(hyper, dict):
            raise bad_request("hyper must be an object")
        samples = read_batch(ref["path"], ref["sha256"], str(algorithm), self.policy.tokenizer)
        mb = args.get("micro_batch_size") or len(samples)
        if not isinstance(mb, int) or mb < 1:
            raise bad_request(f"micro_batch_size must be a positive integer, got {mb!r}")
        t0 = time.perf_counter()
        dev = self.policy.device
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        try:
            metrics = self._accumulate(samples, algorithm, hyper, mb, progress)
        except BridgeError:
            self.optimizer.zero_grad(set_to_none=True)
            raise
        except Exception as e:  # noqa: BLE001 -- any failure means nothing is applied
            self.optimizer.zero_grad(set_to_none=True)
            raise BridgeError("oom" if is_oom(e) else "step_failed",
                              f"train_step {batch_id}: {type(e).__name__}: {e}; nothing applied",
                              retryable=is_oom(e)) from e
        params = self.policy.trainable_parameters()
        max_norm = _num(hyper, "max_grad_norm", self.opt_args.get("max_grad_norm", 1.0))
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm and max_norm > 0 else float("inf")))
        if not math.isfinite(grad_norm):
            self.optimizer.zero_grad(set_to_none=True)
            raise BridgeError("non_finite_gradient", f"train_step {batch_id}: gradient norm is {grad_norm}; nothing applied")
        lr = _num(hyper, "lr", None)
        for g in self.optimizer.param_groups:
            if lr is not None:
                g["lr"] = lr
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.version += 1
        self.steps += 1
        seconds = time.perf_counter() - t0
        result = {
            "batch_id": batch_id, "version": self.version, "algorithm": algorithm, "samples": len(samples),
            "micro_batches": metrics.pop("micro_batches"), "grad_norm": grad_norm,
            "lr": self.optimizer.param_groups[0]["lr"], "seconds": seconds,
            "tokens_per_s": metrics["tokens"] / seconds if seconds > 0 else None,
            **metrics, **peak_memory(dev), "duplicate": False,
        }
        self.applied[batch_id] = {"sha256": ref["sha256"].lower(), "result": result}
        while len(self.applied) > APPLIED_KEEP:
            self.applied.popitem(last=False)
        return result

    def _forward_logp(self, enc: Encoded, want_entropy: bool):
        logits = self.policy.forward_logits(enc.ids, enc.attention)
        logp = token_logprobs(logits, enc.ids)
        ent = None
        if want_entropy:
            with torch.no_grad():
                ent = L.masked_sum(L.token_entropy(logits[:, :-1, :].detach()), enc.mask)
        return logp, ent

    @torch.no_grad()
    def _ref_logp(self, enc: Encoded) -> torch.Tensor:
        if self.reference is None:
            raise BridgeError("no_reference", f"policy {self.name} was loaded without reference: true; the KL term and KTO need one")
        return token_logprobs(self.policy.reference_logits(self.reference, enc.ids, enc.attention), enc.ids)

    def _accumulate(self, samples: List[Sample], algorithm: str, hyper: dict, mb: int, progress: Progress) -> dict:
        pol = self.policy
        pad = pol.tokenizer.pad_id
        dev = pol.device
        chunks = [list(range(i, min(i + mb, len(samples)))) for i in range(0, len(samples), mb)]
        n_tok = float(sum(len(s.completion_ids) for s in samples))
        want_entropy = bool(hyper.get("entropy", True))
        sums: Dict[str, float] = {"loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_low": 0.0, "clip_high": 0.0,
                                  "dual_clip": 0.0, "ratio": 0.0}
        tokens = 0
        extra: Dict[str, float] = {}
        try:
            if algorithm == "grpo":
                cfg = L.GrpoConfig(
                    clip_low=_num(hyper, "clip_low", 0.2), clip_high=_num(hyper, "clip_high", 0.28),
                    dual_clip=_num(hyper, "dual_clip", None), kl_coef=_num(hyper, "kl_coef", 0.0),
                    aggregation=str(hyper.get("aggregation", "token-mean")), constant=_num(hyper, "constant", 1.0),
                ).check()
            elif algorithm == "kto":
                kcfg = L.KtoConfig(beta=_num(hyper, "beta", 0.1), desirable_weight=_num(hyper, "desirable_weight", 1.0),
                                   undesirable_weight=_num(hyper, "undesirable_weight", 1.0)).check()
        except ValueError as e:
            raise bad_request(f"hyper: {e}") from e
        den = L.Denominators(tokens=n_tok, sequences=float(len(samples)),
                             constant=cfg.constant if algorithm == "grpo" else 1.0)
        z0 = None
        if algorithm == "kto":
            # The reference point needs the whole batch before any micro-batch's loss.
            rot = L.rotate_completions(len(samples))
            pol_kl, ref_kl = [], []
            with torch.no_grad():
                for idx in chunks:
                    enc = encode([samples[i] for i in idx], pad, dev, pol.max_seq_len,
                                 completions=[samples[rot[i]].completion_ids for i in idx])
                    pol_kl.append(L.masked_sum_rows(token_logprobs(pol.forward_logits(enc.ids, enc.attention), enc.ids), enc.mask))
                    ref_kl.append(L.masked_sum_rows(self._ref_logp(enc), enc.mask))
            z0 = L.kto_reference_point(torch.cat(pol_kl), torch.cat(ref_kl))
            extra["kto_reference_point"] = float(z0)
            extra["desirable"] = float(sum(1 for s in samples if s.label))
            extra["reward_margin"] = 0.0
        pol.model.train()
        for k, idx in enumerate(chunks):
            enc = encode([samples[i] for i in idx], pad, dev, pol.max_seq_len)
            tokens += enc.tokens
            logp, ent = self._forward_logp(enc, want_entropy)
            if ent is not None:
                sums["entropy"] += float(ent)
            if algorithm == "grpo":
                old = torch.where(enc.old_given.unsqueeze(-1), enc.old_logp, logp.detach())
                ref_lp = self._ref_logp(enc) if cfg.kl_coef != 0.0 else None
                per_tok, st = L.grpo_token_losses(logp, old, enc.advantages, cfg, ref_lp)
                loss = L.aggregate(per_tok, enc.mask, cfg.aggregation, den)
                for key in ("clip_low", "clip_high", "dual_clip", "ratio"):
                    sums[key] += float(L.masked_sum(st[key], enc.mask))
                if "kl" in st:
                    sums["kl"] += float(L.masked_sum(st["kl"], enc.mask))
            elif algorithm == "kto":
                seq = L.masked_sum_rows(logp, enc.mask)
                ref_seq = L.masked_sum_rows(self._ref_logp(enc), enc.mask)
                per = L.kto_sample_losses(seq, ref_seq, enc.labels, z0, kcfg)
                loss = per.sum() / den.sequences
                sums["kl"] += float((seq.detach() - ref_seq).sum())
                extra["reward_margin"] += float(((seq.detach() - ref_seq) * torch.where(enc.labels, 1.0, -1.0)).sum())
            else:
                loss = L.sft_loss(logp, enc.mask, den)
            if not torch.isfinite(loss):
                raise BridgeError("non_finite_loss", f"micro-batch {k + 1}/{len(chunks)} has a non-finite loss; nothing applied")
            loss.backward()
            sums["loss"] += float(loss.detach())
            progress({"micro_batch": k + 1, "micro_batches": len(chunks)})
        out = {"loss": sums["loss"], "tokens": tokens, "completion_tokens": int(n_tok), "micro_batches": len(chunks)}
        if want_entropy:
            out["entropy"] = sums["entropy"] / max(n_tok, 1.0)
        if algorithm == "grpo":
            out["clip_fraction"] = (sums["clip_low"] + sums["clip_high"]) / max(n_tok, 1.0)
            out["clip_low_fraction"] = sums["clip_low"] / max(n_tok, 1.0)
            out["clip_high_fraction"] = sums["clip_high"] / max(n_tok, 1.0)
            out["dual_clip_fraction"] = sums["dual_clip"] / max(n_tok, 1.0)
            out["ratio_mean"] = sums["ratio"] / max(n_tok, 1.0)
            out["kl"] = sums["kl"] / max(n_tok, 1.0) if cfg.kl_coef != 0.0 else None
        elif algorithm == "kto":
            # Mean sequence log-ratio policy/reference on the matched pairs.
            out["kl"] = sums["kl"] / den.sequences
            extra["reward_margin"] /= den.sequences
        else:
            out["kl"] = None
        out.update(extra)
        return out

    # --- scoring --------------------------------------------------------------------------

    @torch.no_grad()
    def logprobs(self, samples: List[Sample], reference: bool) -> List[List[float]]:
        pol = self.policy
        was = pol.model.training
        pol.model.eval()
        try:
            enc = encode(samples, pol.tokenizer.pad_id, pol.device, pol.max_seq_len)
            lp = self._ref_logp(enc) if reference else token_logprobs(pol.forward_logits(enc.ids, enc.attention), enc.ids)
        finally:
            pol.model.train(was)
        out = []
        for i, s in enumerate(samples):
            p = len(s.prompt_ids)
            out.append(lp[i, p - 1 : p - 1 + len(s.completion_ids)].tolist())
        return out

    # --- state ----------------------------------------------------------------------------

    def state_dict(self) -> dict:
        return {
            "name": self.name, "backend": self.backend, "create_args": self.create_args,
            "opt_args": self.opt_args, "version": self.version, "steps": self.steps,
            "model": self.policy.model.state_dict(),
            "reference": self.reference.model.state_dict() if hasattr(self.reference, "model") else None,
            "with_reference": self.reference is not None,
            "optimizer": self.optimizer.state_dict(),
            "applied": list(self.applied.items()),
        }

    def load_state_dict(self, st: dict) -> None:
        self.policy.model.load_state_dict(st["model"])
        if st.get("reference") is not None and hasattr(self.reference, "model"):
            self.reference.model.load_state_dict(st["reference"])
        self.optimizer.load_state_dict(st["optimizer"])
        self.version = int(st["version"])
        self.steps = int(st["steps"])
        self.applied = OrderedDict((k, v) for k, v in st["applied"])
