"""OpenAI's request and response shapes for serve: reading a completions or chat request into
prompts and sampling parameters, and writing sampled rows back as a response or as stream chunks.

Defaults and limits follow OpenAI: completions' max_tokens defaults to 16 and 0 samples nothing;
chat's max_completion_tokens (or max_tokens) defaults to the rest of the context and must be at
least 1. Parameters that would change what is sampled but are not implemented (echo, best_of,
suffix, logit_bias, penalties, tools, a JSON response_format) are refused, not ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from .errors import bad_request
from .sampling import Row, SamplingParams

COMPLETIONS_DEFAULT_MAX_TOKENS = 16


@dataclass
class Request:
    prompts: List[List[int]]
    params: SamplingParams
    stream: bool
    include_usage: bool


def _refuse_unsupported(body: dict, chat: bool) -> None:
    if body.get("echo"):
        raise bad_request("echo is not supported")
    if body.get("best_of") not in (None, 1, body.get("n", 1)):
        raise bad_request("best_of is not supported (leave it out, or equal to n)")
    if body.get("suffix") not in (None, ""):
        raise bad_request("suffix is not supported")
    if body.get("logit_bias"):
        raise bad_request("logit_bias is not supported")
    for k in ("presence_penalty", "frequency_penalty"):
        if body.get(k) not in (None, 0, 0.0):
            raise bad_request(f"{k} is not supported (leave it out or 0)")
    if chat:
        if body.get("tools") or body.get("functions") or body.get("tool_choice") not in (None, "none"):
            raise bad_request("tools and functions are not supported")
        rf = body.get("response_format")
        if rf is not None and (not isinstance(rf, dict) or rf.get("type") != "text"):
            raise bad_request("response_format other than {type: text} is not supported")


def _stream(body: dict):
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise bad_request(f"stream must be a boolean, got {stream!r}")
    opts = body.get("stream_options")
    if opts is not None and not isinstance(opts, dict):
        raise bad_request("stream_options must be an object")
    return bool(stream), bool((opts or {}).get("include_usage"))


def _common(body: dict) -> dict:
    return {k: body[k] for k in ("n", "temperature", "top_p", "stop", "seed") if body.get(k) is not None}


def _token_ids(p, vocab: int, where: str) -> List[int]:
    if not p or not all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < vocab for t in p):
        raise bad_request(f"{where} must be a non-empty list of token ids in 0..{vocab - 1}")
    return list(p)


def read_completions(body: dict, tok, vocab: int) -> Request:
    _refuse_unsupported(body, chat=False)
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        prompts = [tok.encode(prompt, add_bos=True)]
    elif isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        prompts = [tok.encode(p, add_bos=True) for p in prompt]
    elif isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        prompts = [_token_ids(prompt, vocab, "prompt")]
    elif isinstance(prompt, list) and prompt and all(isinstance(p, list) for p in prompt):
        prompts = [_token_ids(p, vocab, f"prompt[{i}]") for i, p in enumerate(prompt)]
    else:
        raise bad_request("prompt must be a string, a non-empty list of strings, a list of token ids or a list of such lists")
    a = _common(body)
    mt = body.get("max_tokens")
    a["max_tokens"] = COMPLETIONS_DEFAULT_MAX_TOKENS if mt is None else mt
    lp = body.get("logprobs")
    if lp is not None:
        if isinstance(lp, bool) or not isinstance(lp, int):
            raise bad_request(f"logprobs must be an integer (how many alternatives per token, 0..20), got {lp!r}")
        a["logprobs"] = True
        a["top_logprobs"] = lp
    stream, usage = _stream(body)
    return Request(prompts, SamplingParams.from_json(a), stream, usage)


def _content(m, i: int) -> str:
    if not isinstance(m, dict):
        raise bad_request(f"messages[{i}] must be an object {{role, content}}")
    c = m.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list) and all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in c):
        return "".join(p["text"] for p in c)
    raise bad_request(f"messages[{i}].content must be a string or a list of text parts")


def read_chat(body: dict, tok) -> Request:
    _refuse_unsupported(body, chat=True)
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise bad_request("messages must be a non-empty list of {role, content}")
    messages = [{"role": m.get("role", "user") if isinstance(m, dict) else "user", "content": _content(m, i)} for i, m in enumerate(msgs)]
    a = _common(body)
    mt = body.get("max_completion_tokens")
    name = "max_completion_tokens"
    if mt is None:
        mt, name = body.get("max_tokens"), "max_tokens"
    if mt is not None:
        if isinstance(mt, bool) or not isinstance(mt, int) or mt < 1:
            raise bad_request(f"{name} must be an integer of at least 1, got {mt!r}")
    a["max_tokens"] = mt
    lp = body.get("logprobs")
    if lp is not None and not isinstance(lp, bool):
        raise bad_request(f"logprobs must be a boolean, got {lp!r}")
    top = body.get("top_logprobs")
    if top is not None and not lp:
        raise bad_request("top_logprobs needs logprobs: true")
    a["logprobs"] = bool(lp)
    a["top_logprobs"] = top or 0
    stream, usage = _stream(body)
    return Request([tok.encode(tok.chat_prompt(messages), add_bos=True)], SamplingParams.from_json(a), stream, usage)


# --- responses ---

def completion_logprobs(tok, tokens: List[str], lps: List[float], tops, start: int) -> dict:
    offs, o = [], start
    for t in tokens:
        offs.append(o)
        o += len(t)
    return {"tokens": tokens, "token_logprobs": lps, "text_offset": offs,
            "top_logprobs": None if tops is None else [{tok.token_text(j): v for j, v in top} for top in tops]}


def chat_logprobs(tok, ids: List[int], tokens: List[str], lps: List[float], tops) -> dict:
    """`token` follows the module rule of sampling.py (the strings join to the content); `bytes`
    are each token's own bytes, and alternatives are named by their own bytes."""
    return {"content": [{"token": t, "logprob": lp, "bytes": tok.token_bytes(i),
                         "top_logprobs": [{"token": tok.token_text(j), "logprob": v, "bytes": tok.token_bytes(j)}
                                          for j, v in (tops[k] if tops else [])]}
                        for k, (i, t, lp) in enumerate(zip(ids, tokens, lps))]}


def completion_choice(tok, index: int, row: Row) -> dict:
    lp = None
    if row.params.logprobs:
        lp = completion_logprobs(tok, row.token_strings(), row.lps, row.tops if row.params.top_logprobs else None, 0)
    return {"index": index, "text": row.text(), "logprobs": lp, "finish_reason": row.finish or "length", "token_ids": row.ids}


def chat_choice(tok, index: int, row: Row) -> dict:
    lp = None
    if row.params.logprobs:
        lp = chat_logprobs(tok, row.ids, row.token_strings(), row.lps, row.tops if row.params.top_logprobs else None)
    return {"index": index, "message": {"role": "assistant", "content": row.text()}, "logprobs": lp,
            "finish_reason": row.finish or "length", "token_ids": row.ids}


def usage(prompts: List[List[int]], completion_tokens: int) -> dict:
    """Each prompt counted once, as OpenAI counts it whatever n is."""
    p = sum(len(x) for x in prompts)
    return {"prompt_tokens": p, "completion_tokens": completion_tokens, "total_tokens": p + completion_tokens}
