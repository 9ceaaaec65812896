"""The operations of the protocol, independent of the transport (stdio, TCP, in-process)."""

from __future__ import annotations

import io
import hashlib
import os
import platform
import random
import sys
import time
import traceback
from collections import OrderedDict
from dataclasses import asdict
from typing import Callable, Dict, Optional

import torch

from . import PROTOCOL_VERSION, __version__
from . import checkpoint as ck
from .backends import BACKENDS, backend_class, capabilities
from .batch import Sample, sha256_file
from .errors import BridgeError, bad_request, not_found
from .losses import AGGREGATIONS
from .sampling import SamplingParams, sample_batch
from .trainer import PolicyState, is_oom, peak_memory

OPS = ("hello", "load_policy", "generate", "logprobs", "train_step", "publish", "save_state",
       "load_state", "status", "shutdown")
# Ops whose reply is replayed when a client retries with the same `idem` key. train_step is not
# among them: it is idempotent by batch id (remembered in the saved state too) and says so with
# `duplicate: true`.
MUTATING = ("load_policy", "publish", "save_state", "load_state")
IDEM_KEEP = 1024
DEFAULT_MAX_REQUEST_BYTES = 16 << 20

Emit = Callable[[dict], None]


def pick_device(name: Optional[str]) -> torch.device:
    if name in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise BridgeError("unsupported", f"device {name} requested but CUDA is not available here")
    return torch.device(name)


def device_info() -> dict:
    if torch.cuda.is_available():
        return {"type": "cuda", "count": torch.cuda.device_count(), "name": torch.cuda.get_device_name(0)}
    return {"type": "cpu", "count": 1, "name": platform.processor() or platform.machine(), "threads": torch.get_num_threads()}


def blas_libraries() -> list:
    """The BLAS and LAPACK files this process loaded (Debian picks them by alternatives): the
    same step on another BLAS rounds differently, so a cached result of training names them."""
    try:
        with open("/proc/self/maps") as f:
            found = {line.split()[-1] for line in f if "blas" in line.lower() or "lapack" in line.lower()}
    except OSError:
        return []
    return sorted(p for p in found if p.startswith("/"))


class Bridge:
    def __init__(self, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES):
        self.policies: Dict[str, PolicyState] = {}
        self.max_request_bytes = max_request_bytes
        self.started = time.time()
        self.requests = 0
        self.busy: Optional[str] = None
        self.idem: "OrderedDict[str, dict]" = OrderedDict()
        self.stopping = False

    # --- dispatch -------------------------------------------------------------------------

    def handle(self, req: dict, emit: Emit) -> dict:
        """Run one request envelope; always returns a reply (never raises)."""
        rid = req.get("id") if isinstance(req, dict) else None
        try:
            op, args, idem = self._envelope(req)
            if idem is not None and op in MUTATING and idem in self.idem:
                cached = self.idem[idem]
                if cached["op"] != op:
                    raise BridgeError("idem_conflict", f"idem key {idem!r} was used for {cached['op']}, now {op}")
                return {"id": rid, "ok": True, "result": cached["result"]}
            self.busy = op
            self.requests += 1

            def progress(p: dict) -> None:
                emit({"event": "progress", "id": rid, "op": op, **p})

            result = getattr(self, "op_" + op)(args, progress)
            if idem is not None and op in MUTATING:
                self.idem[idem] = {"op": op, "result": result}
                while len(self.idem) > IDEM_KEEP:
                    self.idem.popitem(last=False)
            return {"id": rid, "ok": True, "result": result}
        except BridgeError as e:
            return {"id": rid, "ok": False, "error": e.to_json()}
        except Exception as e:  # noqa: BLE001 -- reported to the client, the bridge lives on
            traceback.print_exc(file=sys.stderr)
            code = "oom" if is_oom(e) else "internal"
            return {"id": rid, "ok": False, "error": {"code": code, "message": f"{type(e).__name__}: {e}", "retryable": code == "oom"}}
        finally:
            self.busy = None

    def _envelope(self, req) -> tuple:
        if not isinstance(req, dict):
            raise bad_request("a request must be a JSON object")
        if req.get("v") != PROTOCOL_VERSION:
            raise BridgeError("unsupported_version", f"protocol version {req.get('v')!r} is not supported; this bridge speaks v{PROTOCOL_VERSION}")
        rid = req.get("id")
        if not (isinstance(rid, str) and rid) and not (isinstance(rid, int) and not isinstance(rid, bool)):
            raise bad_request("id must be a non-empty string or an integer")
        op = req.get("op")
        if op not in OPS:
            raise BridgeError("unknown_op", f"unknown op {op!r}; known: {', '.join(OPS)}")
        args = req.get("args", {})
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise bad_request("args must be an object")
        idem = req.get("idem")
        if idem is not None and not isinstance(idem, str):
            raise bad_request("idem must be a string or null")
        return op, args, idem

    def _policy(self, args: dict) -> PolicyState:
        name = args.get("policy", "default")
        p = self.policies.get(name)
        if p is None:
            raise BridgeError("not_loaded", f"no policy named {name!r} is loaded (loaded: {sorted(self.policies) or 'none'}); call load_policy first")
        return p

    # --- ops ------------------------------------------------------------------------------

    def op_hello(self, args: dict, progress) -> dict:
        import numpy

        return {
            "protocol": PROTOCOL_VERSION, "bridge": __version__, "python": platform.python_version(),
            "torch": torch.__version__, "numpy": numpy.__version__, "pid": os.getpid(),
            "device": device_info(), "blas": blas_libraries(),
            "capabilities": {"backends": capabilities(), "ops": list(OPS), "algorithms": ["grpo", "kto", "sft"],
                             "aggregations": list(AGGREGATIONS)},
            "max_request_bytes": self.max_request_bytes,
            "policies": {k: v.version for k, v in self.policies.items()},
        }

    def op_load_policy(self, args: dict, progress) -> dict:
        name = args.get("policy", "default")
        if not isinstance(name, str) or not name:
            raise bad_request("policy must be a non-empty string")
        backend = args.get("backend", "toy")
        if backend not in BACKENDS:
            raise bad_request(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}")
        seed = args.get("seed", 0)
        if not isinstance(seed, int):
            raise bad_request("seed must be an integer")
        device = pick_device(args.get("device"))
        create = {k: v for k, v in args.items() if k not in ("policy", "optimizer", "version", "reference", "seed", "device")}
        version = args.get("version")
        model = args.get("model")
        published = None
        if isinstance(model, str) and os.path.exists(os.path.join(model, ck.MANIFEST)):
            path, digest = ck.resolve(path=model)  # only stable, hash-verified checkpoints load
            published = {"path": path, "sha256": digest}
            if version is None:
                version = int(ck.manifest(path)["version"])
        version = 0 if version is None else version
        if not isinstance(version, int) or version < 0:
            raise bad_request("version must be a non-negative integer")
        opt = args.get("optimizer") or {}
        if not isinstance(opt, dict):
            raise bad_request("optimizer must be an object")
        policy = backend_class(backend).create(create, device, seed)
        if backend == "toy":
            # Recreate from the config alone at load_state (the source path may be gone by then).
            create = {"config": asdict(policy.model.cfg)}
        st = PolicyState(name, backend, policy, create, opt, version, bool(args.get("reference", False)))
        restored = False
        if published and OPTIMIZER_FILE in ck.manifest(published["path"])["files"]:
            # The file's hash was checked by resolve: the moments continue where the step that
            # made this version left them, so a restarted bridge's next step equals an
            # uninterrupted one's.
            restored = restore_optimizer(st, os.path.join(published["path"], OPTIMIZER_FILE))
        self.policies[name] = st
        out = st.describe()
        if published:
            out["published"] = {**published, "optimizer_restored": restored}
        return out

    def op_generate(self, args: dict, progress) -> dict:
        st = self._policy(args)
        want = args.get("version")
        if want is not None and want != st.version:
            raise BridgeError("version_mismatch", f"policy {st.name} is at version {st.version}, generate asked for {want}")
        params = SamplingParams.from_json(args)
        tok = st.policy.tokenizer
        prompts = args.get("prompts")
        prompt_ids = args.get("prompt_ids")
        if prompt_ids is None:
            if not isinstance(prompts, list) or not all(isinstance(p, str) for p in prompts):
                raise bad_request("generate needs prompts (a list of strings) or prompt_ids (a list of token id lists)")
            prompt_ids = [tok.encode(p, add_bos=True) for p in prompts]
        elif not isinstance(prompt_ids, list) or not all(isinstance(p, list) for p in prompt_ids):
            raise bad_request("prompt_ids must be a list of token id lists")
        t0 = time.perf_counter()
        outputs = sample_batch(st.policy, prompt_ids, params)
        n_tok = sum(len(r["token_ids"]) for res in outputs for r in res)
        secs = time.perf_counter() - t0
        return {"version": st.version, "outputs": outputs, "prompt_ids": prompt_ids if args.get("return_prompt_ids") else None,
                "tokens": n_tok, "seconds": secs, "tokens_per_s": n_tok / secs if secs > 0 else None}

    def op_logprobs(self, args: dict, progress) -> dict:
        st = self._policy(args)
        items = args.get("items")
        if not isinstance(items, list) or not items:
            raise bad_request("logprobs needs items: [{prompt|prompt_ids, completion|completion_ids}]")
        from .batch import _sample

        samples = [_sample(it if isinstance(it, dict) else {}, "sft", st.policy.tokenizer, f"items[{i}]") for i, it in enumerate(items)]
        lps = st.logprobs(samples, bool(args.get("reference", False)))
        return {"version": st.version, "logprobs": lps, "sums": [sum(x) for x in lps]}

    def op_train_step(self, args: dict, progress) -> dict:
        return self._policy(args).train_step(args, progress)

    def op_publish(self, args: dict, progress) -> dict:
        st = self._policy(args)
        root = args.get("root")
        if not isinstance(root, str) or not root:
            raise bad_request("publish needs root (the directory holding versions)")
        want = args.get("version")
        if want is not None and want != st.version:
            raise BridgeError("version_mismatch", f"policy {st.name} is at version {st.version}, publish asked for {want}")
        with_optimizer = args.get("optimizer", True)
        if not isinstance(with_optimizer, bool):
            raise bad_request("publish: optimizer must be true or false")
        meta = {"policy": st.name, "bridge": __version__, "model": st.policy.describe()}

        def write(directory: str):
            files = st.policy.save(directory)
            if with_optimizer:
                files = [*files, save_optimizer(st, directory)]
            return files

        path, digest = ck.publish(root, st.version, write, meta)
        return {"path": path, "sha256": digest, "version": st.version,
                "optimizer": OPTIMIZER_FILE in ck.manifest(path)["files"]}

    def op_save_state(self, args: dict, progress) -> dict:
        st = self._policy(args)
        path = args.get("path")
        if not isinstance(path, str) or not path:
            raise bad_request("save_state needs path (a file)")
        state = {"format": "gpu_bridge.state/1", "policy": st.state_dict(), "rng": rng_state()}
        buf = io.BytesIO()
        torch.save(state, buf)
        data = buf.getvalue()
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        ck.write_atomic(path, data)
        return {"path": path, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "version": st.version}

    def op_load_state(self, args: dict, progress) -> dict:
        path = args.get("path")
        if not isinstance(path, str) or not os.path.isfile(path):
            raise not_found(f"state file {path!r} does not exist")
        want = args.get("sha256")
        if want is not None and sha256_file(path) != want:
            raise BridgeError("hash_mismatch", f"state file {path} does not match sha256 {want}")
        state = torch.load(path, map_location="cpu")
        if not isinstance(state, dict) or state.get("format") != "gpu_bridge.state/1":
            raise bad_request(f"{path} is not a gpu_bridge state file")
        ps = state["policy"]
        name = args.get("policy", ps["name"])
        device = pick_device(args.get("device"))
        policy = backend_class(ps["backend"]).create(ps["create_args"], device, 0)
        st = PolicyState(name, ps["backend"], policy, ps["create_args"], ps["opt_args"], ps["version"], ps["with_reference"])
        st.load_state_dict(ps)
        self.policies[name] = st
        set_rng_state(state["rng"])
        return st.describe()

    def op_status(self, args: dict, progress) -> dict:
        dev = next((p.policy.device for p in self.policies.values()), torch.device("cpu"))
        return {"uptime_s": time.time() - self.started, "requests": self.requests,
                "policies": {k: v.describe() for k, v in self.policies.items()}, **peak_memory(dev)}

    def op_shutdown(self, args: dict, progress) -> dict:
        self.stopping = True
        return {"bye": True}


# Adam's moments and step counts beside the weights, listed (and hashed) in the manifest.
OPTIMIZER_FILE = "optimizer.pt"
OPTIMIZER_FORMAT = "gpu_bridge.optimizer/1"


def save_optimizer(st: PolicyState, directory: str) -> str:
    torch.save({"format": OPTIMIZER_FORMAT, "optimizer": st.optimizer.state_dict(), "steps": st.steps},
               os.path.join(directory, OPTIMIZER_FILE))
    return OPTIMIZER_FILE


def restore_optimizer(st: PolicyState, path: str) -> bool:
    saved = torch.load(path, map_location="cpu")
    if not isinstance(saved, dict) or saved.get("format") != OPTIMIZER_FORMAT:
        raise bad_request(f"{path} is not a gpu_bridge optimizer file")
    try:
        # load_state_dict moves the moments to each parameter's device.
        st.optimizer.load_state_dict(saved["optimizer"])
    except (ValueError, KeyError) as e:
        raise bad_request(f"{path}: the optimizer state does not fit this model's trainable parameters ({e})") from e
    # Hyperparameters given at load_policy win over the saved ones (the moments are kept).
    for key in ("lr", "betas", "eps", "weight_decay"):
        if key in st.opt_args:
            for g in st.optimizer.param_groups:
                g[key] = tuple(st.opt_args[key]) if key == "betas" else float(st.opt_args[key])
    st.steps = int(saved.get("steps", 0))
    return True


def rng_state() -> dict:
    import numpy

    st = {"torch": torch.random.get_rng_state(), "python": random.getstate(), "numpy": numpy.random.get_state()}
    if torch.cuda.is_available():
        st["cuda"] = torch.cuda.get_rng_state_all()
    return st


def set_rng_state(st: dict) -> None:
    import numpy

    torch.random.set_rng_state(st["torch"])
    random.setstate(st["python"])
    numpy.random.set_state(st["numpy"])
    if "cuda" in st and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(st["cuda"])
