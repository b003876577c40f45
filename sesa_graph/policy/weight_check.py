"""Whether a vLLM server took the weights it was told to load: the directory is checked before the reload,
and what the workers report after it is compared with the files.

A worker (:mod:`sesa_graph.policy.vllm_worker`) reports the version it read, the float64 sum of the real
rows of its embedding shard (and of its LM head's), which shard of how many that is, and its parallel ranks.
One model copy is one (data-parallel rank, pipeline stage) of a server: its tensor-parallel workers' shards
must all answer, and their sums must add up to the file's. A layer that is replicated rather than sharded
(``shards == 1``) must match the file on every worker on its own.

With data parallelism (``--data-parallel-size``) vLLM sends the reload to every engine but returns only the
first engine's results, so the other engines' copies are reloaded and not checked here.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# a server computing in a narrower dtype than the file holds sums the rounded values: the file's sum is
# also taken after the same rounding (vLLM's loader casts with round-to-nearest-even, like torch's .to)
NARROW_DTYPES = ("bfloat16", "float16")


class WeightSyncError(RuntimeError):
    """A reload was refused or did not take; the server keeps (or may keep) its previous weights."""


def check_weights_dir(weights_dir: Path) -> dict[str, float]:
    """Refuse a directory a reload cannot use (missing, half-written, unreadable); returns the embedding
    checksum the server must report after loading it: ``embed`` in the file's dtype, ``embed@bfloat16`` and
    ``embed@float16`` after rounding a wider tensor to those."""
    from safetensors import safe_open

    if not weights_dir.is_dir():
        raise WeightSyncError(f"weights directory {weights_dir} does not exist")
    files = sorted(weights_dir.glob("*.safetensors"))
    if not files or not (weights_dir / "config.json").exists():
        raise WeightSyncError(
            f"{weights_dir} has no complete weights (*.safetensors and config.json); "
            "the server keeps its previous weights"
        )
    index = weights_dir / "model.safetensors.index.json"
    if index.exists():
        shards = set(json.loads(index.read_text())["weight_map"].values())
        missing = sorted(s for s in shards if not (weights_dir / s).exists())
        if missing:
            raise WeightSyncError(
                f"{weights_dir} is missing shards {missing}; the server keeps its previous weights"
            )
    out: dict[str, float] = {}
    for f in files:
        try:
            with safe_open(str(f), framework="pt") as st:
                for name in st.keys():  # noqa: SIM118 - safe_open is not a dict
                    if name.endswith("embed_tokens.weight"):
                        out.update(_sums(st.get_tensor(name)))
        except Exception as exc:  # a torn file: safetensors raises its own error types
            raise WeightSyncError(
                f"{f} cannot be read ({exc}); the server keeps its previous weights"
            ) from exc
    return out


def _sums(tensor: Any) -> dict[str, float]:
    import torch

    out = {"embed": float(tensor.double().sum())}
    if tensor.dtype == torch.float32:
        for name in NARROW_DTYPES:
            out[f"embed@{name}"] = float(tensor.to(getattr(torch, name)).double().sum())
    return out


def check_reload_results(
    results: list[Any],
    expected: dict[str, float],
    version: int | None,
    where: str,
    weights_dir: Path,
) -> dict[str, Any]:
    """Raise :class:`WeightSyncError` unless every worker in ``results`` (``/collective_rpc`` of
    ``sesa_reload``) serves ``version`` and each model copy's embedding adds up to ``expected``. Returns
    what was checked (model copies, tensor-parallel size, data-parallel ranks seen)."""
    if not results or any(not isinstance(r, dict) for r in results):
        raise WeightSyncError(
            f"{where}: the workers returned {results!r} from sesa_reload; is the server started with "
            "--worker-extension-cls sesa_graph.policy.vllm_worker.WeightReloadExtension?"
        )
    errors = [r["error"] for r in results if r.get("error")]
    if errors:  # a worker could not fetch the weights; it loaded nothing
        raise WeightSyncError(
            f"{where}: {len(errors)} of {len(results)} workers did not reload {weights_dir}: "
            f"{'; '.join(dict.fromkeys(errors))}"
        )
    copies: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        served = r.get("version")
        if version is not None and (served is None or int(served) != int(version)):
            raise WeightSyncError(
                f"{where} serves weights version {served} after reloading {weights_dir}, expected {version}"
            )
        rank = r.get("rank") or {}
        copies[(int(rank.get("dp", 0)), int(rank.get("pp", 0)))].append(r)
        _check_tied_head(r, where)
    for (dp, pp), workers in sorted(copies.items()):
        label = f"{where} (data-parallel rank {dp}, pipeline stage {pp})"
        got = combine_shards([_layer(w, "embed") for w in workers], label)
        want = _expected_for(expected, [_layer(w, "embed") for w in workers])
        if got is not None and want is not None and not _close(got, want):
            raise WeightSyncError(
                f"{label}: embedding checksum after reloading {weights_dir} is {got:.6f}, the files hold "
                f"{want:.6f}: the server did not take the new weights"
            )
    ranks = [r.get("rank") or {} for r in results]
    dp_size = max(int(rk.get("dp_size", 1)) for rk in ranks)
    if dp_size > 1:
        log.info(
            "%s: data-parallel engines other than %s were reloaded but not checked (vLLM returns the "
            "first engine's results only)",
            where,
            sorted({dp for dp, _ in copies}),
        )
    return {
        "workers": len(results),
        "tp_size": max(int(rk.get("tp_size", 1)) for rk in ranks),
        "dp_checked": sorted({dp for dp, _ in copies}),
        "dp_size": dp_size,
    }


def combine_shards(layers: list[dict[str, Any] | None], label: str) -> float | None:
    """One model copy's layer sum from its workers' shard reports (None when no worker holds the layer,
    e.g. a pipeline stage without the embedding). A replicated layer's workers must agree."""
    parts = [p for p in layers if p is not None]
    if not parts:
        return None
    counts = {int(p.get("shards", 1)) for p in parts}
    if len(counts) != 1:
        raise WeightSyncError(f"{label}: workers disagree on how many shards the embedding has: {counts}")
    (n,) = counts
    by_shard: dict[int, float] = {}
    for p in parts:
        k, s = int(p.get("shard", 0)), float(p["sum"])
        if k in by_shard and not _close(by_shard[k], s):
            raise WeightSyncError(
                f"{label}: two workers hold different copies of embedding shard {k} of {n} "
                f"({by_shard[k]:.6f} and {s:.6f}): one of them did not take the new weights"
            )
        by_shard[k] = s
    if sorted(by_shard) != list(range(n)):
        raise WeightSyncError(
            f"{label}: only embedding shards {sorted(by_shard)} of {n} answered the reload; the server may "
            "serve a mix of old and new weights"
        )
    return sum(by_shard[k] for k in range(n))


def _layer(result: dict[str, Any], key: str) -> dict[str, Any] | None:
    """A worker's report of one layer; a bare number (a worker of before the shard reports) is a whole,
    unsharded layer."""
    value = (result.get("fingerprint") or {}).get(key)
    if value is None or isinstance(value, dict):
        return value
    return {"sum": float(value), "shard": 0, "shards": 1}


def _expected_for(expected: dict[str, float], layers: list[dict[str, Any] | None]) -> float | None:
    dtypes = {p.get("dtype") for p in layers if p is not None}
    dtype = dtypes.pop() if len(dtypes) == 1 else None
    return expected.get(f"embed@{dtype}", expected.get("embed"))


def _check_tied_head(result: dict[str, Any], where: str) -> None:
    embed, head = _layer(result, "embed"), _layer(result, "lm_head")
    if not result.get("tied_lm_head_refreshed") or embed is None or head is None:
        return
    same_shard = (embed.get("shard"), embed.get("shards")) == (head.get("shard"), head.get("shards"))
    if same_shard and not _close(head["sum"], embed["sum"]):
        raise WeightSyncError(f"{where}: the tied LM head still holds the old weights")


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))
