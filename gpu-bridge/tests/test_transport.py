"""The wire: stdio framing, limits, heartbeats; TCP with a token and TLS; the OpenAI server."""

import json
import os
import socket
import ssl
import subprocess
import sys
import unittest
import urllib.error
import urllib.request

import fixtures
from fixtures import TINY, Bridge, Proc, grpo_rows, ok, wait_for_port, write_batch

TOKEN = "0123456789abcdef-test-token"


class StdioTest(unittest.TestCase):
    """One bridge process for the class (starting torch is the slow part); test_z_ runs last."""

    @classmethod
    def setUpClass(cls):
        cls.br = Proc("--max-request-bytes", "2000", "--heartbeat", "0.2")

    @classmethod
    def tearDownClass(cls):
        cls.br.kill()

    def test_errors_are_replies_and_the_bridge_lives_on(self):
        self.br.send_raw(b'{"v":1,"id":"big","op":"hello","args":{"pad":"' + b"x" * 5000 + b'"}}\n')
        r = self.br.read_reply()
        self.assertEqual((r["id"], r["error"]["code"]), ("big", "too_large"))
        self.assertIn("limit of 2000 bytes", r["error"]["message"])
        self.br.send_raw(b"{not json\n")
        self.assertEqual(self.br.read_reply()["error"]["code"], "bad_json")
        self.assertEqual(self.br.request("warp")["error"]["code"], "unknown_op")
        r = self.br.request("generate", {"policy": "nobody", "prompts": ["x"]})
        self.assertEqual(r["error"]["code"], "not_loaded")
        self.br.send_raw(b'{"v":9,"id":5,"op":"hello"}\n')
        self.assertEqual(self.br.read_reply()["error"]["code"], "unsupported_version")
        self.assertEqual(self.br.ok("hello")["protocol"], 1)

    def test_progress_and_heartbeats_stay_off_replies(self):
        d = fixtures.tmpdir(self)
        self.br.ok("load_policy", {"backend": "toy", "config": TINY})
        b = write_batch(d, grpo_rows(4))
        r = self.br.ok("train_step", {"batch_id": "x", "expected_version": 0, "algorithm": "grpo", "batch": b, "micro_batch_size": 1})
        self.assertEqual(r["micro_batches"], 4)
        progress = [e for e in self.br.events if e["event"] == "progress"]
        self.assertEqual([e["micro_batch"] for e in progress], [1, 2, 3, 4])
        import time

        time.sleep(0.5)
        self.br.ok("status")
        self.assertTrue(any(e["event"] == "heartbeat" for e in self.br.events))

    def test_z_shutdown_exits_cleanly(self):
        self.br.ok("shutdown")
        self.br.p.wait(timeout=10)
        self.assertEqual(self.br.p.returncode, 0)


class StrayPrintTest(unittest.TestCase):
    def test_print_and_c_level_writes_do_not_reach_the_protocol(self):
        code = (
            "import os, sys, runpy\n"
            "sys.argv = ['gpu_bridge', '--stdio']\n"
            "import gpu_bridge.bridge as b\n"
            "orig = b.Bridge.op_status\n"
            "def noisy(self, a, p):\n"
            "    print('hello from print'); os.write(1, b'raw fd write\\n')\n"
            "    return orig(self, a, p)\n"
            "b.Bridge.op_status = noisy\n"
            "runpy.run_module('gpu_bridge', run_name='__main__')\n"
        )
        p = subprocess.run([sys.executable, "-c", code], input=b'{"v":1,"id":1,"op":"status"}\n',
                           capture_output=True, env=fixtures.env(), timeout=60)
        lines = p.stdout.decode().splitlines()
        self.assertEqual(len(lines), 1, p.stdout)
        self.assertTrue(json.loads(lines[0])["ok"])
        self.assertIn("hello from print", p.stderr.decode())
        self.assertIn("raw fd write", p.stderr.decode())


def _lines(sock_file):
    while True:
        line = sock_file.readline()
        if not line:
            return None
        msg = json.loads(line)
        if "event" not in msg:
            return msg


class TcpTest(unittest.TestCase):
    def start(self, *extra):
        d = fixtures.tmpdir(self)
        tf = os.path.join(d, "token")
        with open(tf, "w") as f:
            f.write(TOKEN)
        p = subprocess.Popen([sys.executable, "-m", "gpu_bridge", "--listen", "127.0.0.1:0", "--token-file", tf, *extra],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=fixtures.env())
        self.addCleanup(lambda: (p.kill(), p.wait(), p.stderr.close()))
        return wait_for_port(p, r"listening on 127\.0\.0\.1:(\d+)")

    def exchange(self, f, w, req):
        w.write((json.dumps(req) + "\n").encode())
        w.flush()
        return _lines(f)

    def test_refuses_without_token_then_serves_with_it(self):
        port = self.start()
        with socket.create_connection(("127.0.0.1", port)) as s:
            f, w = s.makefile("rb"), s.makefile("wb")
            r = self.exchange(f, w, {"v": 1, "id": 1, "op": "status", "args": {}})
            self.assertEqual(r["error"]["code"], "unauthorized")
            self.assertIsNone(_lines(f))  # connection closed
        with socket.create_connection(("127.0.0.1", port)) as s:
            f, w = s.makefile("rb"), s.makefile("wb")
            r = self.exchange(f, w, {"v": 1, "id": 1, "op": "hello", "args": {"token": "wrong-token-wrong-token"}})
            self.assertEqual(r["error"]["code"], "unauthorized")
        with socket.create_connection(("127.0.0.1", port)) as s:
            f, w = s.makefile("rb"), s.makefile("wb")
            r = self.exchange(f, w, {"v": 1, "id": 1, "op": "hello", "args": {"token": TOKEN}})
            self.assertTrue(r["ok"], r)
            r = self.exchange(f, w, {"v": 1, "id": 2, "op": "status", "args": {}})
            self.assertTrue(r["ok"], r)

    def test_tls(self):
        d = fixtures.tmpdir(self)
        cert, key = os.path.join(d, "c.pem"), os.path.join(d, "k.pem")
        gen = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                              "-days", "1", "-subj", "/CN=localhost"], capture_output=True)
        if gen.returncode != 0:
            self.skipTest("openssl could not make a test certificate: " + gen.stderr.decode()[-200:])
        port = self.start("--cert", cert, "--key", key)
        ctx = ssl.create_default_context(cafile=cert)
        ctx.check_hostname = False
        with socket.create_connection(("127.0.0.1", port)) as raw, ctx.wrap_socket(raw) as s:
            f, w = s.makefile("rb"), s.makefile("wb")
            r = self.exchange(f, w, {"v": 1, "id": 1, "op": "hello", "args": {"token": TOKEN}})
            self.assertTrue(r["ok"], r)


class ServeTest(unittest.TestCase):
    """serve with the toy model: OpenAI endpoints, then the admin endpoint loads a newer version."""

    @classmethod
    def setUpClass(cls):
        import tempfile

        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.root = os.path.join(d, "versions")
        br = Bridge()
        ok(br, "load_policy", {"backend": "toy", "config": TINY, "seed": 2})
        cls.v0 = ok(br, "publish", {"root": cls.root})
        b = write_batch(d, [{"prompt": "hi", "completion": "there", "advantage": 1.0}])
        ok(br, "train_step", {"batch_id": "s", "expected_version": 0, "algorithm": "grpo", "batch": b, "hyper": {"lr": 0.05}})
        cls.v1 = ok(br, "publish", {"root": cls.root})
        tf = os.path.join(d, "admin")
        with open(tf, "w") as f:
            f.write(TOKEN)
        cls.p = subprocess.Popen([sys.executable, "-m", "gpu_bridge", "serve", "--backend", "toy", "--model", cls.v0["path"],
                                  "--served-model-name", "toy", "--port", "0", "--admin-token-file", tf],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=fixtures.env())
        cls.port = wait_for_port(cls.p, r"on http://127\.0\.0\.1:(\d+)")

    @classmethod
    def tearDownClass(cls):
        cls.p.kill()
        cls.p.wait()
        cls.p.stderr.close()
        cls.tmp.cleanup()

    def http(self, method, path, body=None, token=None):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def test_a_models_and_completions(self):
        s, r = self.http("GET", "/v1/models")
        self.assertEqual((s, r["data"][0]["id"], r["data"][0]["version"]), (200, "toy", 0))
        body = {"model": "toy", "prompt": "def add(a, b):", "n": 3, "max_tokens": 6, "temperature": 0.9, "top_p": 0.95,
                "seed": 11, "logprobs": 2}
        s, r = self.http("POST", "/v1/completions", body)
        self.assertEqual(s, 200, r)
        self.assertEqual(len(r["choices"]), 3)
        for c in r["choices"]:
            self.assertEqual(len(c["logprobs"]["token_logprobs"]), len(c["token_ids"]))
            self.assertTrue(all(lp <= 0 for lp in c["logprobs"]["token_logprobs"]))
            self.assertEqual(len(c["logprobs"]["top_logprobs"][0]), 2)
            self.assertIn(c["finish_reason"], ("stop", "length"))
        self.assertEqual(r["usage"]["completion_tokens"], sum(len(c["token_ids"]) for c in r["choices"]))
        s, again = self.http("POST", "/v1/completions", body)
        self.assertEqual([c["text"] for c in again["choices"]], [c["text"] for c in r["choices"]])  # same seed
        s, r = self.http("POST", "/v1/completions", {**body, "model": "other"})
        self.assertEqual((s, r["error"]["code"]), (404, "model_not_found"))
        s, r = self.http("POST", "/v1/completions", {"prompt": "x", "top_p": 2})
        self.assertEqual(s, 400)
        self.assertIn("top_p", r["error"]["message"])

    def test_b_chat_with_stop_and_logprobs(self):
        # Greedy decoding with a stop string taken from the greedy output itself.
        base = {"messages": [{"role": "user", "content": "Say something."}], "max_tokens": 12, "temperature": 0}
        s, r = self.http("POST", "/v1/chat/completions", base)
        self.assertEqual(s, 200, r)
        full = r["choices"][0]["message"]["content"]
        self.assertEqual(r["choices"][0]["message"]["role"], "assistant")
        stop = next((full[i:i + 1] for i in range(3, len(full)) if full[i:i + 1].strip()), None)
        if stop is None:
            self.skipTest("greedy output too short to pick a stop string")
        s, r = self.http("POST", "/v1/chat/completions", {**base, "stop": [stop], "logprobs": True, "top_logprobs": 1})
        c = r["choices"][0]
        self.assertEqual(c["finish_reason"], "stop")
        self.assertEqual(c["message"]["content"], full[: full.index(stop)])
        self.assertEqual(len(c["logprobs"]["content"][0]["top_logprobs"]), 1)

    def test_c_admin_refuses_without_token_and_loads_a_published_version(self):
        s, r = self.http("POST", "/admin/load_version", {"path": self.v1["path"]})
        self.assertEqual((s, r["error"]["code"]), (401, "unauthorized"))
        s, r = self.http("POST", "/admin/load_version", {"path": self.v1["path"]}, token="not-the-token-at-all")
        self.assertEqual(s, 401)
        s, r = self.http("GET", "/v1/models")
        self.assertEqual(r["data"][0]["version"], 0)
        greedy = {"prompt": "hi", "max_tokens": 8, "temperature": 0, "logprobs": 0}
        _, before = self.http("POST", "/v1/completions", greedy)
        s, r = self.http("POST", "/admin/load_version", {"root": self.root}, token=TOKEN)
        self.assertEqual((s, r["version"], r["sha256"]), (200, 1, self.v1["sha256"]))
        s, r = self.http("GET", "/v1/models")
        self.assertEqual((r["data"][0]["version"], r["data"][0]["sha256"]), (1, self.v1["sha256"]))
        _, after = self.http("POST", "/v1/completions", greedy)
        self.assertNotEqual(before["choices"][0]["logprobs"]["token_logprobs"], after["choices"][0]["logprobs"]["token_logprobs"])
        # a torn version is refused and the served one stays
        torn = os.path.join(self.root, "v000009")
        os.makedirs(torn)
        s, r = self.http("POST", "/update_weights_from_disk", {"model_path": torn}, token=TOKEN)
        self.assertEqual((s, r["error"]["code"]), (409, "torn_checkpoint"))
        self.assertEqual(self.http("GET", "/v1/models")[1]["data"][0]["version"], 1)


if __name__ == "__main__":
    unittest.main()
