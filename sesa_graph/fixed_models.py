"""Which fixed model takes each role (judge, distiller) when a configured one is not on this machine.

The embedded default's judge and distiller are a model fetched by the set-up (Qwen2.5-Coder-1.5B), served by
a llama.cpp the set-up builds. Where the fetch or the build did not happen (no registry access, no disk
space, no compiler), a role with a ``fallback`` goes on with it
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
from tools.split_models import SPLIT_MODELS, is_fetched


def _missing(models: dict[str, EndpointConfig], key: str) -> tuple[str, str] | None:
    """(what keeps ``models.key`` from starting here, the sentence that says how to fix it), or None."""
    ep = models.get(key)
    if ep is None or ep.serve is None:
        return None
    name = ep.serve.model
    if ep.serve.backend == "llama.cpp":
        from sesa_graph.policy.llama_server import llama_cpp_missing

        if name in SPLIT_MODELS and not is_fetched(SPLIT_MODELS[name]):  # llama.cpp reads the GGUF itself
            return _NOT_FETCHED, _fetch(f"sesa models fetch {name}")
        why = llama_cpp_missing()
        return None if why is None else ("cannot be served here", f"The server: {why}")
    fetch = missing_fetched_model(name)
    return None if fetch is None else (_NOT_FETCHED, _fetch(fetch))


_NOT_FETCHED = "is not fetched on this machine"


def _fetch(command: str) -> str:
    return f"Fetch it with `{command}` (or bash scripts/setup.sh)"


def _fallback_for(
    role: str, endpoint: str, fallback: str | None, models: dict[str, EndpointConfig], allowed: str
):
    """(fallback, note) when ``endpoint``'s fetched model is missing, (None, None) when it is there; a
    UserError with the fetch command when it is missing and ``fallback`` is unset."""
    missing = _missing(models, endpoint)
    if missing is None:
        return None, None
    why, fix = missing
    if fallback is None:
        raise UserError(f"{role}.endpoint models.{endpoint} {why}. {fix}, or set {role}.fallback ({allowed})")
    instead = "exact match alone" if fallback == "exact" else f"models.{fallback}"
    note = (
        f"{role}: models.{endpoint} {why} -- the {role} is {instead} instead, as {role}.fallback: {fallback} "
        f"says. {fix} for the configured {role}."
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
