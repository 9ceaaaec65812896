"""Training batches arrive by reference: a JSONL file and its sha256, verified before use.

One row per sample:
  prompt | prompt_ids       the prompt as text (tokenized with BOS) or as token ids
  completion | completion_ids  the completion as text or as the ids generate returned
  eos                      (text completions) append EOS: the sample ended by stopping
  advantage                grpo: the sample's advantage (computed by the caller)
  old_logprobs             grpo, optional: per completion token, from the sampling policy;
                           absent means on-policy (ratio 1 at the current weights)
  label                    kto: true for desirable, false for undesirable
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass
from typing import List, Optional

import torch

from .errors import BridgeError, bad_request, not_found

ALGORITHMS = ("grpo", "kto", "sft")


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass
class Sample:
    prompt_ids: List[int]
    completion_ids: List[int]
    advantage: float = 0.0
    old_logprobs: Optional[List[float]] = None
    label: Optional[bool] = None


def read_batch(path: str, sha256: str, algorithm: str, tokenizer, max_bytes: int = 1 << 30) -> List[Sample]:
    """Verify the file's hash, then parse and check every row; errors name the line."""
    if algorithm not in ALGORITHMS:
        raise bad_request(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    if not isinstance(sha256, str) or len(sha256) != 64:
        raise bad_request("batch.sha256 must be 64 hex characters")
    if not os.path.isfile(path):
        raise not_found(f"batch file {path} does not exist")
    if os.path.getsize(path) > max_bytes:
        raise bad_request(f"batch file {path} is {os.path.getsize(path)} bytes; the limit is {max_bytes}")
    with open(path, "rb") as f:
        data = f.read()
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256.lower():
        raise BridgeError("hash_mismatch", f"batch file {path} has sha256 {actual}, expected {sha256}")
    samples: List[Sample] = []
    for no, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{no}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise BridgeError("bad_batch", f"{where}: not JSON ({e.msg})") from e
        if not isinstance(row, dict):
            raise BridgeError("bad_batch", f"{where}: a row must be an object")
        samples.append(_sample(row, algorithm, tokenizer, where))
    if not samples:
        raise BridgeError("bad_batch", f"batch file {path} has no rows")
    return samples


def _ids(row: dict, key: str, where: str) -> Optional[List[int]]:
    v = row.get(key)
    if v is None:
        return None
    if not isinstance(v, list) or not all(isinstance(i, int) and i >= 0 for i in v):
        raise BridgeError("bad_batch", f"{where}: {key} must be a list of non-negative integers")
    return v


def _sample(row: dict, algorithm: str, tok, where: str) -> Sample:
    p_ids = _ids(row, "prompt_ids", where)
    if p_ids is None:
        if not isinstance(row.get("prompt"), str):
            raise BridgeError("bad_batch", f"{where}: needs prompt (string) or prompt_ids")
        p_ids = tok.encode(row["prompt"], add_bos=True)
    c_ids = _ids(row, "completion_ids", where)
    if c_ids is None:
        if not isinstance(row.get("completion"), str):
            raise BridgeError("bad_batch", f"{where}: needs completion (string) or completion_ids")
        c_ids = tok.encode(row["completion"]) + ([tok.eos_id] if row.get("eos") else [])
    if not p_ids:
        raise BridgeError("bad_batch", f"{where}: the prompt is empty")
    if not c_ids:
        raise BridgeError("bad_batch", f"{where}: the completion is empty")
    s = Sample(prompt_ids=p_ids, completion_ids=c_ids)
    if algorithm == "grpo":
        adv = row.get("advantage")
        if not isinstance(adv, (int, float)) or isinstance(adv, bool) or not math.isfinite(adv):
            raise BridgeError("bad_batch", f"{where}: grpo rows need a finite number advantage")
        s.advantage = float(adv)
        olp = row.get("old_logprobs")
        if olp is not None:
            if not isinstance(olp, list) or len(olp) != len(c_ids):
                raise BridgeError("bad_batch", f"{where}: old_logprobs must list one number per completion token ({len(c_ids)})")
            if not all(isinstance(x, (int, float)) and math.isfinite(x) and x <= 0 for x in olp):
                raise BridgeError("bad_batch", f"{where}: old_logprobs must be finite numbers <= 0")
            s.old_logprobs = [float(x) for x in olp]
    elif algorithm == "kto":
        if not isinstance(row.get("label"), bool):
            raise BridgeError("bad_batch", f"{where}: kto rows need label: true (desirable) or false")
        s.label = row["label"]
    return s


@dataclass
class Encoded:
    """A padded (micro-)batch. Targets are ids[:, 1:]; `mask` marks completion targets."""

    ids: torch.Tensor  # (B, T)
    attention: torch.Tensor  # (B, T)
    mask: torch.Tensor  # (B, T-1) float
    old_logp: Optional[torch.Tensor]  # (B, T-1) where every sample carried old_logprobs
    old_given: torch.Tensor  # (B,) bool
    advantages: torch.Tensor  # (B,)
    labels: torch.Tensor  # (B,) bool (kto)
    tokens: int  # all real tokens (prompt + completion)


def encode(samples: List[Sample], pad_id: int, device: torch.device, max_len: int,
           completions: Optional[List[List[int]]] = None) -> Encoded:
    """Pad right. `completions` swaps in other completions (KTO's mismatched pairs)."""
    comps = completions if completions is not None else [s.completion_ids for s in samples]
    seqs = [s.prompt_ids + c for s, c in zip(samples, comps)]
    longest = max(len(x) for x in seqs)
    if longest > max_len:
        raise bad_request(f"a sample has {longest} tokens; the model's context is {max_len}")
    b = len(seqs)
    ids = torch.full((b, longest), pad_id, dtype=torch.long)
    att = torch.zeros((b, longest), dtype=torch.long)
    mask = torch.zeros((b, max(longest - 1, 1)), dtype=torch.float32)
    old = torch.zeros((b, max(longest - 1, 1)), dtype=torch.float32)
    given = torch.zeros(b, dtype=torch.bool)
    for i, (s, c, seq) in enumerate(zip(samples, comps, seqs)):
        ids[i, : len(seq)] = torch.tensor(seq)
        att[i, : len(seq)] = 1
        p = len(s.prompt_ids)
        mask[i, p - 1 : p - 1 + len(c)] = 1.0
        if completions is None and s.old_logprobs is not None:
            old[i, p - 1 : p - 1 + len(c)] = torch.tensor(s.old_logprobs)
            given[i] = True
    return Encoded(
        ids=ids.to(device), attention=att.to(device), mask=mask.to(device),
        old_logp=old.to(device), old_given=given.to(device),
        advantages=torch.tensor([s.advantage for s in samples], dtype=torch.float32, device=device),
        labels=torch.tensor([bool(s.label) for s in samples], dtype=torch.bool, device=device),
        tokens=int(att.sum().item()),
    )


def token_logprobs(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """log p(ids[:, t+1] | ids[:, :t+1]) for each t: (B, T, V) -> (B, T-1)."""
    # gather - logsumexp rather than a full log_softmax: one vocabulary-sized tensor fewer
    # (it matters at 150k-token vocabularies).
    lf = logits[:, :-1, :].float()
    return lf.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1) - torch.logsumexp(lf, dim=-1)
