"""OpenAI-compatible HTTP server over one policy (`python3 -m gpu_bridge serve`).

Endpoints: GET /v1/models (and /v1/models/{id}), POST /v1/completions, POST /v1/chat/completions
(n, temperature, top_p, max_tokens, stop, seed, logprobs, stream), GET /health, and an admin
endpoint that swaps in a published version, as vLLM's load_lora_adapter and SGLang's
update_weights_from_disk do: POST /admin/load_version {path} | {root, version?} (alias
/update_weights_from_disk {model_path}), which needs `Authorization: Bearer <admin token>`. Only
stable, hash-verified checkpoints load; a failed load leaves the served weights as they were.

Each connection has its own thread; generation requests go to one Batcher, which decodes the
requests that arrive together as one batch. A batch holds the model's lock while it decodes, so
a weight swap waits for the batch in flight and the next batch samples from the new weights.
"""

from __future__ import annotations

import hmac
import json
import os
import queue
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import List, Optional

from . import checkpoint as ck
from . import openai_api as api
from .backends import backend_class
from .batcher import Batcher, Job
from .bridge import pick_device
from .errors import BridgeError
from .sampling import decode_rows, make_rows

MAX_BODY = 8 << 20
STATUS = {"bad_request": 400, "unauthorized": 401, "not_found": 404, "torn_checkpoint": 409, "hash_mismatch": 409,
          "unavailable": 503, "oom": 503, "internal": 500}


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
        tok = self.policy.tokenizer
        self.vocab = getattr(tok, "vocab_size", None) or len(tok.tok)

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

    def run_batch(self, jobs: List[Job]) -> None:
        """Decode every row of the jobs as one batch, on the weights of one version."""
        with self.lock:
            for j in jobs:
                j.version = self.version
            decode_rows(self.policy, [r for j in jobs for r in j.rows])


def _error_body(status: int, message: str, code: str) -> dict:
    typ = {401: "authentication_error", 403: "permission_error", 404: "not_found_error"}.get(status)
    typ = typ or ("server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": typ, "param": None, "code": code}}


def make_handler(served: Served, batcher: Batcher, admin_token: Optional[str]):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self):
            super().setup()
            batcher.connection(+1)

        def finish(self):
            batcher.connection(-1)
            super().finish()

        def log_message(self, fmt, *args):  # to stderr, terse
            sys.stderr.write("serve: " + (fmt % args) + "\n")

        def _send(self, status: int, obj: dict) -> None:
            data = json.dumps(obj).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, code: str) -> None:
            self._send(status, _error_body(status, message, code))

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

        def _model(self) -> dict:
            return {"id": served.name, "object": "model", "created": 0, "owned_by": "crucible",
                    "version": served.version, "sha256": served.sha256}

        def do_GET(self):
            if self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [self._model()]})
            elif self.path == f"/v1/models/{served.name}":
                self._send(200, self._model())
            elif self.path.startswith("/v1/models/"):
                self._error(404, f"model {self.path[len('/v1/models/'):]!r} is not served here; serving {served.name!r}", "model_not_found")
            elif self.path == "/health":
                self._send(200, {"ok": True, "version": served.version, **batcher.stats})
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
                    self._generate(body, chat=False)
                elif self.path == "/v1/chat/completions":
                    self._generate(body, chat=True)
                else:
                    self._error(404, f"no route POST {self.path}", "not_found")
            except BridgeError as e:
                self._error(STATUS.get(e.code, 400), e.message, e.code)
            except (ValueError, TypeError) as e:
                self._error(400, str(e), "bad_request")

        def _authorized(self) -> bool:
            if admin_token is None:
                self._error(403, "the admin endpoint is disabled: start serve with --admin-token-file", "admin_disabled")
                return False
            given = self.headers.get("Authorization", "")
            if not (given.startswith("Bearer ") and hmac.compare_digest(given[7:].encode(), admin_token.encode())):
                self._error(401, "missing or wrong admin token (Authorization: Bearer ...)", "unauthorized")
                return False
            return True

        def _generate(self, body: dict, chat: bool) -> None:
            m = body.get("model")
            if m not in (None, served.name):
                return self._error(404, f"model {m!r} is not served here; serving {served.name!r}", "model_not_found")
            tok = served.policy.tokenizer
            req = api.read_chat(body, tok) if chat else api.read_completions(body, tok, served.vocab)
            events: Optional[queue.Queue] = queue.Queue() if req.stream else None
            sink = (lambda row, d: events.put(("delta", row.index, d))) if events is not None else None
            job = batcher.submit(Job(make_rows(served.policy, req.prompts, req.params, sink), events))
            ident = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
            if req.stream:
                return self._stream(job, req, chat, ident)
            job.done.wait()
            if job.error is not None:
                raise job.error
            choice = api.chat_choice if chat else api.completion_choice
            choices = [choice(tok, r.index, r) for r in job.rows]
            self._send(200, {"id": ident, "object": "chat.completion" if chat else "text_completion", "created": int(time.time()),
                             "model": served.name, "system_fingerprint": f"v{job.version}", "choices": choices,
                             "usage": api.usage(req.prompts, sum(len(r.ids) for r in job.rows))})

        # --- server-sent events ---
        def _chunk(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        def _event(self, obj) -> None:
            self._chunk(b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode("utf-8")) + b"\n\n")

        def _stream(self, job: Job, req: api.Request, chat: bool, ident: str) -> None:
            first = job.events.get()
            if first[0] == "end" and first[1] is not None:  # failed before any token: a plain error reply
                raise first[1]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            tok = served.policy.tokenizer
            base = {"id": ident, "object": "chat.completion.chunk" if chat else "text_completion", "created": int(time.time()),
                    "model": served.name, "system_fingerprint": f"v{job.version}"}
            offsets = [0] * len(job.rows)  # completions: text_offset so far, per choice
            started = [False] * len(job.rows)  # chat: role sent
            finished = [False] * len(job.rows)
            tokens = 0
            try:
                ev = first
                while ev[0] == "delta":
                    _, i, d = ev
                    tokens += len(d["token_ids"])
                    for c in self._choices(tok, chat, i, d, offsets, started):
                        self._event({**base, "choices": [c]})
                    finished[i] = finished[i] or d["finish_reason"] is not None
                    ev = job.events.get()
                if ev[1] is not None:
                    e = ev[1]
                    self._event(_error_body(STATUS.get(e.code, 500), e.message, e.code))
                else:
                    for i, r in enumerate(job.rows):  # rows with nothing to sample (max_tokens 0)
                        if not finished[i]:
                            d = {"token_ids": [], "tokens": [], "logprobs": [] if r.params.logprobs else None, "top_logprobs": None, "text": "", "finish_reason": r.finish or "length"}
                            for c in self._choices(tok, chat, i, d, offsets, started):
                                self._event({**base, "choices": [c]})
                    if req.include_usage:
                        self._event({**base, "choices": [], "usage": api.usage(req.prompts, tokens)})
                self._event(b"[DONE]")
                self._chunk(b"")
            except (BrokenPipeError, ConnectionResetError):
                job.abandon()
                self.close_connection = True

        @staticmethod
        def _choices(tok, chat: bool, i: int, d: dict, offsets: list, started: list) -> list:
            lp = None
            tops = d["top_logprobs"]
            if chat:
                out = []
                if not started[i]:
                    started[i] = True
                    out.append({"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None})
                if d["token_ids"]:
                    if d["logprobs"] is not None:
                        lp = api.chat_logprobs(tok, d["token_ids"], d["tokens"], d["logprobs"], tops)
                    out.append({"index": i, "delta": {"content": d["text"]}, "logprobs": lp, "finish_reason": None, "token_ids": d["token_ids"]})
                if d["finish_reason"] is not None:
                    out.append({"index": i, "delta": {}, "logprobs": None, "finish_reason": d["finish_reason"]})
                return out
            if d["logprobs"] is not None:
                lp = api.completion_logprobs(tok, d["tokens"], d["logprobs"], tops, offsets[i])
            offsets[i] += len(d["text"])
            return [{"index": i, "text": d["text"], "logprobs": lp, "finish_reason": d["finish_reason"], "token_ids": d["token_ids"]}]

    return Handler


class _Server(ThreadingHTTPServer):
    # socketserver's default backlog is 5: the kernel may drop the connections of a burst of
    # more new clients, whose retry (TCP's first, a second later) misses their peers' batch.
    request_queue_size = 128


def run_server(served: Served, host: str, port: int, admin_token: Optional[str], ready=None,
               window_ms: float = 5.0, max_rows: int = 256) -> None:
    batcher = Batcher(served.run_batch, window_ms / 1000.0, max_rows).start()
    httpd = _Server((host, port), make_handler(served, batcher, admin_token))
    httpd.daemon_threads = True
    print(f"gpu_bridge serve: {served.name} v{served.version} on http://{host}:{httpd.server_address[1]} "
          f"(batch window {window_ms:g} ms, up to {max_rows} rows)", file=sys.stderr, flush=True)
    if ready:
        ready(httpd.server_address[1])
    httpd.serve_forever()
