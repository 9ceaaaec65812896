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

Cache = List["LayerKV"]


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
        """The token alone: its character when its byte is one (ASCII), else OpenAI's
        `bytes:\\xNN` for a byte that is part of a longer UTF-8 character."""
        if i < 128:
            return chr(i)
        if i < 256:
            return f"bytes:\\x{i:02x}"
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

    def forward(self, x: torch.Tensor, past: Optional["LayerKV"], key_mask: Optional[torch.Tensor] = None,
                cache: bool = False, room: int = 0):
        b, t, d = x.shape
        h = self.n_heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.view(b, t, h, d // h).transpose(1, 2)
        k = k.view(b, t, h, d // h).transpose(1, 2)
        v = v.view(b, t, h, d // h).transpose(1, 2)
        kv = None
        if past is not None:
            kv = past
            k, v = past.append(k, v)
        elif cache:
            kv = LayerKV.start(k, v, room)
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
        return x, kv


class LayerKV:
    """A layer's keys and values for decoding, in buffers with room to grow: a step writes its
    column in place instead of copying the whole cache (a torch.cat per step and layer cost more
    than the step's own compute at a few hundred tokens)."""

    __slots__ = ("k", "v", "n")

    def __init__(self, k: torch.Tensor, v: torch.Tensor, n: int):
        self.k, self.v, self.n = k, v, n

    @staticmethod
    def start(k: torch.Tensor, v: torch.Tensor, room: int) -> "LayerKV":
        """Buffers for these positions and `room` more (it grows by doubling past that)."""
        cap = k.shape[2] + max(room, 1)
        kv = LayerKV(k.new_empty(k.shape[0], k.shape[1], cap, k.shape[3]), v.new_empty(v.shape[0], v.shape[1], cap, v.shape[3]), 0)
        kv.append(k, v)
        return kv

    def append(self, k: torch.Tensor, v: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Add t positions; the keys and values so far (views into the buffers)."""
        t = k.shape[2]
        if self.n + t > self.k.shape[2]:
            cap = max(2 * self.k.shape[2], self.n + t)
            for name in ("k", "v"):
                old = getattr(self, name)
                new = old.new_empty(old.shape[0], old.shape[1], cap, old.shape[3])
                new[:, :, : self.n] = old[:, :, : self.n]
                setattr(self, name, new)
        self.k[:, :, self.n:self.n + t] = k
        self.v[:, :, self.n:self.n + t] = v
        self.n += t
        return self.k[:, :, : self.n], self.v[:, :, : self.n]

    def select(self, rows: torch.Tensor) -> "LayerKV":
        return LayerKV(self.k.index_select(0, rows), self.v.index_select(0, rows), self.n)


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
                key_mask: Optional[torch.Tensor] = None, last_only: bool = False,
                cache: bool = False, room: int = 0) -> Tuple[torch.Tensor, Optional[Cache]]:
        """`positions` (B, t) and `key_mask` (B, past + t) serve left-padded batches (sampling);
        training pads right and needs neither. `last_only`: logits of the last position only (what
        decoding needs: the head over a whole prompt costs about a tenth of its forward)."""
        offset = 0 if not past else past[0].n
        t = ids.shape[1]
        if offset + t > self.cfg.max_seq_len:
            raise bad_request(f"sequence of {offset + t} tokens exceeds the toy model's max_seq_len {self.cfg.max_seq_len}")
        pos = torch.arange(offset, offset + t, device=ids.device) if positions is None else positions
        x = self.drop(self.tok(ids) + self.pos(pos))
        layers: Cache = []
        for i, blk in enumerate(self.blocks):
            x, kv = blk(x, past[i] if past else None, key_mask, cache, room)
            layers.append(kv)
        if last_only:
            x = x[:, -1:]
        logits = self.ln(x) @ self.tok.weight.t()  # tied head
        return logits, layers if (past or cache) else None


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

    def step(self, ids: torch.Tensor, past, attention_mask: torch.Tensor, positions: torch.Tensor, room: int = 0):
        """One incremental decode step for the sampler (left-padded rows): last-position logits
        and the cache. `attention_mask` covers the cache plus `ids`; `room`: how many more
        tokens a new cache should have room for."""
        logits, cache = self.model(ids, past, positions, attention_mask, last_only=True, cache=True, room=room)
        return logits[:, -1, :], cache

    def select_rows(self, past, rows: torch.Tensor):
        """The cache of the given batch rows only (repeats allowed: the sampler copies a shared
        prompt's cache out to its rows, and drops finished rows)."""
        return [kv.select(rows) for kv in past]

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
