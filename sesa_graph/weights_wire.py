"""A directory of weight files (safetensors, config.json, tokenizer files) through a ``torch.distributed``
TCPStore: sent in chunks under a key prefix, fetched into a local directory on another machine.

It is how trained weights reach the rollout side when trainer and orchestrator share no filesystem
(``cluster.weights: store``). The manifest is written last, so its presence means every chunk is there; the
fetch checks each file's size and sha256 before the directory replaces the previous one atomically
(``sesa_graph.fsutil.replace_dir``). Nothing heavier than torch's store is imported, so a vLLM worker can fetch
too.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from sesa_graph.fsutil import replace_dir

CHUNK_BYTES = 4 << 20  # one store value: the libuv store server refuses payloads over 8 MiB


class WeightsWireError(RuntimeError):
    """A fetched directory is incomplete or does not match its manifest; nothing was replaced."""


def put_dir(store: Any, prefix: str, src: Path, version: int) -> int:
    """Send every file of ``src`` under ``prefix``; returns the bytes sent."""
    manifest: dict[str, Any] = {"version": version, "files": {}}
    total = 0
    for f in sorted(p for p in Path(src).iterdir() if p.is_file()):
        digest, size, chunks = hashlib.sha256(), 0, 0
        with open(f, "rb") as fh:
            while chunk := fh.read(CHUNK_BYTES):
                store.set(f"{prefix}/{f.name}/{chunks}", chunk)
                digest.update(chunk)
                size += len(chunk)
                chunks += 1
        manifest["files"][f.name] = {"size": size, "chunks": chunks, "sha256": digest.hexdigest()}
        total += size
    store.set(f"{prefix}/manifest", json.dumps(manifest))
    return total


def fetch_dir(store: Any, prefix: str, dest: Path) -> tuple[int, int]:
    """Fetch ``prefix`` into ``dest`` (replaced whole, with a ``VERSION`` file); returns (version, bytes)."""
    manifest = json.loads(store.get(f"{prefix}/manifest"))
    dest = Path(dest)
    tmp = dest.with_name(f".{dest.name}.fetch")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    total = 0
    try:
        for name, meta in manifest["files"].items():
            total += _fetch_file(store, prefix, name, meta, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    (tmp / "VERSION").write_text(str(manifest["version"]))
    replace_dir(tmp, dest)
    return int(manifest["version"]), total


def _fetch_file(store: Any, prefix: str, name: str, meta: dict[str, Any], into: Path) -> int:
    if name in ("", ".", "..") or "/" in name or "\\" in name:
        raise WeightsWireError(f"{prefix}: the manifest names a file {name!r} outside the directory")
    digest, size = hashlib.sha256(), 0
    with open(into / name, "wb") as out:
        for i in range(int(meta["chunks"])):
            key = f"{prefix}/{name}/{i}"
            if not store.check([key]):  # a get would wait for the store's whole timeout
                raise WeightsWireError(f"{key} is missing from the store; the previous weights stay")
            chunk = store.get(key)
            digest.update(chunk)
            size += len(chunk)
            out.write(chunk)
    if size != meta["size"] or digest.hexdigest() != meta["sha256"]:
        raise WeightsWireError(
            f"{prefix}/{name}: got {size} bytes with sha256 {digest.hexdigest()[:12]}, the manifest says "
            f"{meta['size']} bytes, {meta['sha256'][:12]}; the previous weights stay"
        )
    return size


def drop(store: Any, prefix: str) -> None:
    """Delete what :func:`put_dir` sent under ``prefix`` (the store keeps values in memory)."""
    key = f"{prefix}/manifest"
    if not store.check([key]):
        return
    manifest = json.loads(store.get(key))
    for name, meta in manifest["files"].items():
        for i in range(int(meta["chunks"])):
            store.delete_key(f"{prefix}/{name}/{i}")
    store.delete_key(key)
