"""Runs inside a vLLM worker process (``--worker-extension-cls``): in-place weight reload that also
refreshes a tied LM head, and a fingerprint of the weights being served.

Loaded by vLLM, never imported by the project itself, so it imports nothing from ``sesa_graph``.

Why the extra step: vLLM's in-place ``reload_weights`` loads the new embedding into ``embed_tokens``, but a
tied ``lm_head`` receives no checkpoint tensor of its own, so the layerwise reloader puts the *old* kernel
tensors back (on CPU the prepacked GEMM weight; the log says ``ParallelLMHead: Failed to load weights``)
and the server keeps sampling from the old output projection. Re-tying the head to the new embedding and
re-running its ``process_weights_after_loading`` makes the served logits those of the new weights.

Under tensor parallelism each worker holds one vocabulary shard of the embedding (vLLM's
``VocabParallelEmbedding``), padded to a multiple of 64 rows per shard; so a worker reports the sum of its
shard's real rows with the shard's index and count, and its parallel ranks, and the caller
(:mod:`sesa_graph.policy.weight_check`) adds the shards of one model copy before comparing with the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class WeightReloadExtension:
    """Methods added to vLLM's worker class; called through ``POST /collective_rpc``."""

    def sesa_reload(self, weights_path: str) -> dict[str, Any]:
        """Load the safetensors in ``weights_path`` in place; returns what the worker now serves."""
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
    return {
        "sum": float(sum(r.double().sum() for r in rows)),
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
