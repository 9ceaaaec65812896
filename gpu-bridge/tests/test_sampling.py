"""The sampler: rows decoded together give what they give alone; token strings join to the text;
streamed deltas join to the same text and tokens."""

import unittest

import torch

import fixtures  # noqa: F401 - puts the package on sys.path
from fixtures import TINY
from gpu_bridge.backends.toy import ToyPolicy
from gpu_bridge.sampling import SamplingParams, decode_rows, make_rows


def policy(seed=3):
    return ToyPolicy.create({"config": TINY}, torch.device("cpu"), seed)


class WithoutSelect:
    """The same policy without select_rows: no shared prompt pass, no dropping of finished rows."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        if name == "select_rows":
            raise AttributeError(name)
        return getattr(self._inner, name)


REQUESTS = [
    ("def add(a, b):", {"n": 3, "max_tokens": 9, "temperature": 1.3, "seed": 7}),
    ("x", {"n": 1, "max_tokens": 3, "temperature": 0.8, "top_p": 0.5, "seed": 8}),
    ("a much longer prompt than the others, with é and ü", {"n": 2, "max_tokens": 12, "temperature": 0}),
    ("def add(a, b):", {"n": 2, "max_tokens": 1, "temperature": 1.0, "seed": 9, "logprobs": True, "top_logprobs": 2}),
    ("stop here", {"n": 2, "max_tokens": 10, "temperature": 1.5, "seed": 10, "stop": ["e", "\u00e9"]}),
]


def rows_for(pol, reqs):
    tok = pol.tokenizer
    return [make_rows(pol, [tok.encode(p, add_bos=True)], SamplingParams.from_json(a)) for p, a in reqs]


class BatchedTest(unittest.TestCase):
    def test_rows_give_the_same_samples_batched_or_alone(self):
        pol = policy()
        alone = []
        for rows in rows_for(pol, REQUESTS):
            decode_rows(pol, rows)
            alone.append([r.result() for r in rows])
        together = rows_for(pol, REQUESTS)
        decode_rows(pol, [r for rows in together for r in rows])
        for want, rows in zip(alone, together):
            got = [r.result() for r in rows]
            self.assertEqual([g["token_ids"] for g in got], [w["token_ids"] for w in want])
            self.assertEqual([g["text"] for g in got], [w["text"] for w in want])
            for g, w in zip(got, want):
                for x, y in zip(g.get("logprobs", []), w.get("logprobs", [])):
                    self.assertAlmostEqual(x, y, places=4)
        # the n samples of a seeded request differ from each other, and a seed is reproducible
        first = [r.ids for r in together[0]]
        self.assertEqual(len({tuple(x) for x in first}), 3)

    def test_shared_prompt_pass_and_dropped_rows_change_nothing(self):
        pol = policy()
        plain = rows_for(pol, REQUESTS)
        decode_rows(WithoutSelect(pol), [r for rows in plain for r in rows])
        shared = rows_for(pol, REQUESTS)
        decode_rows(pol, [r for rows in shared for r in rows])
        for a, b in zip(plain, shared):
            self.assertEqual([r.ids for r in a], [r.ids for r in b])

    def test_max_tokens_zero_and_none(self):
        pol = policy()
        tok = pol.tokenizer
        prompt = tok.encode("hi", add_bos=True)
        zero = make_rows(pol, [prompt], SamplingParams.from_json({"max_tokens": 0}))
        rest = make_rows(pol, [prompt], SamplingParams.from_json({"max_tokens": None, "temperature": 0}))
        decode_rows(pol, zero + rest)
        self.assertEqual(zero[0].result(), {"text": "", "token_ids": [], "finish_reason": "length"})
        r = rest[0].result()
        self.assertTrue(len(r["token_ids"]) == TINY["max_seq_len"] - len(prompt) or r["finish_reason"] == "stop", r["finish_reason"])


def pushed(pol, tokens, stop=(), deltas=None):
    """A row fed the given tokens as if sampled (logprob -1 each)."""
    params = SamplingParams.from_json({"max_tokens": 64, "stop": list(stop), "logprobs": True, "temperature": 0})
    row = make_rows(pol, [[pol.tokenizer.bos_id]], params, (lambda r, d: deltas.append(d)) if deltas is not None else None)[0]
    for t in tokens:
        if row.finish is None:
            row.push(t, -1.0, None)
    return row


class TokenStringsTest(unittest.TestCase):
    def test_a_character_goes_to_the_token_that_completes_it(self):
        pol = policy()
        e_acute = list("é".encode())  # c3 a9
        row = pushed(pol, [*e_acute, ord("a"), 0xC3, pol.tokenizer.eos_id])
        res = row.result()
        self.assertEqual(res["text"], "éa\ufffd")
        self.assertEqual(res["tokens"], ["", "é", "a", "", "\ufffd"])  # the end flushes into the last token (EOS)
        self.assertEqual("".join(res["tokens"]), res["text"])
        self.assertEqual(len(res["tokens"]), len(res["token_ids"]))

    def test_tokens_from_a_stop_string_on_are_empty(self):
        pol = policy()
        row = pushed(pol, list(b"abXYc"), stop=["XY"])
        res = row.result()
        self.assertEqual((res["text"], res["finish_reason"]), ("ab", "stop"))
        self.assertEqual(res["tokens"], ["a", "b", "", ""])
        self.assertEqual(len(res["logprobs"]), 4)

    def test_sampled_bytes_above_127_join_to_the_text(self):
        pol = policy()
        tok = pol.tokenizer
        rows = make_rows(pol, [tok.encode("z", add_bos=True)], SamplingParams.from_json(
            {"n": 4, "max_tokens": 24, "temperature": 2.0, "seed": 1, "logprobs": True, "stop": ["q"]}))
        decode_rows(pol, rows)
        self.assertTrue(any(t >= 128 for r in rows for t in r.ids), "no byte >= 128 sampled: pick another seed")
        for r in rows:
            res = r.result()
            self.assertEqual("".join(res["tokens"]), res["text"])


class DeltasTest(unittest.TestCase):
    def test_deltas_hold_back_unfinished_characters_and_stop_prefixes(self):
        pol = policy()
        deltas = []
        row = pushed(pol, [ord("a"), 0xC3, 0xA9, ord("X"), ord("c"), ord("X"), ord("Y"), ord("z")], stop=["XY"], deltas=deltas)
        texts = [d["text"] for d in deltas]
        # 0xc3 goes out with "" (its character is the next token's); each X waits to see a Y
        self.assertEqual(texts, ["a", "", "é", "Xc", ""])
        self.assertEqual("".join(texts), row.text())
        self.assertEqual([t for d in deltas for t in d["tokens"]], row.token_strings())
        self.assertEqual([t for d in deltas for t in d["token_ids"]], row.ids)
        self.assertEqual(deltas[-1]["finish_reason"], "stop")
        self.assertTrue(all(d["finish_reason"] is None for d in deltas[:-1]))


if __name__ == "__main__":
    unittest.main()
