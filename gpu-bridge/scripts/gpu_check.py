"""GPU check: a random-weights hf model of a named size (built from a config, nothing downloaded),
run through the bridge's own ops: generate, then GRPO train_steps. Prints generation and training
tokens/s, MFU and peak memory beside a published anchor.

    /usr/bin/python3 gpu-bridge/scripts/gpu_check.py --size 0.6b
    /usr/bin/python3 gpu-bridge/scripts/gpu_check.py --size 1.7b --lora --micro-batch 4

Needs a CUDA GPU and transformers (peft for --lora). Anchor: prime-rl reports Qwen3-0.6B full
fine-tuning at about 11.9k tokens/s on one H100; the figure here uses the bridge's GRPO step
(reference-free unless --kl), eager PyTorch, and the sequence shape given by the flags, so treat
the comparison as an order of magnitude, not a race.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Qwen3 shapes (from the published model configs).
SIZES = {
    "0.6b": dict(hidden_size=1024, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                 intermediate_size=3072, tie_word_embeddings=True),
    "1.7b": dict(hidden_size=2048, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                 intermediate_size=6144, tie_word_embeddings=True),
    "4b": dict(hidden_size=2560, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
               intermediate_size=9728, tie_word_embeddings=True),
    "8b": dict(hidden_size=4096, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
               intermediate_size=12288, tie_word_embeddings=False),
}
VOCAB = 151936
# Dense bf16 peak TFLOP/s by device name fragment.
PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10G": 125.0, "L4": 121.0, "4090": 165.0}
ANCHOR = "prime-rl: Qwen3-0.6B full fine-tuning ~11.9k tokens/s on one H100"


def model_config(size: str, max_len: int) -> dict:
    import transformers

    cfg = dict(SIZES[size], vocab_size=VOCAB, max_position_embeddings=max(4096, max_len), rms_norm_eps=1e-6,
               rope_theta=1_000_000.0, use_cache=True)
    try:
        transformers.AutoConfig.for_model("qwen3")
        return {"model_type": "qwen3", **cfg}
    except (KeyError, ValueError):
        # Older transformers: Qwen2 has the same layout minus q/k norms and explicit head_dim.
        cfg.pop("head_dim")
        print("note: this transformers has no qwen3; using the qwen2 architecture at the same shape", file=sys.stderr)
        return {"model_type": "qwen2", **cfg}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=sorted(SIZES), default="0.6b")
    ap.add_argument("--batch", type=int, default=64, help="samples per train_step")
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--completion-len", type=int, default=512)
    ap.add_argument("--steps", type=int, default=3, help="measured train steps (after one warm-up)")
    ap.add_argument("--gen-prompts", type=int, default=4)
    ap.add_argument("--gen-n", type=int, default=8)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    ap.add_argument("--attn", default="sdpa", help="attn_implementation (sdpa, eager, flash_attention_2)")
    ap.add_argument("--lora", action="store_true", help="train a rank-16 LoRA adapter instead of all weights")
    ap.add_argument("--kl", type=float, default=0.0, help="k3 KL coefficient (keeps a frozen reference)")
    ap.add_argument("--gradient-checkpointing", action="store_true")
    ap.add_argument("--peak-tflops", type=float, default=None, help="override the device's dense bf16 peak")
    a = ap.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("gpu_check: no CUDA GPU here; nothing measured. Run this on a GPU node "
              "(it needs transformers, and peft for --lora).", file=sys.stderr)
        return 2
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("gpu_check: transformers is not installed; the hf backend needs it.", file=sys.stderr)
        return 2

    from gpu_bridge.bridge import Bridge

    def ok(op, args):
        r = bridge.handle({"v": 1, "id": op, "op": op, "args": args}, lambda e: None)
        if not r["ok"]:
            raise SystemExit(f"gpu_check: {op} failed: {r['error']}")
        return r["result"]

    bridge = Bridge()
    seq_len = a.prompt_len + a.completion_len
    cfg = model_config(a.size, seq_len + a.gen_tokens)
    loaded = ok("load_policy", {
        "backend": "hf", "config": cfg, "tokenizer": "bytes", "dtype": a.dtype, "device": "cuda",
        "attn_implementation": a.attn, "gradient_checkpointing": a.gradient_checkpointing,
        "lora": {"r": 16, "alpha": 32} if a.lora else None, "reference": a.kl > 0, "seed": 0,
        "optimizer": {"lr": 1e-6},
    })
    params = loaded["params"]
    dev = torch.cuda.get_device_name(0)
    peak = a.peak_tflops or next((v for k, v in PEAK_TFLOPS.items() if k in dev), None)
    print(f"device {dev}; model {cfg['model_type']} {a.size}: {params / 1e9:.3f} B params "
          f"({loaded.get('trainable', params) / 1e6:.1f} M trainable), {a.dtype}, attn {a.attn}")

    rng = random.Random(0)
    text = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz (){}:=+\n") for _ in range(a.prompt_len))
    ok("generate", {"prompts": [text[:32]], "n": 1, "max_tokens": 4})  # warm-up
    g = ok("generate", {"prompts": [text[i:] + text[:i] for i in range(a.gen_prompts)], "n": a.gen_n,
                        "max_tokens": a.gen_tokens, "temperature": 1.0, "seed": 1})
    print(f"generate: {a.gen_prompts} prompts x n={a.gen_n}, {a.gen_tokens} new tokens: {g['tokens_per_s']:.0f} tokens/s "
          f"(HF eager decode; a serving engine is far faster)")

    tmp = tempfile.mkdtemp(prefix="gpu-check-")
    rows = []
    for i in range(a.batch):
        rows.append({"prompt_ids": [rng.randrange(VOCAB) for _ in range(a.prompt_len)],
                     "completion_ids": [rng.randrange(VOCAB) for _ in range(a.completion_len)],
                     "advantage": 1.0 if i % 2 else -1.0})
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    path = os.path.join(tmp, "batch.jsonl")
    with open(path, "wb") as f:
        f.write(data)
    ref = {"path": path, "sha256": hashlib.sha256(data).hexdigest()}
    tps, mems, secs = [], [], []
    for step in range(a.steps + 1):
        r = ok("train_step", {"batch_id": f"s{step}", "expected_version": step, "algorithm": "grpo", "batch": ref,
                              "micro_batch_size": a.micro_batch, "hyper": {"kl_coef": a.kl, "entropy": False}})
        if step > 0:
            tps.append(r["tokens_per_s"])
            mems.append(r["peak_memory_bytes"])
            secs.append(r["seconds"])
    t = sum(tps) / len(tps)
    # Training FLOPs per token: 6 x params for the matmuls plus attention's 12 x layers x width x
    # context (half of it causal-masked in practice; counted whole, as the usual MFU formula does).
    width = cfg["num_attention_heads"] * cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    flops_tok = 6 * params + 12 * cfg["num_hidden_layers"] * width * seq_len
    if a.kl:
        flops_tok += 2 * params  # the reference's forward
    mfu = f"{100 * t * flops_tok / (peak * 1e12):.1f}%" if peak else "n/a (pass --peak-tflops)"
    print(f"train_step grpo: {a.batch} x {seq_len} tokens, micro-batch {a.micro_batch}, {a.steps} steps of "
          f"{sum(secs) / len(secs):.2f} s: {t:.0f} tokens/s, MFU {mfu}, peak memory {max(mems) / 2**30:.1f} GiB")
    print(f"anchor: {ANCHOR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
