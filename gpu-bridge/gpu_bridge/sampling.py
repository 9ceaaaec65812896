"""Sampling with a KV cache, shared by every backend (they provide `step(ids, past)`).

Log-probabilities reported per token are those of the raw model distribution (temperature 1, no
top-p), which is what the trainer computes, so they can be passed back as `old_logprobs`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional

import torch

from .errors import bad_request


@dataclass
class SamplingParams:
    n: int = 1
    max_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    stop: List[str] = field(default_factory=list)
    seed: Optional[int] = None
    logprobs: bool = False
    top_logprobs: int = 0

    @staticmethod
    def from_json(a: dict) -> "SamplingParams":
        stop = a.get("stop") or []
        if isinstance(stop, str):
            stop = [stop]
        p = SamplingParams(
            n=int(a.get("n", 1)),
            max_tokens=int(a.get("max_tokens", 64)),
            temperature=float(a.get("temperature", 1.0)),
            top_p=float(a.get("top_p", 1.0)),
            stop=[str(s) for s in stop],
            seed=None if a.get("seed") is None else int(a["seed"]),
            logprobs=bool(a.get("logprobs", False)),
            top_logprobs=int(a.get("top_logprobs", 0) or 0),
        )
        if p.n < 1 or p.n > 1024:
            raise bad_request(f"n must be in 1..1024, got {p.n}")
        if p.max_tokens < 0:
            raise bad_request(f"max_tokens must be >= 0, got {p.max_tokens}")
        if p.temperature < 0:
            raise bad_request(f"temperature must be >= 0, got {p.temperature}")
        if not (0 < p.top_p <= 1):
            raise bad_request(f"top_p must be in (0, 1], got {p.top_p}")
        if any(s == "" for s in p.stop):
            raise bad_request("stop strings must be non-empty")
        if not (0 <= p.top_logprobs <= 20):
            raise bad_request(f"top_logprobs must be in 0..20, got {p.top_logprobs}")
        return p


def _filter_top_p(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    if top_p >= 1.0:
        return probs
    sorted_p, idx = torch.sort(probs, dim=-1, descending=True)
    cum = torch.cumsum(sorted_p, dim=-1)
    # Drop a token when the mass before it already reaches top_p (the first token always stays).
    drop = (cum - sorted_p) >= top_p
    sorted_p = sorted_p.masked_fill(drop, 0.0)
    out = torch.zeros_like(probs).scatter(-1, idx, sorted_p)
    return out / out.sum(dim=-1, keepdim=True)


@torch.no_grad()
def sample(policy, prompt_ids: List[int], params: SamplingParams,
           generator: Optional[torch.Generator] = None) -> List[dict]:
    """n samples of one prompt (see sample_batch)."""
    return sample_batch(policy, [prompt_ids], params, generator)[0]


# Rows (prompts x n) decoded together; larger requests run in chunks of whole prompts.
MAX_ROWS = 256


@torch.no_grad()
def sample_batch(policy, prompts: List[List[int]], params: SamplingParams,
                 generator: Optional[torch.Generator] = None) -> List[List[dict]]:
    """n samples of each prompt, decoded as one left-padded batch. Each sample: text, token_ids
    (as sampled, EOS included when emitted), logprobs, finish_reason ("stop" on EOS or a stop
    string, "length" when max_tokens or the context runs out)."""
    for ids in prompts:
        if len(ids) == 0:
            raise bad_request("a prompt is empty after tokenization")
        if len(ids) > policy.max_seq_len:
            raise bad_request(f"a prompt has {len(ids)} tokens; the model's context is {policy.max_seq_len}")
    per = max(1, MAX_ROWS // params.n)
    out: List[List[dict]] = []
    for i in range(0, len(prompts), per):
        out.extend(_sample_rows(policy, prompts[i:i + per], params, generator))
    return out


def _sample_rows(policy, prompts: List[List[int]], params: SamplingParams, generator) -> List[List[dict]]:
    tok = policy.tokenizer
    n = params.n
    rows = [p for p in prompts for _ in range(n)]
    r = len(rows)
    longest = max(len(p) for p in rows)
    # Left padding puts every row's last prompt token in the last column, so each step appends
    # one column for all rows; positions count real tokens only.
    ids = torch.full((r, longest), tok.pad_id, dtype=torch.long)
    mask = torch.zeros((r, longest), dtype=torch.long)
    for i, p in enumerate(rows):
        ids[i, longest - len(p):] = torch.tensor(p)
        mask[i, longest - len(p):] = 1
    dev = policy.device
    ids, mask = ids.to(dev), mask.to(dev)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    budgets = [max(0, min(params.max_tokens, policy.max_seq_len - len(p))) for p in rows]
    steps = max(budgets)
    out_ids: List[List[int]] = [[] for _ in range(r)]
    out_lp: List[List[float]] = [[] for _ in range(r)]
    out_top: List[List[dict]] = [[] for _ in range(r)]
    finish: List[Optional[str]] = [None if b > 0 else "length" for b in budgets]
    text_end: List[Optional[int]] = [None] * r
    was_training = policy.model.training
    policy.model.eval()
    try:
        past = None
        feed = ids
        for step in range(steps):
            if all(f is not None for f in finish):
                break
            logits, past = policy.step(feed, past, mask, positions)
            logits = logits.float()
            logp = torch.log_softmax(logits, dim=-1)
            if params.temperature == 0:
                nxt = torch.argmax(logits, dim=-1)
            else:
                probs = _filter_top_p(torch.softmax(logits / params.temperature, dim=-1), params.top_p)
                nxt = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
            chosen_lp = logp.gather(-1, nxt.unsqueeze(-1)).squeeze(-1).tolist()
            top = torch.topk(logp, params.top_logprobs, dim=-1) if params.top_logprobs else None
            toks = nxt.tolist()
            for i in range(r):
                if finish[i] is not None:
                    continue
                out_ids[i].append(toks[i])
                out_lp[i].append(chosen_lp[i])
                if top is not None:
                    out_top[i].append({tok.token_text(j): lp for j, lp in zip(top.indices[i].tolist(), top.values[i].tolist())})
                if toks[i] == tok.eos_id:
                    finish[i] = "stop"
                elif params.stop:
                    text = tok.decode(out_ids[i])
                    hits = [text.find(s) for s in params.stop if s in text]
                    if hits:
                        finish[i] = "stop"
                        text_end[i] = min(hits)
                if finish[i] is None and len(out_ids[i]) >= budgets[i]:
                    finish[i] = "length"
            feed = nxt.unsqueeze(-1)
            mask = torch.cat([mask, torch.ones((r, 1), dtype=mask.dtype, device=dev)], dim=-1)
            positions = positions[:, -1:] + 1
    finally:
        policy.model.train(was_training)
    results: List[dict] = []
    for i in range(r):
        body = [t for t in out_ids[i] if t != tok.eos_id]
        text = tok.decode(body)
        if text_end[i] is not None:
            text = text[: text_end[i]]
        res = {"text": text, "token_ids": out_ids[i], "finish_reason": finish[i] or "length"}
        if params.logprobs or params.top_logprobs:
            res["logprobs"] = out_lp[i]
            res["tokens"] = [tok.token_text(t) for t in out_ids[i]]
        if params.top_logprobs:
            res["top_logprobs"] = out_top[i]
        results.append(res)
    return [results[k * n:(k + 1) * n] for k in range(len(prompts))]


def make_generator(device: torch.device, seed: Optional[int]) -> Optional[torch.Generator]:
    """A private generator when a seed is given (same seed, same samples), else the global RNG
    (whose state save_state captures)."""
    if seed is None:
        return None
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


GenerateFn = Callable[[List[int], SamplingParams], List[dict]]
