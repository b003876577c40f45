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


def _fallback_for(
    role: str, endpoint: str, fallback: str | None, models: dict[str, EndpointConfig], allowed: str
):
    """(fallback, note) when ``endpoint``'s fetched model is missing, (None, None) when it is there; a
    UserError with the fetch command when it is missing and ``fallback`` is unset."""
    fetch = _missing(models, endpoint)
    if fetch is None:
        return None, None
    if fallback is None:
        raise UserError(
            f"{role}.endpoint models.{endpoint} is a fetched model that is not on this machine; fetch it with "
            f"`{fetch}`, or set {role}.fallback ({allowed})"
        )
    instead = "exact match alone" if fallback == "exact" else f"models.{fallback}"
    note = (
        f"{role}: models.{endpoint} is not fetched on this machine -- the {role} is {instead} instead, as "
        f"{role}.fallback: {fallback} says. Fetch it with `{fetch}` (or bash scripts/setup.sh) for the "
        f"configured {role}."
    )
    return fallback, note


def judge_with_fallback(
    judge: JudgeConfig, models: dict[str, EndpointConfig]
) -> tuple[JudgeConfig, str | None]:
    """``judge`` itself, or its fallback (exact match or another model) with the note that says so."""
    if judge.kind != "model":
        return judge, None
    fallback, note = _fallback_for(
        "judge", judge.endpoint, judge.fallback, models, "exact, or a key of models:"
    )
    if fallback is None:
        return judge, None
    change = {"kind": "none"} if fallback == "exact" else {"endpoint": fallback}
    return updated(judge, change), note


def distiller_with_fallback(
    distiller: ModelRef, models: dict[str, EndpointConfig]
) -> tuple[ModelRef, str | None]:
    """``distiller`` itself, or its fallback model with the note that says so."""
    fallback, note = _fallback_for(
        "distiller", distiller.endpoint, distiller.fallback, models, "a key of models:"
    )
    if fallback is None:
        return distiller, None
    return updated(distiller, {"endpoint": fallback}), note


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
