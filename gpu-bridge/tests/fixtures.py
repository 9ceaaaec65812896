"""Test fixtures: a real bridge subprocess, batch files, an in-process bridge."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Optional

PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if PKG_ROOT not in sys.path:
    sys.path.insert(0, PKG_ROOT)

from gpu_bridge.bridge import Bridge  # noqa: E402

TINY = {"d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64, "max_seq_len": 256}


def env() -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = PKG_ROOT + os.pathsep + e.get("PYTHONPATH", "")
    e.setdefault("OMP_NUM_THREADS", "1")
    return e


def write_batch(directory: str, rows, name: str = "batch.jsonl"):
    path = os.path.join(directory, name)
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    with open(path, "wb") as f:
        f.write(data)
    return {"path": path, "sha256": hashlib.sha256(data).hexdigest()}


def grpo_rows(n: int = 6):
    words = ["print(1)", "return x + y", "for i in range(3): pass", "x = [a for a in b]", "pass", "while True: break"]
    return [{"prompt": f"task {i % 3}: ", "completion": words[i % len(words)], "advantage": (1.0 if i % 2 else -1.0) * (0.5 + i / 10)}
            for i in range(n)]


def call(bridge: Bridge, op: str, args: Optional[dict] = None, rid=1, idem=None):
    events = []
    reply = bridge.handle({"v": 1, "id": rid, "op": op, "idem": idem, "args": args or {}}, events.append)
    return reply


def ok(bridge: Bridge, op: str, args: Optional[dict] = None):
    r = call(bridge, op, args)
    if not r["ok"]:
        raise AssertionError(f"{op} failed: {r['error']}")
    return r["result"]


class Proc:
    """A bridge over stdio in a child process."""

    def __init__(self, *extra: str):
        self.p = subprocess.Popen([sys.executable, "-m", "gpu_bridge", "--stdio", *extra], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
        self.n = 0
        self.events = []

    def send_raw(self, data: bytes) -> None:
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def read_reply(self):
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise AssertionError("bridge closed stdout; stderr: " + self.p.stderr.read().decode()[-2000:])
            msg = json.loads(line)
            if "event" in msg:
                self.events.append(msg)
                continue
            return msg

    def request(self, op: str, args: Optional[dict] = None, rid=None):
        self.n += 1
        rid = self.n if rid is None else rid
        self.send_raw((json.dumps({"v": 1, "id": rid, "op": op, "idem": None, "args": args or {}}) + "\n").encode())
        r = self.read_reply()
        assert r["id"] == rid, r
        return r

    def ok(self, op: str, args: Optional[dict] = None):
        r = self.request(op, args)
        if not r["ok"]:
            raise AssertionError(f"{op} failed: {r['error']}")
        return r["result"]

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        for s in (self.p.stdin, self.p.stdout, self.p.stderr):
            try:
                s.close()
            except OSError:
                pass


def wait_for_port(proc: subprocess.Popen, pattern: str, timeout: float = 30.0) -> int:
    """Read the child's stderr until it announces its port."""
    end = time.time() + timeout
    buf = b""
    while time.time() < end:
        line = proc.stderr.readline()
        if not line:
            raise AssertionError("process exited before listening: " + buf.decode()[-2000:])
        buf += line
        m = re.search(pattern.encode(), line)
        if m:
            return int(m.group(1))
    raise AssertionError("no port announced: " + buf.decode()[-2000:])


def tmpdir(test) -> str:
    d = tempfile.TemporaryDirectory()
    test.addCleanup(d.cleanup)
    return d.name
