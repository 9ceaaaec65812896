"""The toy backend: a small pre-LayerNorm causal transformer over bytes, in plain PyTorch.

It trains on CPU under torch 1.13 and exercises every path the hf backend does (tokenize,
generate with a KV cache, per-token log-probabilities, optimizer steps, checkpoints), so the
protocol and the trainer are tested for real without a GPU.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from typing import List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..errors import bad_request

Cache = List[Tuple[torch.Tensor, torch.Tensor]]


class ByteTokenizer:
    """UTF-8 bytes are tokens 0..255; then BOS, EOS, PAD."""

    vocab_size = 259
    bos_id = 256
    eos_id = 257
    pad_id = 258

    def encode(self, text: str, add_bos: bool = False) -> List[int]:
        ids = list(text.encode("utf-8"))
        return [self.bos_id] + ids if add_bos else ids

    def decode(self, ids: List[int]) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")

    def token_text(self, i: int) -> str:
        if i < 256:
            return bytes([i]).decode("latin-1")
        return {256: "<bos>", 257: "<eos>", 258: "<pad>"}.get(i, f"<{i}>")

    def token_bytes(self, i: int) -> List[int]:
        return [i] if i < 256 else []

    def chat_prompt(self, messages: List[dict]) -> str:
        parts = [f"<|{m.get('role', 'user')}|>\n{m.get('content', '')}\n" for m in messages]
        return "".join(parts) + "<|assistant|>\n"


@dataclass
class ToyConfig:
    d_model: int = 128
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 512
    max_seq_len: int = 1024
    dropout: float = 0.0
    vocab_size: int = ByteTokenizer.vocab_size

    @staticmethod
    def from_json(d: dict) -> "ToyConfig":
        known = set(ToyConfig.__dataclass_fields__)
        unknown = sorted(set(d) - known)
        if unknown:
            raise bad_request(f"toy config: unknown keys {unknown}; known: {sorted(known)}")
        cfg = ToyConfig(**d)
        if cfg.d_model % cfg.n_heads:
            raise bad_request(f"toy config: d_model {cfg.d_model} is not divisible by n_heads {cfg.n_heads}")
        return cfg


class Block(nn.Module):
    def __init__(self, cfg: ToyConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.ff1 = nn.Linear(cfg.d_model, cfg.d_ff)
        self.ff2 = nn.Linear(cfg.d_ff, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, past: Optional[Tuple[torch.Tensor, torch.Tensor]],
                key_mask: Optional[torch.Tensor] = None):
        b, t, d = x.shape
        h = self.n_heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.view(b, t, h, d // h).transpose(1, 2)
        k = k.view(b, t, h, d // h).transpose(1, 2)
        v = v.view(b, t, h, d // h).transpose(1, 2)
        if past is not None:
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        s = k.shape[2]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // h)
        # Query i (at absolute position s - t + i) sees keys 0..s - t + i.
        causal = torch.ones(t, s, dtype=torch.bool, device=x.device).tril(diagonal=s - t)
        allowed = causal if key_mask is None else causal & key_mask[:, None, None, :].bool()
        # finfo.min, not -inf: a left-pad query that sees no real key gets a harmless uniform
        # row instead of NaN (its output is never used).
        att = att.masked_fill(~allowed, torch.finfo(att.dtype).min)
        att = self.drop(torch.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.drop(self.proj(y))
        x = x + self.drop(self.ff2(F.gelu(self.ff1(self.ln2(x)))))
        return x, (k, v)


class ToyLM(nn.Module):
    def __init__(self, cfg: ToyConfig):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos = nn.Embedding(cfg.max_seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln = nn.LayerNorm(cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        # GPT-2's scheme: small normal weights keep the tied head's logits near uniform at start.
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, ids: torch.Tensor, past: Optional[Cache] = None, positions: Optional[torch.Tensor] = None,
                key_mask: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, Cache]:
        """`positions` (B, t) and `key_mask` (B, past + t) serve left-padded batches (sampling);
        training pads right and needs neither."""
        offset = 0 if not past else past[0][0].shape[2]
        t = ids.shape[1]
        if offset + t > self.cfg.max_seq_len:
            raise bad_request(f"sequence of {offset + t} tokens exceeds the toy model's max_seq_len {self.cfg.max_seq_len}")
        pos = torch.arange(offset, offset + t, device=ids.device) if positions is None else positions
        x = self.drop(self.tok(ids) + self.pos(pos))
        cache: Cache = []
        for i, blk in enumerate(self.blocks):
            x, kv = blk(x, past[i] if past else None, key_mask)
            cache.append(kv)
        logits = self.ln(x) @ self.tok.weight.t()  # tied head
        return logits, cache


class ToyPolicy:
    """Backend object: the model plus what the trainer and sampler need from a backend."""

    name = "toy"

    def __init__(self, model: ToyLM, device: torch.device):
        self.model = model.to(device)
        self.device = device
        self.tokenizer = ByteTokenizer()
        self.max_seq_len = model.cfg.max_seq_len

    @staticmethod
    def create(args: dict, device: torch.device, seed: int) -> "ToyPolicy":
        path = args.get("model")
        if path:
            return ToyPolicy.from_dir(path, device)
        cfg = ToyConfig.from_json(args.get("config") or {})
        g = torch.random.get_rng_state()
        torch.manual_seed(seed)  # weights depend on the seed only, not on what ran before
        model = ToyLM(cfg)
        torch.random.set_rng_state(g)
        return ToyPolicy(model, device)

    @staticmethod
    def from_dir(path: str, device: torch.device) -> "ToyPolicy":
        cfg_path = os.path.join(path, "config.json")
        w_path = os.path.join(path, "model.pt")
        if not os.path.exists(cfg_path) or not os.path.exists(w_path):
            raise bad_request(f"{path} is not a toy checkpoint (needs config.json and model.pt)")
        with open(cfg_path) as f:
            cfg = ToyConfig.from_json(json.load(f)["toy"])
        model = ToyLM(cfg)
        model.load_state_dict(torch.load(w_path, map_location="cpu"))
        return ToyPolicy(model, device)

    def trainable_parameters(self):
        return [p for p in self.model.parameters() if p.requires_grad]

    def param_count(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def forward_logits(self, ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        # Right padding only: pads sit after every real token, so causal attention never lets a
        # real position see one.
        logits, _ = self.model(ids)
        return logits

    def step(self, ids: torch.Tensor, past, attention_mask: torch.Tensor, positions: torch.Tensor):
        """One incremental decode step for the sampler (left-padded rows): last-position logits
        and the cache. `attention_mask` covers the cache plus `ids`."""
        logits, cache = self.model(ids, past, positions, attention_mask)
        return logits[:, -1, :], cache

    def reference_logits(self, ref: "ToyPolicy", ids, attention_mask):
        return ref.forward_logits(ids, attention_mask)

    def make_reference(self) -> "ToyPolicy":
        clone = ToyLM(self.model.cfg)
        clone.load_state_dict(self.model.state_dict())
        for p in clone.parameters():
            p.requires_grad_(False)
        clone.eval()
        return ToyPolicy(clone, self.device)

    def save(self, directory: str) -> List[str]:
        """Write weights and config into `directory`; returns the files written."""
        torch.save(self.model.state_dict(), os.path.join(directory, "model.pt"))
        with open(os.path.join(directory, "config.json"), "w") as f:
            json.dump({"backend": "toy", "toy": asdict(self.model.cfg)}, f, sort_keys=True)
        return ["model.pt", "config.json"]

    def load_weights(self, directory: str) -> None:
        other = ToyPolicy.from_dir(directory, self.device)
        if asdict(other.model.cfg) != asdict(self.model.cfg):
            raise bad_request(f"{directory}: checkpoint config differs from the loaded model's")
        self.model.load_state_dict(other.model.state_dict())

    def describe(self) -> dict:
        return {"backend": "toy", "config": asdict(self.model.cfg), "params": self.param_count()}
