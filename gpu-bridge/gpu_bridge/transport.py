"""JSON-lines framing over a byte stream (stdio or a TCP/TLS socket).

Each request line gets exactly one reply line with the same id. Between replies the bridge may
write event lines, which carry an "event" key and no "ok": heartbeats (every few seconds, with
the op in progress) and progress of a long op. A request longer than the limit is answered with
`too_large` (its id recovered from the first bytes when possible) and skipped to its newline.
"""

from __future__ import annotations

import hmac
import json
import re
import socket
import ssl
import sys
import threading
import time
from typing import BinaryIO, Optional

from .bridge import Bridge

_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.){1,200}"|-?\d{1,18})')


class LineWriter:
    """Serializes whole lines from several threads (replies, heartbeats)."""

    def __init__(self, out: BinaryIO):
        self.out = out
        self.lock = threading.Lock()
        self.closed = False

    def write(self, obj: dict) -> None:
        data = (json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")
        with self.lock:
            if self.closed:
                return
            try:
                self.out.write(data)
                self.out.flush()
            except (BrokenPipeError, OSError, ValueError):
                self.closed = True


def _recover_id(prefix: bytes):
    m = _ID.search(prefix[:4096])
    if not m:
        return None
    try:
        return json.loads(m.group(1))
    except ValueError:
        return None


def _heartbeat(bridge: Bridge, w: LineWriter, every: float, stop: threading.Event) -> None:
    seq = 0
    while not stop.wait(every):
        seq += 1
        w.write({"event": "heartbeat", "seq": seq, "t": time.time(), "busy": bridge.busy})


def _json_safe(obj):
    """NaN/inf are not JSON: report them as null rather than break the line."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def serve_stream(bridge: Bridge, inp: BinaryIO, out: BinaryIO, heartbeat_s: float = 5.0,
                 token: Optional[str] = None) -> None:
    """Answer requests from `inp` until EOF or shutdown. With `token`, the first request must be
    hello carrying args.token, or the stream is refused and closed."""
    w = LineWriter(out)
    stop = threading.Event()
    hb = threading.Thread(target=_heartbeat, args=(bridge, w, heartbeat_s, stop), daemon=True)
    hb.start()
    limit = bridge.max_request_bytes
    authed = token is None
    try:
        while not bridge.stopping:
            line = inp.readline(limit + 1)
            if not line:
                return
            if len(line) > limit and not line.endswith(b"\n"):
                rid = _recover_id(line)
                skipped = len(line)
                while True:  # drop the rest of the oversized line
                    more = inp.readline(1 << 20)
                    skipped += len(more)
                    if not more or more.endswith(b"\n"):
                        break
                w.write({"id": rid, "ok": False, "error": {"code": "too_large", "retryable": False,
                         "message": f"request of {skipped} bytes exceeds the limit of {limit} bytes; send batches by reference (a JSONL file and its sha256)"}})
                continue
            if not line.strip():
                continue
            try:
                req = json.loads(line)
            except (ValueError, UnicodeDecodeError) as e:
                w.write({"id": _recover_id(line), "ok": False,
                         "error": {"code": "bad_json", "message": f"request line is not JSON: {e}", "retryable": False}})
                continue
            if not authed:
                args = req.get("args") if isinstance(req, dict) else None
                given = args.get("token") if isinstance(args, dict) else None
                if not (isinstance(req, dict) and req.get("op") == "hello" and isinstance(given, str)
                        and hmac.compare_digest(given.encode(), token.encode())):
                    w.write({"id": req.get("id") if isinstance(req, dict) else None, "ok": False,
                             "error": {"code": "unauthorized", "message": "the first request must be hello with args.token set to the bridge's token", "retryable": False}})
                    return
                authed = True
            reply = bridge.handle(req, w.write)
            w.write(_json_safe(reply))
    finally:
        stop.set()


def serve_stdio(bridge: Bridge, heartbeat_s: float) -> None:
    """stdout carries protocol lines only: the real fd 1 is kept for the protocol and fd 1 is
    pointed at stderr, so stray prints (ours, a library's, C code's) cannot corrupt the stream."""
    import os

    proto = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve_stream(bridge, sys.stdin.buffer, proto, heartbeat_s)


def serve_tcp(bridge: Bridge, host: str, port: int, token: str, heartbeat_s: float,
              cert: Optional[str] = None, key: Optional[str] = None, ready=None) -> None:
    """One client at a time (one trainer per GPU); each must authenticate with the token."""
    ctx = None
    if cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
    srv = socket.create_server((host, port))
    print(f"gpu_bridge listening on {host}:{srv.getsockname()[1]}{' (TLS)' if ctx else ''}", file=sys.stderr, flush=True)
    if ready:
        ready(srv.getsockname()[1])
    with srv:
        while not bridge.stopping:
            conn, addr = srv.accept()
            try:
                if ctx:
                    conn = ctx.wrap_socket(conn, server_side=True)
                with conn:
                    rf, wf = conn.makefile("rb"), conn.makefile("wb")
                    try:
                        serve_stream(bridge, rf, wf, heartbeat_s, token)
                    finally:
                        # The socket closes only once its file objects are closed too.
                        rf.close()
                        wf.close()
            except (OSError, ssl.SSLError) as e:
                print(f"gpu_bridge: client {addr} dropped: {e}", file=sys.stderr, flush=True)
