"""OpenAI-compatible HTTP server over one policy (`python3 -m gpu_bridge serve`).

Endpoints: GET /v1/models, POST /v1/completions, POST /v1/chat/completions (n, temperature,
top_p, max_tokens, stop, seed, logprobs), GET /health, and an admin endpoint that swaps in a
published version, as vLLM's load_lora_adapter and SGLang's update_weights_from_disk do:
POST /admin/load_version {path} | {root, version?} (alias /update_weights_from_disk
{model_path}), which needs `Authorization: Bearer <admin token>`. Only stable, hash-verified
checkpoints load; a failed load leaves the served weights as they were.
"""

from __future__ import annotations

import hmac
import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

import torch

from . import checkpoint as ck
from .backends import backend_class
from .bridge import pick_device
from .errors import BridgeError
from .sampling import SamplingParams, make_generator, sample_batch

MAX_BODY = 8 << 20


class Served:
    """The served policy, its version, and the lock that keeps sampling and reloads apart."""

    def __init__(self, backend: str, model: Optional[str], name: str, device: str, seed: int, config: Optional[dict]):
        self.lock = threading.Lock()
        self.name = name
        self.backend = backend
        self.version = 0
        self.sha256: Optional[str] = None
        args: dict = {}
        path = model
        if model and os.path.isdir(model) and not os.path.exists(os.path.join(model, ck.MANIFEST)) and ck.stable_versions(model):
            path, _ = ck.resolve(root=model)  # a root of versions: serve the latest stable one
        if path and os.path.exists(os.path.join(path, ck.MANIFEST)):
            path, self.sha256 = ck.resolve(path=path)
            self.version = int(ck.manifest(path)["version"])
        if path:
            args["model"] = path
        if config:
            args["config"] = config
        self.policy = backend_class(backend).create(args, pick_device(device), seed)

    def load(self, body: dict) -> dict:
        path = body.get("path") or body.get("model_path")
        root = body.get("root")
        version = body.get("version")
        if version is not None and not isinstance(version, int):
            raise BridgeError("bad_request", "version must be an integer")
        path, digest = ck.resolve(path=path, root=root, version=version, expect_sha256=body.get("sha256"))
        v = int(ck.manifest(path)["version"])
        with self.lock:
            self.policy.load_weights(path)
            self.version, self.sha256 = v, digest
        return {"success": True, "version": v, "path": path, "sha256": digest}


def _params(body: dict, chat: bool) -> SamplingParams:
    a = {k: body[k] for k in ("n", "temperature", "top_p", "stop", "seed") if body.get(k) is not None}
    a["max_tokens"] = body.get("max_completion_tokens") or body.get("max_tokens") or 16
    if chat:
        a["logprobs"] = bool(body.get("logprobs"))
        a["top_logprobs"] = int(body.get("top_logprobs") or 0)
    elif body.get("logprobs") is not None:
        a["logprobs"] = True
        a["top_logprobs"] = int(body["logprobs"])
    return SamplingParams.from_json(a)


def make_handler(served: Served, admin_token: Optional[str]):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # to stderr, terse
            sys.stderr.write("serve: " + (fmt % args) + "\n")

        def _send(self, status: int, obj: dict) -> None:
            data = json.dumps(obj).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, code: str, typ: str = "invalid_request_error") -> None:
            self._send(status, {"error": {"message": message, "type": typ, "param": None, "code": code}})

        def _body(self) -> Optional[dict]:
            n = int(self.headers.get("Content-Length") or 0)
            if n > MAX_BODY:
                self._error(413, f"request body of {n} bytes exceeds {MAX_BODY}", "too_large")
                self.close_connection = True
                return None
            raw = self.rfile.read(n) if n else b"{}"
            try:
                body = json.loads(raw)
            except ValueError as e:
                self._error(400, f"body is not JSON: {e}", "bad_json")
                return None
            if not isinstance(body, dict):
                self._error(400, "body must be a JSON object", "bad_request")
                return None
            return body

        def do_GET(self):
            if self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{
                    "id": served.name, "object": "model", "created": 0, "owned_by": "crucible",
                    "version": served.version, "sha256": served.sha256}]})
            elif self.path == "/health":
                self._send(200, {"ok": True, "version": served.version})
            else:
                self._error(404, f"no route GET {self.path}", "not_found")

        def do_POST(self):
            body = self._body()
            if body is None:
                return
            try:
                if self.path in ("/admin/load_version", "/update_weights_from_disk"):
                    if not self._authorized():
                        return
                    self._send(200, served.load(body))
                elif self.path == "/v1/completions":
                    self._completions(body)
                elif self.path == "/v1/chat/completions":
                    self._chat(body)
                else:
                    self._error(404, f"no route POST {self.path}", "not_found")
            except BridgeError as e:
                status = 404 if e.code == "not_found" else 409 if e.code in ("torn_checkpoint", "hash_mismatch") else 400
                self._error(status, e.message, e.code)
            except (ValueError, TypeError) as e:
                self._error(400, str(e), "bad_request")

        def _authorized(self) -> bool:
            if admin_token is None:
                self._error(403, "the admin endpoint is disabled: start serve with --admin-token-file", "admin_disabled", "permission_error")
                return False
            given = self.headers.get("Authorization", "")
            if not (given.startswith("Bearer ") and hmac.compare_digest(given[7:].encode(), admin_token.encode())):
                self._error(401, "missing or wrong admin token (Authorization: Bearer ...)", "unauthorized", "authentication_error")
                return False
            return True

        def _check_model(self, body: dict) -> bool:
            m = body.get("model")
            if m not in (None, served.name):
                self._error(404, f"model {m!r} is not served here; serving {served.name!r}", "model_not_found")
                return False
            return True

        def _run(self, prompts, params):
            with served.lock:
                tok = served.policy.tokenizer
                gen = make_generator(served.policy.device, params.seed)
                ids = [tok.encode(p, add_bos=True) for p in prompts]
                return list(zip(ids, sample_batch(served.policy, ids, params, gen))), served.version

        def _completions(self, body: dict):
            if not self._check_model(body):
                return
            prompt = body.get("prompt")
            prompts = [prompt] if isinstance(prompt, str) else prompt
            if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
                return self._error(400, "prompt must be a string or a non-empty list of strings", "bad_request")
            params = _params(body, chat=False)
            outs, version = self._run(prompts, params)
            choices, p_tok, c_tok = [], 0, 0
            for ids, res in outs:
                p_tok += len(ids)
                for r in res:
                    c_tok += len(r["token_ids"])
                    lp = None
                    if "logprobs" in r:
                        offs, o = [], 0
                        for t in r["tokens"]:
                            offs.append(o)
                            o += len(t)
                        lp = {"tokens": r["tokens"], "token_logprobs": r["logprobs"],
                              "top_logprobs": r.get("top_logprobs"), "text_offset": offs}
                    choices.append({"index": len(choices), "text": r["text"], "logprobs": lp,
                                    "finish_reason": r["finish_reason"], "token_ids": r["token_ids"]})
            self._send(200, {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
                             "model": served.name, "system_fingerprint": f"v{version}", "choices": choices,
                             "usage": {"prompt_tokens": p_tok, "completion_tokens": c_tok, "total_tokens": p_tok + c_tok}})

        def _chat(self, body: dict):
            if not self._check_model(body):
                return
            msgs = body.get("messages")
            if not isinstance(msgs, list) or not msgs or not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in msgs):
                return self._error(400, "messages must be a non-empty list of {role, content}", "bad_request")
            params = _params(body, chat=True)
            prompt = served.policy.tokenizer.chat_prompt(msgs)
            outs, version = self._run([prompt], params)
            ids, res = outs[0]
            tok = served.policy.tokenizer
            choices, c_tok = [], 0
            for i, r in enumerate(res):
                c_tok += len(r["token_ids"])
                lp = None
                if "logprobs" in r:
                    content = []
                    for j, (t, l) in enumerate(zip(r["token_ids"], r["logprobs"])):
                        top = r.get("top_logprobs", [])
                        content.append({"token": tok.token_text(t), "logprob": l, "bytes": tok.token_bytes(t),
                                        "top_logprobs": [{"token": k, "logprob": v, "bytes": list(k.encode("utf-8"))}
                                                         for k, v in (top[j].items() if j < len(top) else [])]})
                    lp = {"content": content}
                choices.append({"index": i, "message": {"role": "assistant", "content": r["text"]}, "logprobs": lp,
                                "finish_reason": r["finish_reason"]})
            self._send(200, {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                             "model": served.name, "system_fingerprint": f"v{version}", "choices": choices,
                             "usage": {"prompt_tokens": len(ids), "completion_tokens": c_tok, "total_tokens": len(ids) + c_tok}})

    return Handler


def run_server(served: Served, host: str, port: int, admin_token: Optional[str], ready=None) -> None:
    httpd = ThreadingHTTPServer((host, port), make_handler(served, admin_token))
    httpd.daemon_threads = True
    print(f"gpu_bridge serve: {served.name} v{served.version} on http://{host}:{httpd.server_address[1]}", file=sys.stderr, flush=True)
    if ready:
        ready(httpd.server_address[1])
    httpd.serve_forever()
