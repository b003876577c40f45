"""Which fixed model takes each role (judge, distiller) when a configured one is not on this machine.

The embedded default's judge and distiller are a model fetched by the set-up (Qwen2.5-Coder-0.5B). Where
that fetch did not happen (no registry access, no disk space), a role with a ``fallback`` goes on with it
and the run says so loudly, once, at start; a role without one stops the run with the fetch command. The
roles the run actually used are recorded (``roles.json`` of a run, the eval's settings), so a result is
never read as the stronger model's when it was not.
"""

from __future__ import annotations

from sesa_graph.config import JudgeConfig, RunConfig
from sesa_graph.embedded import missing_fetched_model
from sesa_graph.model_config import EndpointConfig, ModelRef
from tools.config_model import updated
from tools.errors import UserError


def _missing(models: dict[str, EndpointConfig], key: str) -> str | None:
    ep = models.get(key)
    return None if ep is None or ep.serve is None else missing_fetched_model(ep.serve.model)


def _fallen(role: str, key: str, fetch: str, instead: str, setting: str) -> str:
    return (
        f"{role}: models.{key} is not fetched on this machine -- the {role} is {instead} instead, as "
        f"{setting} says. Fetch it with `{fetch}` (or bash scripts/setup.sh) for the configured {role}."
    )


def judge_with_fallback(
    judge: JudgeConfig, models: dict[str, EndpointConfig]
) -> tuple[JudgeConfig, str | None]:
    """``judge`` itself, or its fallback (exact match or another model) with the note that says so."""
    if judge.kind != "model":
        return judge, None
    fetch = _missing(models, judge.endpoint)
    if fetch is None:
        return judge, None
    if judge.fallback is None:
        raise UserError(
            f"judge.endpoint models.{judge.endpoint} is a fetched model that is not on this machine; fetch it "
            f"with `{fetch}`, or set judge.fallback (exact, or a key of models:)"
        )
    if judge.fallback == "exact":
        note = _fallen("judge", judge.endpoint, fetch, "exact match alone", "judge.fallback: exact")
        return updated(judge, {"kind": "none"}), note
    instead = f"models.{judge.fallback}"
    note = _fallen("judge", judge.endpoint, fetch, instead, f"judge.fallback: {judge.fallback}")
    return updated(judge, {"endpoint": judge.fallback}), note


def distiller_with_fallback(
    distiller: ModelRef, models: dict[str, EndpointConfig]
) -> tuple[ModelRef, str | None]:
    fetch = _missing(models, distiller.endpoint)
    if fetch is None:
        return distiller, None
    if distiller.fallback is None:
        raise UserError(
            f"distiller.endpoint models.{distiller.endpoint} is a fetched model that is not on this machine; "
            f"fetch it with `{fetch}`, or set distiller.fallback (a key of models:)"
        )
    instead = f"models.{distiller.fallback}"
    note = _fallen(
        "distiller", distiller.endpoint, fetch, instead, f"distiller.fallback: {distiller.fallback}"
    )
    return updated(distiller, {"endpoint": distiller.fallback}), note


def with_fallbacks(cfg: RunConfig) -> tuple[RunConfig, list[str]]:
    """``cfg`` with each role whose fetched model is missing moved to its fallback, and one note per move
    (callers log or print them where a person sees them)."""
    judge, judge_note = judge_with_fallback(cfg.judge, cfg.models)
    distiller, distiller_note = (
        distiller_with_fallback(cfg.distiller, cfg.models)
        if cfg.memory.mode == "on"
        else (cfg.distiller, None)
    )
    notes = [n for n in (judge_note, distiller_note) if n]
    if not notes:
        return cfg, []
    return updated(cfg, {"judge": judge, "distiller": distiller}), notes
