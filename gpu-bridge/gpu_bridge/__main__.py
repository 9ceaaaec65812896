"""Entry points:

  python3 -m gpu_bridge --stdio                       the protocol on stdin/stdout
  python3 -m gpu_bridge --listen HOST:PORT --token-file F [--cert C --key K]
                                                      the protocol over TCP (TLS with cert/key)
  python3 -m gpu_bridge serve --backend toy|hf [--model PATH] [--port P] [--admin-token-file F] [--exit-with-stdin]
                                                      OpenAI-compatible HTTP server
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from .bridge import DEFAULT_MAX_REQUEST_BYTES, Bridge


def _read_token(path, env: str):
    if path:
        with open(path) as f:
            tok = f.read().strip()
    else:
        tok = os.environ.get(env)
    if tok is not None and len(tok) < 16:
        sys.exit(f"gpu_bridge: the token must be at least 16 characters")
    return tok


def _keep_freed_memory() -> None:
    """Have glibc's malloc serve tensors up to 32 MiB from its heap and keep freed memory there:
    by default each such tensor is a fresh mmap whose pages fault in one by one, which made a
    copy of a 4 MB cache 50x slower than from reused memory (measured on a loaded 2-core box)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD (32 MiB is glibc's maximum)
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass  # not glibc: its allocator's defaults stay


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _keep_freed_memory()
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="gpu_bridge %(levelname)s %(message)s")
    if argv[:1] == ["serve"]:
        return _serve(argv[1:])
    ap = argparse.ArgumentParser(prog="python3 -m gpu_bridge", description="crucible's trainer bridge")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--stdio", action="store_true", help="speak the protocol on stdin/stdout")
    mode.add_argument("--listen", metavar="HOST:PORT", help="speak the protocol over TCP")
    ap.add_argument("--token-file", help="TCP: file holding the shared token (else $GPU_BRIDGE_TOKEN)")
    ap.add_argument("--cert", help="TCP: TLS certificate (PEM)")
    ap.add_argument("--key", help="TCP: TLS private key (PEM)")
    ap.add_argument("--max-request-bytes", type=int, default=DEFAULT_MAX_REQUEST_BYTES)
    ap.add_argument("--heartbeat", type=float, default=5.0, help="seconds between heartbeat lines")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    a = ap.parse_args(argv)
    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    bridge = Bridge(max_request_bytes=a.max_request_bytes)
    from .transport import serve_stdio, serve_tcp

    if a.stdio:
        serve_stdio(bridge, a.heartbeat)
        return 0
    host, _, port = a.listen.rpartition(":")
    token = _read_token(a.token_file, "GPU_BRIDGE_TOKEN")
    if not token:
        sys.exit("gpu_bridge: --listen needs a shared token (--token-file or GPU_BRIDGE_TOKEN)")
    if bool(a.cert) != bool(a.key):
        sys.exit("gpu_bridge: TLS needs both --cert and --key")
    serve_tcp(bridge, host or "127.0.0.1", int(port), token, a.heartbeat, a.cert, a.key)
    return 0


def _exit_when_stdin_ends() -> None:
    """A server whose starter died without stopping it (SIGKILL, a crash) would serve on, holding
    its memory and port: the starter's end of the pipe closes with it, and so does this server."""
    import threading

    def watch():
        try:
            while sys.stdin.buffer.read(4096):
                pass
        finally:
            os._exit(0)

    threading.Thread(target=watch, name="stdin-watch", daemon=True).start()


def _serve(argv) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m gpu_bridge serve", description="OpenAI-compatible server")
    ap.add_argument("--backend", choices=["toy", "hf"], default="toy")
    ap.add_argument("--model", help="a published checkpoint, a root of versions (latest stable), or an hf model")
    ap.add_argument("--config", help="toy: JSON model config for random weights when --model is absent")
    ap.add_argument("--served-model-name", default=None)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--admin-token-file", help="file holding the admin token (else $GPU_BRIDGE_ADMIN_TOKEN); no token: admin disabled")
    ap.add_argument("--batch-window-ms", type=float, default=5.0,
                    help="how long the first waiting request waits for others to share its batch (it goes at once when every open connection has one in)")
    ap.add_argument("--max-batch-rows", type=int, default=256, help="rows (prompts x n) decoded together at most")
    ap.add_argument("--exit-with-stdin", action="store_true",
                    help="exit when stdin reaches its end: the process that started the server (holding the pipe) is gone")
    a = ap.parse_args(argv)
    if a.exit_with_stdin:
        _exit_when_stdin_ends()
    if a.batch_window_ms < 0 or a.max_batch_rows < 1:
        sys.exit("gpu_bridge serve: --batch-window-ms must be >= 0 and --max-batch-rows >= 1")
    from .serve import Served, run_server

    name = a.served_model_name or (os.path.basename(os.path.normpath(a.model)) if a.model else f"{a.backend}-policy")
    from .errors import BridgeError

    try:
        served = Served(a.backend, a.model, name, a.device, a.seed, json.loads(a.config) if a.config else None)
    except BridgeError as e:
        sys.exit(f"gpu_bridge serve: {e.code}: {e.message}")
    run_server(served, a.host, a.port, _read_token(a.admin_token_file, "GPU_BRIDGE_ADMIN_TOKEN"),
               window_ms=a.batch_window_ms, max_rows=a.max_batch_rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
