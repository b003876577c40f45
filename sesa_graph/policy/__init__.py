"""Policy clients: one async protocol, a local (transformers) and an OpenAI-compatible implementation."""

from sesa_graph.policy.base import (
    GenerationRequest,
    GenerationResult,
    PolicyClient,
    PolicyUnavailableError,
    SamplingParams,
)

__all__ = [
    "GenerationRequest",
    "GenerationResult",
    "PolicyClient",
    "PolicyUnavailableError",
    "SamplingParams",
]
