"""The hf backend: transformers' AutoModelForCausalLM, optionally with a peft LoRA adapter.

Imported only when a policy asks for it, so the package works where transformers is absent.
With LoRA the frozen reference is the base model with the adapter disabled (no second copy).
"""

from __future__ import annotations

import os
from typing import List, Optional

import torch

from ..errors import BridgeError, bad_request
from .toy import ByteTokenizer

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _require(module: str):
    try:
        return __import__(module)
    except ImportError as e:
        raise BridgeError("unsupported", f"the hf backend needs the python package {module!r}: {e}") from e


class HfTokenizer:
    def __init__(self, tok):
        self.tok = tok
        self.eos_id = tok.eos_token_id
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        self.bos_id = tok.bos_token_id
        self.vocab_size = len(tok)

    def encode(self, text: str, add_bos: bool = False) -> List[int]:
        ids = self.tok.encode(text, add_special_tokens=False)
        if add_bos and self.bos_id is not None:
            ids = [self.bos_id] + ids
        return ids

    def decode(self, ids: List[int]) -> str:
        return self.tok.decode(ids, skip_special_tokens=True)

    def token_text(self, i: int) -> str:
        return self.tok.decode([i])

    def token_bytes(self, i: int) -> List[int]:
        return list(self.token_text(i).encode("utf-8"))

    def chat_prompt(self, messages: List[dict]) -> str:
        if getattr(self.tok, "chat_template", None):
            return self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return ByteTokenizer().chat_prompt(messages)


class _AdapterOff:
    """Marks "the reference is this model with its adapter disabled"."""


class HfPolicy:
    name = "hf"

    def __init__(self, model, tokenizer, device: torch.device, lora: bool, max_seq_len: int):
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.lora = lora
        self.max_seq_len = max_seq_len

    @staticmethod
    def create(args: dict, device: torch.device, seed: int) -> "HfPolicy":
        transformers = _require("transformers")
        dtype_name = args.get("dtype", "bfloat16" if device.type == "cuda" else "float32")
        if dtype_name not in DTYPES:
            raise bad_request(f"dtype must be one of {sorted(DTYPES)}, got {dtype_name!r}")
        dtype = DTYPES[dtype_name]
        extra = {}
        if args.get("attn_implementation"):
            extra["attn_implementation"] = args["attn_implementation"]
        path: Optional[str] = args.get("model")
        rng = torch.random.get_rng_state()
        torch.manual_seed(seed)  # random-init weights depend on the seed only
        if path:
            model = transformers.AutoModelForCausalLM.from_pretrained(path, torch_dtype=dtype, **extra)
        elif args.get("config"):
            # Random weights from a config: no download (GPU checks, tests).
            cfg = dict(args["config"])
            model_type = cfg.pop("model_type", None)
            if not model_type:
                raise bad_request("hf config needs model_type (e.g. qwen3, qwen2, llama)")
            conf = transformers.AutoConfig.for_model(model_type, **cfg)
            model = transformers.AutoModelForCausalLM.from_config(conf, torch_dtype=dtype, **extra)
        else:
            raise bad_request("the hf backend needs model (a path or hub id) or config")
        torch.random.set_rng_state(rng)
        model.to(device)
        if args.get("gradient_checkpointing"):
            model.gradient_checkpointing_enable()
            model.config.use_cache = False
        tok_src = args.get("tokenizer", path)
        if tok_src in (None, "bytes"):
            tokenizer = ByteTokenizer()
        else:
            tokenizer = HfTokenizer(transformers.AutoTokenizer.from_pretrained(tok_src))
        lora = args.get("lora")
        if lora:
            peft = _require("peft")
            lcfg = peft.LoraConfig(
                r=int(lora.get("r", 16)),
                lora_alpha=int(lora.get("alpha", 32)),
                lora_dropout=float(lora.get("dropout", 0.0)),
                target_modules=lora.get("target_modules", "all-linear"),
                task_type="CAUSAL_LM",
            )
            if args.get("gradient_checkpointing"):
                # Checkpointed blocks over frozen embeddings need inputs that require grad.
                model.enable_input_require_grads()
            model = peft.get_peft_model(model, lcfg)
        max_len = int(args.get("max_seq_len") or getattr(model.config, "max_position_embeddings", 4096))
        return HfPolicy(model, tokenizer, device, bool(lora), max_len)

    def trainable_parameters(self):
        return [p for p in self.model.parameters() if p.requires_grad]

    def param_count(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def forward_logits(self, ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=ids, attention_mask=attention_mask, use_cache=False).logits

    def step(self, ids: torch.Tensor, past, attention_mask: torch.Tensor, positions: torch.Tensor, room: int = 0):
        # room is unused: transformers' caches grow by themselves
        out = self.model(input_ids=ids, attention_mask=attention_mask, position_ids=positions,
                         past_key_values=past, use_cache=True)
        return out.logits[:, -1, :], out.past_key_values

    def select_rows(self, past, rows: torch.Tensor):
        """The cache of the given batch rows only, or None for a cache type this does not know
        (the sampler then keeps finished rows to the end of the chunk)."""
        if hasattr(past, "batch_select_indices"):
            past.batch_select_indices(rows)
            return past
        if isinstance(past, (tuple, list)) and all(isinstance(layer, (tuple, list)) for layer in past):
            return tuple(tuple(t.index_select(0, rows) for t in layer) for layer in past)
        return None

    def make_reference(self):
        if self.lora:
            return _AdapterOff()
        import copy

        ref = copy.deepcopy(self.model)
        for p in ref.parameters():
            p.requires_grad_(False)
        ref.eval()
        return HfPolicy(ref, self.tokenizer, self.device, False, self.max_seq_len)

    def reference_logits(self, ref, ids, attention_mask):
        if isinstance(ref, _AdapterOff):
            with self.model.disable_adapter():
                return self.forward_logits(ids, attention_mask)
        return ref.forward_logits(ids, attention_mask)

    def save(self, directory: str) -> List[str]:
        self.model.save_pretrained(directory, safe_serialization=True)
        if isinstance(self.tokenizer, HfTokenizer):
            self.tokenizer.tok.save_pretrained(directory)
        return sorted(os.listdir(directory))

    def load_weights(self, directory: str) -> None:
        if self.lora:
            peft = _require("peft")
            from safetensors.torch import load_file

            f = os.path.join(directory, "adapter_model.safetensors")
            peft.set_peft_model_state_dict(self.model, load_file(f, device=str(self.device)))
            return
        transformers = _require("transformers")
        other = transformers.AutoModelForCausalLM.from_pretrained(directory, torch_dtype=next(self.model.parameters()).dtype)
        self.model.load_state_dict(other.state_dict())

    def describe(self) -> dict:
        return {"backend": "hf", "lora": self.lora, "params": self.param_count(),
                "trainable": sum(p.numel() for p in self.trainable_parameters())}
