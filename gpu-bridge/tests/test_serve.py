"""serve's batching and its OpenAI edges: concurrent requests batched into one decode give what
they give alone, a weight swap waits for the batch in flight, max_tokens as OpenAI reads it,
server-sent events, refused parameters."""

import json
import os
import subprocess
import sys
import tempfile
import threading
import unittest
import urllib.error
import urllib.request

import fixtures
from fixtures import TINY, Bridge, ok, wait_for_port, write_batch
from gpu_bridge.batcher import Batcher, Job
from gpu_bridge.sampling import SamplingParams, make_rows
from gpu_bridge.serve import Served


def served(seed=2):
    return Served("toy", None, "toy", "cpu", seed, TINY)


def job(s, prompt, **params):
    return Job(make_rows(s.policy, [s.policy.tokenizer.encode(prompt, add_bos=True)], SamplingParams.from_json(params)))


class BatcherTest(unittest.TestCase):
    def test_waiting_requests_go_as_one_batch_and_sample_as_alone(self):
        s = served()
        specs = [("def f(x):", {"n": 2, "max_tokens": 6, "seed": 1, "temperature": 1.2}),
                 ("y = ", {"n": 1, "max_tokens": 9, "seed": 2, "top_p": 0.7}),
                 ("a longer prompt, to pad the others", {"n": 3, "max_tokens": 4, "temperature": 0})]
        b = Batcher(s.run_batch, window_s=0.0)
        together = [b.submit(job(s, p, **a)) for p, a in specs]
        b.start()  # all three are waiting when the worker starts: one batch
        for j in together:
            self.assertTrue(j.done.wait(60))
        self.assertEqual((b.stats["batches"], b.stats["largest_batch_requests"], b.stats["largest_batch_rows"]), (1, 3, 6))
        for (p, a), j in zip(specs, together):
            alone = b.submit(job(s, p, **a))
            self.assertTrue(alone.done.wait(60))
            self.assertEqual([r.ids for r in alone.rows], [r.ids for r in j.rows])
        self.assertEqual(b.stats["batches"], 4)
        b.close()

    def test_a_weight_swap_waits_for_the_batch_in_flight(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        br = Bridge()
        ok(br, "load_policy", {"backend": "toy", "config": TINY, "seed": 2})
        ok(br, "publish", {"root": tmp.name})
        batch = write_batch(tmp.name, [{"prompt": "hi", "completion": "there", "advantage": 1.0}])
        ok(br, "train_step", {"batch_id": "s", "expected_version": 0, "algorithm": "grpo", "batch": batch, "hyper": {"lr": 0.05}})
        v1 = ok(br, "publish", {"root": tmp.name})
        s = served(seed=2)  # the weights of v0
        b = Batcher(s.run_batch).start()
        self.addCleanup(b.close)
        greedy = {"max_tokens": 120, "temperature": 0}
        before = b.submit(job(s, "hi", **greedy))
        before.done.wait(60)
        loaded = threading.Event()
        swapping = threading.Event()
        seen = {}

        def swap():
            swapping.set()
            s.load({"path": v1["path"]})
            loaded.set()

        def on_delta(row, d):
            if len(row.ids) == 1:  # the batch holds the model: start the swap now
                threading.Thread(target=swap, daemon=True).start()
                swapping.wait(10)
            if d["finish_reason"] is not None:
                seen["loaded_at_end"] = loaded.is_set()

        during = Job(make_rows(s.policy, [s.policy.tokenizer.encode("hi", add_bos=True)], SamplingParams.from_json(greedy), on_delta))
        b.submit(during).done.wait(60)
        self.assertFalse(seen["loaded_at_end"])
        self.assertEqual((during.version, during.rows[0].ids), (0, before.rows[0].ids))
        self.assertTrue(loaded.wait(60))
        after = b.submit(job(s, "hi", **greedy))
        after.done.wait(60)
        self.assertEqual(after.version, 1)
        self.assertNotEqual(after.rows[0].lps, before.rows[0].lps)


class ServeHttpTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.p = subprocess.Popen([sys.executable, "-m", "gpu_bridge", "serve", "--backend", "toy", "--config", json.dumps(TINY),
                                  "--served-model-name", "toy", "--port", "0", "--batch-window-ms", "20"],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=fixtures.env())
        cls.port = wait_for_port(cls.p, r"on http://127\.0\.0\.1:(\d+)")

    @classmethod
    def tearDownClass(cls):
        cls.p.kill()
        cls.p.wait()
        cls.p.stderr.close()

    def post(self, path, body):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method="POST", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, r.headers.get("Content-Type"), r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Content-Type"), e.read()

    def json(self, path, body):
        s, _, raw = self.post(path, body)
        return s, json.loads(raw)

    def test_concurrent_requests_answer_as_alone(self):
        bodies = [{"prompt": f"p{i}" * (i + 1), "n": 1 + i % 3, "max_tokens": 3 + i, "seed": i, "temperature": 0.5 + i / 4} for i in range(6)]
        alone = [self.json("/v1/completions", b)[1] for b in bodies]
        got = [None] * len(bodies)

        def go(i):
            got[i] = self.json("/v1/completions", bodies[i])[1]

        threads = [threading.Thread(target=go, args=(i,)) for i in range(len(bodies))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for a, g in zip(alone, got):
            self.assertEqual([c["token_ids"] for c in g["choices"]], [c["token_ids"] for c in a["choices"]])
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=30) as r:
            health = json.loads(r.read())
        self.assertGreaterEqual(health["requests"], 12)

    def test_max_tokens_as_openai_reads_it(self):
        s, r = self.json("/v1/completions", {"prompt": "hi", "max_tokens": 0, "logprobs": 1})
        self.assertEqual((s, r["choices"][0]["text"], r["choices"][0]["token_ids"], r["usage"]["completion_tokens"]), (200, "", [], 0))
        s, r = self.json("/v1/completions", {"prompt": "hi", "temperature": 0})
        c = r["choices"][0]
        self.assertTrue(len(c["token_ids"]) == 16 or c["finish_reason"] == "stop")
        s, r = self.json("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0})
        self.assertEqual(s, 400)
        self.assertIn("max_tokens must be an integer of at least 1", r["error"]["message"])
        self.assertEqual(r["error"]["type"], "invalid_request_error")

    def test_refuses_what_it_would_otherwise_ignore(self):
        for body, word in [({"prompt": "x", "echo": True}, "echo"), ({"prompt": "x", "logit_bias": {"1": 5}}, "logit_bias"),
                           ({"prompt": "x", "stream": "yes"}, "stream"), ({"prompt": "x", "logprobs": True}, "logprobs")]:
            s, r = self.json("/v1/completions", body)
            self.assertEqual(s, 400, body)
            self.assertIn(word, r["error"]["message"])

    def events(self, path, body):
        s, ctype, raw = self.post(path, {**body, "stream": True})
        self.assertEqual((s, ctype), (200, "text/event-stream"))
        frames = [f for f in raw.decode().split("\n\n") if f]
        self.assertTrue(all(f.startswith("data: ") for f in frames), frames)
        self.assertEqual(frames[-1], "data: [DONE]")
        return [json.loads(f[6:]) for f in frames[:-1]]

    def test_streams_the_same_samples_as_one_answer(self):
        body = {"prompt": "def f(x):", "n": 2, "max_tokens": 12, "seed": 4, "temperature": 1.4, "logprobs": 1, "stop": ["a", "e"],
                "stream_options": {"include_usage": True}}
        _, whole = self.json("/v1/completions", body)
        chunks = self.events("/v1/completions", body)
        self.assertEqual(chunks[-1]["choices"], [])
        self.assertEqual(chunks[-1]["usage"], whole["usage"])
        for c in whole["choices"]:
            mine = [x["choices"][0] for x in chunks[:-1] if x["choices"][0]["index"] == c["index"]]
            self.assertEqual("".join(m["text"] for m in mine), c["text"])
            self.assertEqual([t for m in mine for t in m["logprobs"]["tokens"]], c["logprobs"]["tokens"])
            self.assertEqual([o for m in mine for o in m["logprobs"]["text_offset"]], c["logprobs"]["text_offset"])
            self.assertEqual(mine[-1]["finish_reason"], c["finish_reason"])
        chat = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 8, "seed": 4, "temperature": 1.4}
        _, whole = self.json("/v1/chat/completions", chat)
        chunks = self.events("/v1/chat/completions", chat)
        self.assertEqual(chunks[0]["choices"][0]["delta"], {"role": "assistant", "content": ""})
        self.assertEqual("".join(x["choices"][0]["delta"].get("content", "") for x in chunks), whole["choices"][0]["message"]["content"])
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], whole["choices"][0]["finish_reason"])
        self.assertEqual({x["object"] for x in chunks}, {"chat.completion.chunk"})


if __name__ == "__main__":
    unittest.main()
