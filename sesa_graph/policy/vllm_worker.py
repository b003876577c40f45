"""Runs inside a vLLM worker process (``--worker-extension-cls``): in-place weight reload that also
refreshes a tied LM head, and a fingerprint of the weights being served.

Loaded by vLLM, never imported by the project itself, so it imports nothing from ``sesa_graph``.

Why the extra step: vLLM's in-place ``reload_weights`` loads the new embedding into ``embed_tokens``, but a
tied ``lm_head`` receives no checkpoint tensor of its own, so the layerwise reloader puts the *old* kernel
tensors back (on CPU the prepacked GEMM weight; the log says ``ParallelLMHead: Failed to load weights``)
and the server keeps sampling from the old output projection. Re-tying the head to the new embedding and
re-running its ``process_weights_after_loading`` makes the served logits those of the new weights.
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
        return {"version": version, "tied_lm_head_refreshed": tied, "fingerprint": self.sesa_fingerprint()}

    def sesa_fingerprint(self) -> dict[str, float]:
        """Sums of the input embedding and of the weight the LM head multiplies with (float64)."""
        embed, head = _embedding_and_head(self._sesa_model())
        out = {"embed": float(embed.weight.detach().double().sum())} if embed is not None else {}
        if head is not None:
            out["lm_head"] = float(head.weight.detach().double().sum())
        return out

    def _sesa_model(self) -> Any:
        return self.model_runner.get_model()  # type: ignore[attr-defined]


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
