"""Sampling with a KV cache, shared by every backend (they provide `step(ids, past, mask, positions)`).

Every sampled sequence is a `Row` with its own parameters (temperature, top_p, max_tokens, stop,
logprobs) and its own uniforms, so rows of different requests decode together in one batch and
each gives what it would give alone: a seeded row draws its uniforms from a generator seeded by
the request's seed and the row's index in the request (prompt-major, then sample), an unseeded
one from the global RNG (whose state save_state captures) when the row is made. A token is drawn
by inverting the row's cumulative distribution at its uniform for that step.

Log-probabilities reported per token are those of the raw model distribution (temperature 1, no
top-p), which is what the trainer computes, so they can be passed back as `old_logprobs`.

Token strings (`tokens`): token i's string is the part of the text that became final with it.
A token that ends inside a UTF-8 character gets "" and the character goes to the token that
completes it; the last token (EOS included) takes whatever the end leaves (an unfinished character
decodes to U+FFFD); tokens from a stop string on get "". So the strings joined equal `text`
exactly, and each token still has its log-probability (one per entry of `token_ids`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional

import torch

from .errors import bad_request


@dataclass
class SamplingParams:
    n: int = 1
    # None: up to the end of the model's context.
    max_tokens: Optional[int] = 64
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
        if not isinstance(stop, list):
            raise bad_request(f"stop must be a string or a list of strings, got {type(stop).__name__}")
        max_tokens = a.get("max_tokens", 64)
        p = SamplingParams(
            n=_int(a.get("n", 1), "n"),
            max_tokens=None if max_tokens is None else _int(max_tokens, "max_tokens"),
            temperature=_float(a.get("temperature", 1.0), "temperature"),
            top_p=_float(a.get("top_p", 1.0), "top_p"),
            stop=[str(s) for s in stop],
            seed=None if a.get("seed") is None else _int(a["seed"], "seed"),
            logprobs=bool(a.get("logprobs", False)),
            top_logprobs=_int(a.get("top_logprobs", 0) or 0, "top_logprobs"),
        )
        if p.n < 1 or p.n > 1024:
            raise bad_request(f"n must be in 1..1024, got {p.n}")
        if p.max_tokens is not None and p.max_tokens < 0:
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


def _int(v, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or int(v) != v:
        raise bad_request(f"{name} must be an integer, got {v!r}")
    return int(v)


def _float(v, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise bad_request(f"{name} must be a number, got {v!r}")
    return float(v)


_M64 = (1 << 64) - 1


def row_seed(seed: int, index: int) -> int:
    """A well-mixed seed per row (splitmix64), so neighbouring seeds and rows share no stream."""
    z = (seed + (index + 1) * 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return (z ^ (z >> 31)) >> 1  # 63 bits: manual_seed takes it on every torch


Delta = dict
DeltaSink = Callable[["Row", Delta], None]


class Row:
    """One sequence to sample and, as it decodes, what it sampled."""

    def __init__(self, policy, prompt: List[int], params: SamplingParams, index: int = 0,
                 on_delta: Optional[DeltaSink] = None):
        if len(prompt) == 0:
            raise bad_request("a prompt is empty after tokenization")
        if len(prompt) > policy.max_seq_len:
            raise bad_request(f"a prompt has {len(prompt)} tokens; the model's context is {policy.max_seq_len}")
        self.tok = policy.tokenizer
        self.prompt = prompt
        self.params = params
        self.index = index
        room = policy.max_seq_len - len(prompt)
        self.budget = room if params.max_tokens is None else max(0, min(params.max_tokens, room))
        self.uniforms: Optional[torch.Tensor] = None
        if params.temperature > 0 and self.budget > 0:
            g = None
            if params.seed is not None:
                g = torch.Generator()
                g.manual_seed(row_seed(params.seed, index))
            self.uniforms = torch.rand(self.budget, generator=g, dtype=torch.float64)
        self.on_delta = on_delta
        self.abandoned = False  # set by a reader that went away: the row stops at its next step
        self.ids: List[int] = []
        self.lps: List[float] = []
        self.tops: List[List[tuple]] = []  # per token: (token id, logprob) of the top_logprobs alternatives
        self._body: List[int] = []
        self._track = bool(params.stop or params.logprobs or params.top_logprobs or on_delta)
        self._text = ""
        self._offsets: List[int] = []  # per token: chars of final text once it was sampled
        self.cut: Optional[int] = None
        self.finish: Optional[str] = None if self.budget > 0 else "length"
        self._sent = 0  # tokens already passed to on_delta
        self._sent_chars = 0

    # --- decoding ---
    def push(self, token: int, logprob: float, top: Optional[List[tuple]]) -> None:
        self.ids.append(token)
        self.lps.append(logprob)
        if top is not None:
            self.tops.append(top)
        if token == self.tok.eos_id:
            self.finish = "stop"
        else:
            self._body.append(token)
            if self._track:
                self._text = self.tok.decode(self._body)
                if self.params.stop:
                    hits = [self._text.find(s) for s in self.params.stop if s in self._text]
                    if hits:
                        self.finish = "stop"
                        self.cut = min(hits)
        self._offsets.append(max(_stable(self._text), self._offsets[-1] if self._offsets else 0))
        if self.finish is None and self.abandoned:
            self.finish = "abort"
        if self.finish is None and len(self.ids) >= self.budget:
            self.finish = "length"
        if self.on_delta is not None:
            self._emit()

    def text(self) -> str:
        text = self._text if self._track else self.tok.decode(self._body)
        return text if self.cut is None else text[: self.cut]

    def token_strings(self) -> List[str]:
        return self._strings(0, len(self.ids), final=self.finish is not None)[0]

    def _strings(self, start: int, end: int, final: bool):
        """Strings of tokens start..end-1 and the char offset after them (see the module doc)."""
        text = self.text() if final else self._text
        limit = len(text)
        prev = self._offsets[start - 1] if start > 0 else 0
        prev = min(prev, limit)
        out = []
        for i in range(start, end):
            o = limit if final and i == len(self.ids) - 1 else self._offsets[i]
            o = min(max(o, prev), limit)
            out.append(text[prev:o])
            prev = o
        return out, prev

    def _emit(self) -> None:
        """Pass on the tokens whose text can no longer change: not an unfinished character, not
        a possible start of a stop string."""
        final = self.finish is not None
        k = len(self.ids)
        if not final:
            safe = _stable(self._text) - _stop_holdback(self._text[: _stable(self._text)], self.params.stop)
            k = self._sent
            while k < len(self.ids) and self._offsets[k] <= safe:
                k += 1
        if k == self._sent and not final:
            return
        strings, _ = self._strings(self._sent, k, final)
        delta = {"token_ids": self.ids[self._sent:k], "tokens": strings, "logprobs": self.lps[self._sent:k] if self.params.logprobs else None,
                 "top_logprobs": self.tops[self._sent:k] if self.params.top_logprobs else None,
                 "text": "".join(strings), "finish_reason": self.finish}
        self._sent = k
        self.on_delta(self, delta)

    def result(self) -> dict:
        """The sample as generate returns it: text, token_ids (as sampled, EOS included when
        emitted), finish_reason; logprobs and tokens (and top_logprobs) when asked."""
        res = {"text": self.text(), "token_ids": list(self.ids), "finish_reason": self.finish or "length"}
        if self.params.logprobs or self.params.top_logprobs:
            res["logprobs"] = list(self.lps)
            res["tokens"] = self.token_strings()
        if self.params.top_logprobs:
            res["top_logprobs"] = [{self.tok.token_text(j): lp for j, lp in top} for top in self.tops]
        return res


def _stable(text: str) -> int:
    """Chars of `text` that later tokens cannot change: all but a trailing unfinished character."""
    n = len(text)
    while n and text[n - 1] == "\ufffd":
        n -= 1
    return n


def _stop_holdback(text: str, stops: List[str]) -> int:
    """Length of the longest end of `text` that begins some stop string."""
    best = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), best, -1):
            if text.endswith(s[:k]):
                best = k
                break
    return best


# Rows decoded together at most; larger sets run in chunks.
MAX_ROWS = 256


@torch.no_grad()
def decode_rows(policy, rows: List[Row]) -> None:
    """Sample every row to its end. Rows are packed into chunks of at most MAX_ROWS whose longest
    prompt plus longest budget fits the context (left padding makes every row as long as the
    longest); rows are independent, so packing changes no row's output."""
    todo = sorted((r for r in rows if r.finish is None), key=lambda r: (len(r.prompt), r.budget))
    chunk: List[Row] = []
    longest = budget = 0
    for r in todo:
        nl, nb = max(longest, len(r.prompt)), max(budget, r.budget)
        if chunk and (len(chunk) >= MAX_ROWS or nl + nb > policy.max_seq_len):
            _decode_chunk(policy, chunk)
            chunk, nl, nb = [], len(r.prompt), r.budget
        chunk.append(r)
        longest, budget = nl, nb
    if chunk:
        _decode_chunk(policy, chunk)


def _left_padded(prompts: List[List[int]], pad_id: int, dev):
    """Left padding puts every row's last prompt token in the last column, so each step appends
    one column for all rows; positions count real tokens only."""
    longest = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), longest), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, longest - len(p):] = torch.tensor(p)
        mask[i, longest - len(p):] = 1
    ids, mask = ids.to(dev), mask.to(dev)
    return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)


def _prefill(policy, rows: List[Row], select, room: int):
    """The prompts' forward pass, once per distinct prompt (the n samples of a request share
    theirs), its cache then copied out to the rows."""
    dev = policy.device
    where: dict = {}
    line = [where.setdefault(tuple(x.prompt), len(where)) for x in rows]
    if select is not None and len(where) < len(rows):
        ids, mask, positions = _left_padded([list(p) for p in where], policy.tokenizer.pad_id, dev)
        logits, past = policy.step(ids, None, mask, positions, room)
        sel = torch.tensor(line, device=dev)
        spread = select(past, sel)
        if spread is not None:
            return logits[sel], spread, mask[sel], positions[sel]
    ids, mask, positions = _left_padded([x.prompt for x in rows], policy.tokenizer.pad_id, dev)
    logits, past = policy.step(ids, None, mask, positions, room)
    return logits, past, mask, positions


def _decode_chunk(policy, rows: List[Row]) -> None:
    dev = policy.device
    r = len(rows)
    steps = max(x.budget for x in rows)
    temps = torch.tensor([x.params.temperature for x in rows], dtype=torch.float32, device=dev)
    top_p = torch.tensor([x.params.top_p for x in rows], dtype=torch.float32, device=dev)
    uniforms = torch.full((r, steps), 0.5, dtype=torch.float64)
    for i, x in enumerate(rows):
        if x.uniforms is not None:
            uniforms[i, : len(x.uniforms)] = x.uniforms
    uniforms = uniforms.to(dev)
    k_top = max(x.params.top_logprobs for x in rows)
    live = list(range(r))  # which row each batch line holds
    select = getattr(policy, "select_rows", None)
    was_training = policy.model.training
    policy.model.eval()
    try:
        logits, past, mask, positions = _prefill(policy, rows, select, steps)
        for step in range(steps):
            logits = logits.float()
            logp = torch.log_softmax(logits, dim=-1)
            nxt = _pick(logits, temps, top_p, uniforms[:, step])
            chosen = logp.gather(-1, nxt.unsqueeze(-1)).squeeze(-1).tolist()
            toks = nxt.tolist()
            top_i = top_v = None
            if k_top:
                t = torch.topk(logp, k_top, dim=-1)
                top_i, top_v = t.indices.tolist(), t.values.tolist()
            for b, ri in enumerate(live):
                x = rows[ri]
                if x.finish is not None:
                    continue
                k = x.params.top_logprobs
                x.push(toks[b], chosen[b], list(zip(top_i[b][:k], top_v[b][:k])) if k else None)
            alive = [b for b, ri in enumerate(live) if rows[ri].finish is None]
            if not alive:
                break
            if select is not None and len(alive) <= len(live) // 2:
                # Drop finished rows from the batch once they are half of it: the cache copy
                # costs about one step and every later step gets cheaper.
                sel = torch.tensor(alive, device=dev)
                kept = select(past, sel)
                if kept is None:  # a cache the backend cannot cut: keep every row to the end
                    select = None
                else:
                    past = kept
                    nxt, mask, positions = nxt[sel], mask[sel], positions[sel]
                    temps, top_p, uniforms = temps[sel], top_p[sel], uniforms[sel]
                    live = [live[b] for b in alive]
            mask = torch.cat([mask, torch.ones((len(live), 1), dtype=mask.dtype, device=dev)], dim=-1)
            positions = positions[:, -1:] + 1
            logits, past = policy.step(nxt.unsqueeze(-1), past, mask, positions)
    finally:
        policy.model.train(was_training)


def _pick(logits: torch.Tensor, temps: torch.Tensor, top_p: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Per row: argmax when its temperature is 0, else the token where its cumulative
    distribution (temperature, then top-p) first exceeds its uniform."""
    greedy = torch.argmax(logits, dim=-1)
    if bool((temps == 0).all()):
        return greedy
    probs = torch.softmax(logits / temps.clamp(min=1e-6).unsqueeze(-1), dim=-1).double()
    if bool((top_p < 1).any()):
        probs = _filter_top_p(probs, top_p.double().unsqueeze(-1))
    cum = probs.cumsum(-1)
    x = (u * cum[:, -1]).unsqueeze(-1)
    # right=True: the first token whose cumulative mass exceeds x, never one of probability 0.
    drawn = torch.searchsorted(cum, x, right=True).squeeze(-1).clamp(max=probs.shape[-1] - 1)
    return torch.where(temps == 0, greedy, drawn)


def _filter_top_p(probs: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    sorted_p, idx = torch.sort(probs, dim=-1, descending=True)
    cum = torch.cumsum(sorted_p, dim=-1)
    # Drop a token when the mass before it already reaches top_p (the first token always stays).
    drop = (cum - sorted_p) >= top_p
    sorted_p = sorted_p.masked_fill(drop, 0.0)
    return torch.zeros_like(probs).scatter(-1, idx, sorted_p)


def make_rows(policy, prompts: List[List[int]], params: SamplingParams,
              on_delta: Optional[DeltaSink] = None) -> List[Row]:
    """params.n rows per prompt, indexed prompt-major (the index seeds a row's uniforms)."""
    return [Row(policy, p, params, k * params.n + j, on_delta) for k, p in enumerate(prompts) for j in range(params.n)]


@torch.no_grad()
def sample_batch(policy, prompts: List[List[int]], params: SamplingParams) -> List[List[dict]]:
    """n samples of each prompt (see Row.result)."""
    rows = make_rows(policy, prompts, params)
    decode_rows(policy, rows)
    n = params.n
    return [[x.result() for x in rows[k * n:(k + 1) * n]] for k in range(len(prompts))]


def sample(policy, prompt_ids: List[int], params: SamplingParams) -> List[dict]:
    """n samples of one prompt."""
    return sample_batch(policy, [prompt_ids], params)[0]
