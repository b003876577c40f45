"""Runs inside a vLLM worker process (``--worker-extension-cls``): in-place weight reload that also
refreshes a tied LM head, and a fingerprint of the weights being served.

Loaded by vLLM by import path. Of ``sesa_graph`` it imports only :mod:`sesa_graph.weights_wire` (the standard
library and torch's store), and only when a reload fetches its weights.

Why the extra step: vLLM's in-place ``reload_weights`` loads the new embedding into ``embed_tokens``, but a
tied ``lm_head`` receives no checkpoint tensor of its own, so the layerwise reloader puts the *old* kernel
tensors back (on CPU the prepacked GEMM weight; the log says ``ParallelLMHead: Failed to load weights``)
and the server keeps sampling from the old output projection. Re-tying the head to the new embedding and
re-running its ``process_weights_after_loading`` makes the served logits those of the new weights.

Under tensor parallelism each worker holds one vocabulary shard of the embedding (vLLM's
``VocabParallelEmbedding``), padded to a multiple of 64 rows per shard; so a worker reports the sum of its
shard's real rows with the shard's index and count, and its parallel ranks, and the caller
(:mod:`sesa_graph.policy.weight_check`) adds the shards of one model copy before comparing with the file.

A server on another node than the orchestrator's cannot read the published directory, so a reload may name
where to fetch it instead (``fetch``: the coordinator's TCPStore and the key prefix, see
:mod:`sesa_graph.weights_wire`). The files land in a node-local cache, one directory per server (``slot``),
under ``$TMPDIR/sesa-weights-<uid>/``; the workers of a tensor-parallel server on one node share it: a file
lock lets the first one fetch, and the others find the same manifest already there.
"""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import json
import logging
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
FETCH_TIMEOUT_S = 120.0  # connecting to the coordinator, and each get; a wrong address fails after this


class WeightReloadExtension:
    """Methods added to vLLM's worker class; called through ``POST /collective_rpc``."""

    def sesa_reload(
        self, weights_path: str | None = None, fetch: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Load the safetensors in ``weights_path``, or those ``fetch`` names (``{"host", "port", "prefix"}``
        and the server's ``slot``; fetched into this node's cache first), in place; returns what the worker
        now serves."""
        if fetch is not None:
            try:
                weights_path = str(fetch_cached(fetch))
            except Exception as exc:  # reported to the caller, who raises it there
                # nothing was loaded, so the server keeps serving its weights; an exception escaping a
                # collective_rpc would come back as an HTTP 500 on a connection vLLM's server then drops
                log.exception("fetching %s failed", fetch.get("prefix"))
                return {"error": f"{type(exc).__name__}: {exc}", "rank": self.sesa_ranks()}
        if weights_path is None:
            raise ValueError("sesa_reload needs weights_path or fetch")
        self.reload_weights(weights_path=weights_path)  # type: ignore[attr-defined]
        tied = _refresh_lm_head(self._sesa_model())
        version_file = Path(weights_path) / "VERSION"
        version = version_file.read_text().strip() if version_file.exists() else None
        return {
            "version": version,
            "tied_lm_head_refreshed": tied,
            "fingerprint": self.sesa_fingerprint(),
            "rank": self.sesa_ranks(),
        }

    def sesa_drop_fetched(self, fetch: dict[str, Any]) -> bool:
        """Remove what :meth:`sesa_reload` fetched for ``fetch``'s server (vLLM no longer reads it)."""
        return drop_cached(fetch)

    def sesa_fingerprint(self) -> dict[str, dict[str, Any]]:
        """Per layer (input embedding, LM head): the float64 sum of this worker's real vocabulary rows, which
        shard of how many it is, and its dtype."""
        embed, head = _embedding_and_head(self._sesa_model())
        out = {}
        for key, layer in (("embed", embed), ("lm_head", head)):
            if layer is not None:
                out[key] = _shard_sum(layer)
        return out

    def sesa_ranks(self) -> dict[str, int]:
        """This worker's place in the server: tensor-parallel rank/size, pipeline stage/size and the
        data-parallel rank/size of its engine."""
        out = {"tp": 0, "tp_size": 1, "pp": 0, "pp_size": 1, "dp": 0, "dp_size": 1}
        try:
            from vllm.distributed import parallel_state as ps

            tp, pp = ps.get_tp_group(), ps.get_pp_group()
            out.update(tp=tp.rank_in_group, tp_size=tp.world_size, pp=pp.rank_in_group, pp_size=pp.world_size)
        except (ImportError, AssertionError, AttributeError):  # groups not initialised: a single worker
            pass
        parallel = getattr(getattr(self, "vllm_config", None), "parallel_config", None)
        if parallel is not None:
            out.update(
                dp=int(getattr(parallel, "data_parallel_rank", 0) or 0),
                dp_size=int(getattr(parallel, "data_parallel_size", 1) or 1),
            )
        return out

    def _sesa_model(self) -> Any:
        return self.model_runner.get_model()  # type: ignore[attr-defined]


def cache_root() -> Path:
    """This user's fetch cache on this node, private to them (another user could otherwise plant a link or
    swap the weights)."""
    root = Path(tempfile.gettempdir()) / f"sesa-weights-{os.getuid()}"
    try:
        root.mkdir(mode=0o700)
    except FileExistsError:
        pass  # checked below: it must be this user's directory, not a link or a file
    st = root.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise PermissionError(f"{root} is not a directory of this user; remove it or set TMPDIR")
    if st.st_mode & 0o077:
        root.chmod(0o700)
    return root


def _slot(fetch: dict[str, Any], root: Path | None) -> tuple[Path, Path]:
    """The cache directory of one server fed by one coordinator, and its lock file."""
    key = json.dumps([fetch["host"], int(fetch["port"]), fetch.get("slot", "")])
    name = hashlib.sha256(key.encode()).hexdigest()[:16]
    root = root or cache_root()
    return root / name, root / f"{name}.lock"


def fetch_cached(fetch: dict[str, Any], root: Path | None = None, timeout_s: float = FETCH_TIMEOUT_S) -> Path:
    """The directory ``fetch["prefix"]`` holds in the coordinator's store, fetched into this node's cache
    unless a worker of the same server already did (same manifest: the same files, sha256 included)."""
    from torch.distributed import TCPStore

    from sesa_graph.weights_wire import fetch_dir

    host, port, prefix = fetch["host"], int(fetch["port"]), fetch["prefix"]
    dest, lock = _slot(fetch, root)
    marker = dest.with_name(f"{dest.name}.manifest")
    try:
        store = TCPStore(
            host,
            port,
            is_master=False,
            wait_for_workers=False,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
    except Exception as exc:
        raise RuntimeError(
            f"cannot reach the coordinator at {host}:{port} from this server's node to fetch {prefix} "
            f"({exc}); the coordinator port must be reachable from the server nodes"
        ) from exc
    if not store.check([f"{prefix}/manifest"]):  # a get would wait for the whole timeout
        raise RuntimeError(f"{prefix} is not in the coordinator's store at {host}:{port}")
    manifest = hashlib.sha256(store.get(f"{prefix}/manifest")).hexdigest()
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file closes, also if this worker dies
        if dest.is_dir() and marker.exists() and marker.read_text() == manifest:
            return dest  # another worker of this server fetched it
        marker.unlink(missing_ok=True)
        fetch_dir(store, prefix, dest)
        marker.write_text(manifest)
    return dest


def drop_cached(fetch: dict[str, Any], root: Path | None = None) -> bool:
    """Remove the cache directory of ``fetch``'s server (under its lock); whether there was one."""
    dest, lock = _slot(fetch, root)
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        dest.with_name(f"{dest.name}.manifest").unlink(missing_ok=True)
        there = dest.exists()
        shutil.rmtree(dest, ignore_errors=True)
    return there


FINGERPRINT_BLOCK_ROWS = 4096


def _shard_sum(layer: Any) -> dict[str, Any]:
    """The sum of the rows that hold tokens: a shard's padding rows (vLLM pads the base vocabulary and the
    added tokens separately, each to a multiple of 64 over all shards) are not in any checkpoint."""
    weight = layer.weight.detach()
    rows = [weight]
    idx = getattr(layer, "shard_indices", None)
    if idx is not None:
        rows = [weight[: idx.num_org_elements]]
        if idx.num_added_elements:
            start = idx.num_org_elements_padded
            rows.append(weight[start : start + idx.num_added_elements])
    # in blocks of rows: a whole shard's .double() was an fp64 copy of it (3.1 GB for a 4B model's embedding)
    total = sum(float(block.double().sum()) for r in rows for block in r.split(FINGERPRINT_BLOCK_ROWS))
    return {
        "sum": total,
        "shard": int(getattr(layer, "tp_rank", 0)),
        "shards": int(getattr(layer, "tp_size", 1)),  # 1 when the layer is replicated (disable_tp)
        "dtype": str(weight.dtype).removeprefix("torch."),
    }


def _embedding_and_head(model: Any) -> tuple[Any, Any]:
    from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead, VocabParallelEmbedding

    embed = head = None
    for module in model.modules():
        if isinstance(module, ParallelLMHead):
            head = head or module
        elif isinstance(module, VocabParallelEmbedding):
            embed = embed or module
    return embed, head


def _refresh_lm_head(model: Any) -> bool:
    """Re-tie a tied LM head to the (reloaded) embedding and redo its kernel preparation."""
    config = getattr(model, "config", None)
    text_config = getattr(config, "get_text_config", lambda: config)()
    if not getattr(text_config, "tie_word_embeddings", False):
        return False
    embed, head = _embedding_and_head(model)
    if embed is None or head is None:
        return False
    head.weight = embed.weight
    method = getattr(head, "quant_method", None)
    if method is not None and hasattr(method, "process_weights_after_loading"):
        method.process_weights_after_loading(head)
    return True
