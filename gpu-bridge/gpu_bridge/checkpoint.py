"""Atomic, versioned checkpoints.

Layout under a root: `v000007/` holds the weights, `MANIFEST.json` (version, files and their
sha256) and, written last, `STABLE` (the manifest's sha256). A version is readable only when its
STABLE marker is present and matches; a crash at any point leaves either no `v000007/`, a
`v000007/` without STABLE (ignored, replaced by the next publish), or a complete one. The steps:
write into a temporary dir, fsync every file and the dir, rename to the final name, fsync the
root, then write STABLE through a temporary file + rename + fsync.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
from typing import Callable, List, Optional, Tuple

from .batch import sha256_file
from .errors import BridgeError, not_found

VERSION_DIR = re.compile(r"^v(\d{6,})$")
STABLE = "STABLE"
MANIFEST = "MANIFEST.json"


def version_dir(root: str, version: int) -> str:
    return os.path.join(root, f"v{version:06d}")


def fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str, data: bytes) -> None:
    """Write a file so that readers see the old content or the new, never a part."""
    tmp = f"{path}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_path(os.path.dirname(os.path.abspath(path)))


def canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode("utf-8")


def publish(root: str, version: int, write: Callable[[str], List[str]], meta: dict) -> Tuple[str, str]:
    """Write a checkpoint of `version` with `write(tmpdir) -> files`. Returns (path, sha256).

    Publishing a version that is already stable returns it unchanged (idempotent retry)."""
    os.makedirs(root, exist_ok=True)
    final = version_dir(root, version)
    existing = verify(final) if os.path.isdir(final) else None
    if existing is not None:
        return final, existing
    if os.path.isdir(final):
        shutil.rmtree(final)  # renamed in but never marked stable: a torn publish
    _sweep_tmp(root)
    tmp = os.path.join(root, f".tmp-v{version:06d}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    os.makedirs(tmp)
    files = sorted(set(write(tmp)))
    entries = {}
    for name in files:
        p = os.path.join(tmp, name)
        fsync_path(p)
        entries[name] = {"sha256": sha256_file(p), "bytes": os.path.getsize(p)}
    manifest = {"version": version, "files": entries, **meta}
    body = canonical(manifest)
    with open(os.path.join(tmp, MANIFEST), "wb") as f:
        f.write(body)
        f.flush()
        os.fsync(f.fileno())
    fsync_path(tmp)
    os.rename(tmp, final)
    fsync_path(root)
    digest = hashlib.sha256(body).hexdigest()
    write_atomic(os.path.join(final, STABLE), (digest + "\n").encode())
    return final, digest


def _sweep_tmp(root: str) -> None:
    for name in os.listdir(root):
        if name.startswith(".tmp-v"):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def verify(path: str, deep: bool = False) -> Optional[str]:
    """The checkpoint's sha256 when it is stable (and, with deep, every file hash matches)."""
    try:
        with open(os.path.join(path, STABLE)) as f:
            marker = f.read().strip()
        with open(os.path.join(path, MANIFEST), "rb") as f:
            body = f.read()
    except FileNotFoundError:
        return None
    if hashlib.sha256(body).hexdigest() != marker:
        return None
    if deep:
        manifest = json.loads(body)
        for name, e in manifest["files"].items():
            p = os.path.join(path, name)
            if not os.path.isfile(p) or sha256_file(p) != e["sha256"]:
                return None
    return marker


def manifest(path: str) -> dict:
    with open(os.path.join(path, MANIFEST), "rb") as f:
        return json.loads(f.read())


def stable_versions(root: str) -> List[int]:
    if not os.path.isdir(root):
        return []
    out = []
    for name in os.listdir(root):
        m = VERSION_DIR.match(name)
        if m and verify(os.path.join(root, name)) is not None:
            out.append(int(m.group(1)))
    return sorted(out)


def resolve(path: Optional[str] = None, root: Optional[str] = None, version: Optional[int] = None,
            expect_sha256: Optional[str] = None) -> Tuple[str, str]:
    """Find a stable checkpoint by path, or by root + version (latest when version is None),
    check every file's hash, and return (path, sha256)."""
    if path is None:
        if root is None:
            raise BridgeError("bad_request", "give path, or root (and optionally version)")
        if version is None:
            vs = stable_versions(root)
            if not vs:
                raise not_found(f"no stable version under {root}")
            version = vs[-1]
        path = version_dir(root, version)
    if not os.path.isdir(path):
        raise not_found(f"checkpoint {path} does not exist")
    digest = verify(path, deep=True)
    if digest is None:
        raise BridgeError("torn_checkpoint", f"checkpoint {path} is not stable (no STABLE marker, or files do not match MANIFEST.json)")
    if expect_sha256 and expect_sha256 != digest:
        raise BridgeError("hash_mismatch", f"checkpoint {path} has sha256 {digest}, expected {expect_sha256}")
    return path, digest
