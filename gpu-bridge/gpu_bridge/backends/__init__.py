"""Model backends. Each backend class offers: create(args, device, seed), tokenizer,
forward_logits, step (incremental decode), make_reference/reference_logits, save/load_weights,
trainable_parameters, describe. `toy` needs torch only; `hf` imports transformers lazily."""

from __future__ import annotations

import importlib.util

from ..errors import bad_request

BACKENDS = ("toy", "hf")


def capabilities() -> dict:
    """What each backend can do here, and what is missing where it cannot."""
    missing = [m for m in ("transformers", "safetensors") if importlib.util.find_spec(m) is None]
    peft_ok = importlib.util.find_spec("peft") is not None
    return {
        "toy": {"available": True, "missing": []},
        "hf": {"available": not missing, "missing": missing, "lora": peft_ok and not missing,
               "lora_missing": [] if peft_ok else ["peft"]},
    }


def backend_class(name: str):
    if name == "toy":
        from .toy import ToyPolicy

        return ToyPolicy
    if name == "hf":
        from .hf import HfPolicy

        return HfPolicy
    raise bad_request(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}")
