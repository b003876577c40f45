"""The served graphs' configuration: what LangGraph Studio's assistant config (or a run's ``context``) sets.

A LangGraph server (``langgraph dev``, a deployment) hands every run a JSON context, which LangGraph turns
into the graph's ``context_schema``. The rollout contexts hold live objects (a policy, a search backend, a
bank) that JSON cannot carry, so the served graphs take this small model instead and
:mod:`graphs.defaults` builds (and caches) the live context from it. Every field left out means "as the run
config says"; with nothing given that is the embedded default (``configs/tiny-cpu.yaml``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from graphs import serve_limits
from sesa_graph.config import RunConfig, SearchConfig
from sesa_graph.model_config import PolicyConfig
from tools.config_model import ConfigModel


class StudioConfig(ConfigModel):
    """Run-time configuration of the served graphs (solve, propose, selfplay)."""

    # frozen: a configuration is a cache key for the objects built from it
    model_config = ConfigDict(frozen=True)

    run_config: str | None = Field(
        None, description="Run config YAML whose budgets and settings apply (default configs/tiny-cpu.yaml)."
    )
    model: str | None = Field(
        None,
        description="Policy model: embedded-warm | embedded | HF id | path; with base_url, the served name "
        "(default: the run config's solver_policy.model).",
    )
    engine: Literal["vllm", "local"] | None = Field(
        None,
        description="'vllm': start a vLLM server for the model (about 45 s on a CPU, once per model); 'local': "
        "in-process transformers (default: the run config's solver_policy.backend).",
    )
    base_url: str | None = Field(
        None,
        description="A running OpenAI-compatible server (e.g. http://127.0.0.1:8000/v1) to use instead of "
        "engine.",
    )
    search_backend: Literal["bm25", "dense", "http"] | None = Field(
        None, description="Search backend (default: the run config's search.backend)."
    )
    corpus: str | None = Field(
        None,
        description="bm25/dense corpus: 'embedded' or a wiki-18-style JSONL path (default: the run config's).",
    )
    search_url: str | None = Field(None, description="http backend: base URL of the retrieval server.")
    bank: str | None = Field(
        None,
        description="A skill bank directory, or a run directory holding one; skills go to the solver's prompt "
        "(read-only: nothing is credited or distilled). None: no skills.",
    )
    bank_mode: Literal["off", "on", "placebo"] = Field(
        "on", description="How the bank is used: 'on' (retrieved skills), 'placebo' (random skills), 'off'."
    )
    max_turns: int | None = Field(
        None,
        ge=1,
        le=32,
        description="Turn budget of the solver and the proposer (default: the run config's).",
    )
    group_size: int | None = Field(
        None, ge=1, le=16, description="selfplay: solver rollouts per question (default: the run config's)."
    )
    greedy: bool = Field(True, description="solve: greedy decoding (as `sesa rollout`); false samples.")
    seed: int | None = Field(None, ge=0, le=2**32 - 1, description="Sampling seed.")

    @model_validator(mode="after")
    def _within_limits(self) -> StudioConfig:
        """Whoever reaches the server writes the context: its paths, model and URLs are checked
        (graphs.serve_limits says what may be named and how a server's operator allows more)."""
        for field in ("run_config", "bank"):
            value = getattr(self, field)
            if value is not None:
                serve_limits.check_path(field, value)
        if self.corpus is not None and self.corpus != "embedded":
            serve_limits.check_path("corpus", self.corpus)
        if self.model is not None and self.base_url is None:  # with base_url, a name the server serves
            serve_limits.check_model(self.model)
        for field in ("base_url", "search_url"):
            value = getattr(self, field)
            if value is not None:
                serve_limits.check_url(field, value)
        return self

    def overrides(self) -> dict[str, Any]:
        """The run-config overrides this configuration implies (dotted keys, as ``--set`` takes them)."""
        out: dict[str, Any] = {}
        if self.max_turns is not None:
            out["solver.max_turns"] = out["proposer.max_turns"] = self.max_turns
        if self.group_size is not None:
            out["solver.group_size"] = self.group_size
        return out

    def policy_config(self, cfg: RunConfig) -> PolicyConfig:
        """The one policy the served graphs share (solver and proposer alike: one model in memory)."""
        base = cfg.solver_policy.model_dump()
        if self.model is not None:
            base["model"] = self.model
        if self.base_url is not None:
            base.update(backend="openai", base_url=self.base_url)
        elif self.engine is not None:
            base.update(backend=self.engine, base_url=None)
        return PolicyConfig.model_validate(base)

    def search_config(self, cfg: RunConfig) -> SearchConfig:
        update = {
            k: v
            for k, v in (("backend", self.search_backend), ("corpus", self.corpus), ("url", self.search_url))
            if v is not None
        }
        return SearchConfig.model_validate({**cfg.search.model_dump(), **update})


# keys a LangGraph server itself puts in a run's context when the caller sent ``config.configurable``
# instead (it mirrors the one into the other): its plumbing, not a setting of the graphs
_SERVER_KEYS = {"thread_id", "run_id", "assistant_id", "graph_id", "user_id", "cron_id", "checkpoint_id"}
_SERVER_PREFIXES = ("__", "langgraph_", "checkpoint_", "x-")


def check_keys(raw: dict[str, Any]) -> None:
    """Refuse a context key that is no :class:`StudioConfig` field (a LangGraph server would otherwise drop
    it silently), naming it, the closest field and all of them."""
    import difflib

    known = list(StudioConfig.model_fields)
    unknown = [
        k for k in raw if k not in known and k not in _SERVER_KEYS and not str(k).startswith(_SERVER_PREFIXES)
    ]
    if not unknown:
        return
    hints = []
    for k in unknown:
        close = difflib.get_close_matches(str(k), known, n=1)
        hints.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise ValueError(f"unknown context key {', '.join(hints)}; the served graphs take: {', '.join(known)}")


def coerce(raw: Any) -> StudioConfig:
    """A :class:`StudioConfig` from what a server passed: the model, a dict of its fields, or None."""
    if isinstance(raw, StudioConfig):
        return raw
    if raw is None:
        return StudioConfig()
    if isinstance(raw, dict):
        check_keys(raw)
        return StudioConfig.model_validate({k: v for k, v in raw.items() if k in StudioConfig.model_fields})
    raise TypeError(
        f"expected a StudioConfig, a dict of its fields or None as context, got {type(raw).__name__}"
    )
