"""``sesa eval``: benchmark a solver with bank modes side by side; ``sesa eval compare A B``.

    sesa eval --data-dir ../shared/data/benchmarks --model embedded-warm --bank-modes off,on \\
        --bank runs/tiny-cpu/memory --limit 20
    sesa eval --data-dir ../shared/data/benchmarks --datasets bamboogle,nq --seeds 3 --limit 20
    sesa eval --data-dir ../shared/data/benchmarks --model embedded-warm --bank runs/NAME \
        --bank-modes closed,off,on,oracle --limit 20    # with the closed-book floor and open-book ceiling
    sesa eval --model Qwen/Qwen3-4B --base-url http://127.0.0.1:8000/v1 --search-backend http \\
        --search-url http://127.0.0.1:9000 --judge http://127.0.0.1:8001/v1 --judge-model Qwen/Qwen3-8B ...
    sesa eval compare evals/base evals/trained          # per-dataset deltas, regressions flagged
    sesa eval compare evals/trained:off evals/trained:on

Settings come from ``--config`` (a run config YAML: its solver_policy, search, solver, judge and models
sections), then the flags; every resolved setting is printed with where it came from. Output:
``evals/<name>/records.jsonl``, ``report.md``, ``report.json``. Rerunning a command resumes it.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from sesa_cli.common import ReportingGroup
from sesa_cli.eval_outputs import WRITE_ERRNOS, check_out_root, write_error
from sesa_cli.eval_tables import cell, console, print_comparison, print_report, print_settings
from sesa_eval.progress import EvalProgress
from sesa_eval.settings import EvalSettings, default_name
from sesa_graph.config import JudgeConfig, SolverConfig
from sesa_graph.fixed_models import judge_with_fallback
from sesa_graph.model_config import PolicyConfig
from tools.config import SearchConfig
from tools.errors import UserError
from tools.terminal import shown

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

eval_app = typer.Typer(
    help="Evaluate a solver on QA benchmarks (bank modes side by side); `compare` two evals.",
    invoke_without_command=True,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    cls=ReportingGroup,  # (also when mounted under an app of its own, as the tests do)
)
err_console = Console(stderr=True)

_E, _P, _S, _V, _J = (
    EvalSettings.model_fields,
    PolicyConfig.model_fields,
    SearchConfig.model_fields,
    SolverConfig.model_fields,
    JudgeConfig.model_fields,
)


# help of the flags that are not a config field's (or add to its doc)
FLAG_HELP = {
    "model": " With --base-url: the model name the endpoint serves.",
    "base_url": "OpenAI-compatible endpoint of the solver (e.g. `vllm serve`, http://127.0.0.1:8000/v1); default: "
    "run --model in-process.",
    "tokenizer": "With --base-url: local tokenizer (HF id or path) when --model is not one.",
    "engine": "vllm: start a vLLM server for --model (the default, as in training) | local: transformers "
    "in-process.",
    "judge": "'none' (exact match only), a model of --config's `models:` (it judges a miss), an OpenAI-compatible "
    "endpoint URL (with --judge-model), or 'policy' (the evaluated model grades itself; warned). Default: the "
    "run config's judge; without --config, the judge of the model's run, else the default run's (exact match, "
    "then Qwen2.5-Coder-0.5B on a miss; exact match alone, said so, where that model is not fetched).",
    "config": "Run config YAML whose solver_policy, search, solver, judge and models sections are the defaults.",
    "overwrite": "Discard the records of an earlier eval of this name.",
}
# flag (argument name) -> the setting it sets: an EvalSettings field, or a section's as `section.field`
FLAG_SETTINGS = {
    "data_dir": "data_dir",
    "datasets": "datasets",
    "limit": "limit",
    "subset": "subset",
    "bank_modes": "bank_modes",
    "bank": "bank",
    "top_k": "top_k",
    "seeds": "seeds",
    "concurrency": "concurrency",
    "max_errors": "max_errors",
    "target_pool": "target_pool",
    "name": "name",
    "out_root": "out_root",
    "model": "policy.model",
    "base_url": "policy.base_url",
    "api_key_env": "policy.api_key_env",
    "engine": "policy.backend",
    "retries": "policy.retries",
    "device": "policy.device",
    "dtype": "policy.dtype",
    "max_batch_size": "policy.max_batch_size",
    "kv_cache_mb": "policy.kv_cache_mb",
    "search_backend": "search.backend",
    "corpus": "search.corpus",
    "search_url": "search.url",
    "dense_model": "search.dense_model",
    "search_k": "solver.search_k",
    "max_turns": "solver.max_turns",
    "judge": "judge.kind",
    "judge_model": "judge.model",
    "judge_timeout": "judge.timeout_s",
}


def _h(fields: dict, name: str, extra: str = "") -> str:
    return (fields[name].description or "") + extra


def _csv(value: str | None) -> list[str] | None:
    return None if value is None else [v.strip() for v in value.split(",") if v.strip()]


# ---- settings resolution ---------------------------------------------------------------------------------


def resolve_settings(
    config: Path | None, flags: dict[str, Any]
) -> tuple[EvalSettings, list[tuple[str, str, str]]]:
    """EvalSettings from a run config (optional) and the flags that were given (not None).

    Returns the settings and ``(setting, value, source)`` rows for printing.
    """
    from sesa_graph.config import resolve_config

    # the run config through the resolver `sesa train` and `sesa config show` use; of its sections only what
    # the file sets is taken, the rest stays the eval's default
    base, rows = resolve_config(config) if config is not None else (None, [])
    sections, sources = _config_sections(
        base, rows, config, flags.get("policy.model"), judge_flag=flags.get("judge.kind") is not None
    )
    top: dict[str, Any] = {}
    for key, value in flags.items():
        if value is None:
            continue
        if "." in key:
            sec, leaf = key.split(".", 1)
            sections[sec][leaf] = value
        else:
            top[key] = value
        sources[key] = "flag"
    if flags.get("policy.base_url"):
        sections["policy"]["backend"] = "openai"
        sources["policy.backend"] = "flag (--base-url)"
    models = dict(base.models) if base else _default_models(sections, flags.get("policy.model"))
    if flags.get("judge.kind") is not None:
        sections["judge"].update(_judge_flag(flags["judge.kind"], models))
    judge_cfg, fell_back = judge_with_fallback(JudgeConfig(**sections["judge"]), models)
    if fell_back:
        sources["judge.kind"] = f"fallback: {fell_back}"
    if base is None and judge_cfg.kind != "model":
        models = {}  # the default run's fixed models only came along for its judge
    policy_cfg = PolicyConfig(**sections["policy"])
    if "name" not in top:
        top["name"] = default_name(policy_cfg.model)
        sources["name"] = "from --model"
    settings = EvalSettings(
        **top,
        judge_fallback=fell_back,
        policy=policy_cfg,
        search=SearchConfig(**sections["search"]),
        solver=SolverConfig(**sections["solver"]),
        judge=judge_cfg,
        models=models,
    )
    if settings.judge.timeout_s != judge_cfg.timeout_s:
        sources["judge.timeout_s"] = "eval default for a local policy judge"
    return settings, _setting_rows(settings, sources)


def _config_sections(
    base: Any,
    rows: list[tuple[str, str, str]],
    config: Path | None,
    model: str | None,
    judge_flag: bool = False,
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The policy, search, solver and judge settings a run config's file sets, by section, and where each
    came from; with no config, the solver loop and judge the model was trained with (its run's, else the
    default run's), the judge only when no --judge flag chooses another."""
    from sesa_graph.config import load_config

    in_file = {key for key, _, source in rows if source.startswith("file ")}
    sections: dict[str, dict[str, Any]] = {
        sec: {k: v for k, v in getattr(base, field).model_dump().items() if _set_in(in_file, f"{field}.{k}")}
        if base
        else {}
        for sec, field in (
            ("policy", "solver_policy"),
            ("search", "search"),
            ("solver", "solver"),
            ("judge", "judge"),
        )
    }
    sources = {f"{sec}.{k}": f"config {config}" for sec, d in sections.items() for k in d}
    if base is None:
        run_cfg = _run_config_of(model)
        sections["solver"] = load_config(run_cfg).solver.model_dump(exclude_unset=True)
        src = (
            f"config {run_cfg} (the model's run)"
            if run_cfg
            else "config configs/tiny-cpu.yaml (the default run)"
        )
        sources.update({f"solver.{k}": src for k in sections["solver"]})
        if not judge_flag:  # the run's judge (the default run's: exact match, then its fixed model on a miss)
            sections["judge"] = load_config(run_cfg).judge.model_dump(exclude_unset=True)
            sources.update({f"judge.{k}": src for k in sections["judge"]})
    return sections, sources


def _default_models(sections: dict[str, dict[str, Any]], model: str | None) -> dict[str, Any]:
    """With no --config: the fixed models of the run config the judge section came from (the model's run,
    else the default run), so its judge can start; none when the judge is not a model."""
    from sesa_graph.config import load_config

    if sections["judge"].get("kind") != "model":
        return {}
    return dict(load_config(_run_config_of(model)).models)


def _judge_flag(judge: str, models: dict[str, Any]) -> dict[str, Any]:
    """The judge settings ``--judge`` sets: none, policy, an endpoint URL or a model of the config's models."""
    if judge.startswith(("http://", "https://")):
        return {"kind": "openai", "base_url": judge}
    if judge in ("none", "policy"):
        return {"kind": judge}
    if judge in models:
        return {"kind": "model", "endpoint": judge}
    known = f", a model of --config's models ({', '.join(sorted(models))})" if models else ""
    raise typer.BadParameter(
        f"--judge {judge!r}: use none, policy{known} or an http(s):// endpoint URL (with --judge-model)"
    )


def _setting_rows(settings: EvalSettings, sources: dict[str, str]) -> list[tuple[str, str, str]]:
    """``(setting, value, source)`` for every resolved setting, sections flattened to dotted keys."""
    rows = []
    for key, value in settings.model_dump(mode="json").items():
        if isinstance(value, dict):
            for leaf, v in value.items():
                rows.append((f"{key}.{leaf}", repr(v), sources.get(f"{key}.{leaf}", "default")))
        else:
            rows.append((key, repr(value), sources.get(key, "default")))
    return rows


def _errors(exc: Any) -> str:
    """A pydantic ValidationError's errors on one line, each with its setting."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg'].removeprefix('Value error, ')}"
        for e in exc.errors()
    )


def _set_in(keys: set[str], key: str) -> bool:
    """Whether the file set ``key`` (or something inside it, for a mapping-valued setting)."""
    return key in keys or any(k.startswith(key + ".") for k in keys)


def _run_config_of(model: str | None) -> Path | None:
    """``runs/NAME/config.yaml`` for a model given as a run's ``policies/<role>`` directory, else None."""
    if not model:
        return None
    path = Path(model)
    cfg = path.parent.parent / "config.yaml"
    return cfg if path.parent.name == "policies" and cfg.is_file() else None


# ---- commands --------------------------------------------------------------------------------------------


@eval_app.callback()
def eval_main(
    ctx: typer.Context,
    data_dir: Annotated[Path | None, typer.Option(help=_h(_E, "data_dir"))] = None,
    datasets: Annotated[str | None, typer.Option(help=_h(_E, "datasets"))] = None,
    limit: Annotated[int | None, typer.Option(help=_h(_E, "limit"))] = None,
    subset: Annotated[str | None, typer.Option(help=_h(_E, "subset"))] = None,
    model: Annotated[str | None, typer.Option(help=_h(_P, "model", FLAG_HELP["model"]))] = None,
    base_url: Annotated[str | None, typer.Option(help=FLAG_HELP["base_url"])] = None,
    tokenizer: Annotated[str | None, typer.Option(help=FLAG_HELP["tokenizer"])] = None,
    engine: Annotated[str | None, typer.Option(help=FLAG_HELP["engine"])] = None,
    api_key_env: Annotated[str | None, typer.Option(help=_h(_P, "api_key_env"))] = None,
    retries: Annotated[int | None, typer.Option(help=_h(_P, "retries"))] = None,
    device: Annotated[str | None, typer.Option(help=_h(_P, "device"))] = None,
    dtype: Annotated[str | None, typer.Option(help=_h(_P, "dtype"))] = None,
    max_batch_size: Annotated[int | None, typer.Option(help=_h(_P, "max_batch_size"))] = None,
    kv_cache_mb: Annotated[int | None, typer.Option(help=_h(_P, "kv_cache_mb"))] = None,
    search_backend: Annotated[str | None, typer.Option(help=_h(_S, "backend"))] = None,
    corpus: Annotated[str | None, typer.Option(help=_h(_S, "corpus"))] = None,
    search_url: Annotated[str | None, typer.Option(help=_h(_S, "url"))] = None,
    dense_model: Annotated[str | None, typer.Option(help=_h(_S, "dense_model"))] = None,
    search_k: Annotated[int | None, typer.Option(help=_h(_V, "search_k"))] = None,
    max_turns: Annotated[int | None, typer.Option(help=_h(_V, "max_turns"))] = None,
    bank_modes: Annotated[str | None, typer.Option(help=_h(_E, "bank_modes"))] = None,
    bank: Annotated[Path | None, typer.Option(help=_h(_E, "bank"))] = None,
    top_k: Annotated[int | None, typer.Option(help=_h(_E, "top_k"))] = None,
    judge: Annotated[str | None, typer.Option(help=FLAG_HELP["judge"])] = None,
    judge_model: Annotated[str | None, typer.Option(help=_h(_J, "model"))] = None,
    judge_timeout: Annotated[float | None, typer.Option(help=_h(_J, "timeout_s"))] = None,
    seeds: Annotated[int | None, typer.Option(help=_h(_E, "seeds"))] = None,
    concurrency: Annotated[int | None, typer.Option(help=_h(_E, "concurrency"))] = None,
    max_errors: Annotated[int | None, typer.Option(help=_h(_E, "max_errors"))] = None,
    target_pool: Annotated[list[str] | None, typer.Option(help=_h(_E, "target_pool"))] = None,
    name: Annotated[str | None, typer.Option(help=_h(_E, "name", " Default: from --model."))] = None,
    out_root: Annotated[Path | None, typer.Option(help=_h(_E, "out_root"))] = None,
    config: Annotated[Path | None, typer.Option("--config", "-c", help=FLAG_HELP["config"])] = None,
    overwrite: Annotated[bool, typer.Option(help=FLAG_HELP["overwrite"])] = False,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log at INFO level.")] = False,
) -> None:
    """Run an eval: every dataset x bank mode (x seed), concurrently, cached per question, then the report."""
    if ctx.invoked_subcommand is not None:
        return
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    from pydantic import ValidationError

    try:
        settings, rows = resolve_settings(config, flag_settings(locals()))
    except ValidationError as exc:  # (a ConfigError, a UserError, is reported as it is)
        raise UserError(f"invalid eval settings: {_errors(exc)}") from None
    print_settings(rows)
    check_out_root(settings.out_root)
    if settings.judge.kind == "policy":
        err_console.print(
            "[yellow]warning:[/] judge 'policy': the evaluated model grades its own answers (a miss it "
            "judges 'Correct' scores); the paper's protocol uses a fixed judge -- --judge URL --judge-model M, "
            "a model of --config's models, or none (exact match)"
        )
    policy = None
    if settings.policy.backend == "openai" and tokenizer:
        from sesa_eval.harness import make_policy

        policy = make_policy(settings.policy, tokenizer=tokenizer)
    outcome = _run(settings, policy, overwrite, EvalProgress(console, enabled=progress))
    _print_outcome(outcome)


def flag_settings(given: dict[str, Any]) -> dict[str, Any]:
    """The settings the flags of ``sesa eval`` set (``given``: the command's arguments by name), by key;
    a flag not given is None, as :func:`resolve_settings` takes it."""
    flags = {key: given[flag] for flag, key in FLAG_SETTINGS.items()}
    for key in ("datasets", "bank_modes"):
        flags[key] = _csv(flags[key])
    flags["target_pool"] = flags["target_pool"] or None
    return flags


def _start_printer(out_dir: Path) -> Callable[[dict], None]:
    """What the eval says once it knows its work: questions, rollouts to run, cached ones, stale ones."""

    def on_start(info: dict) -> None:
        n = sum(info["datasets"].values())
        console.print(
            f"{n} {'answerable ' if info['subset'] == 'answerable' else ''}questions in "
            f"{len(info['datasets'])} datasets; {info['tasks']} rollouts to run, "
            f"{sum(info['cached'].values())} cached in {shown(out_dir, None, one_line=True)}",
            markup=False,
        )
        if info["stale"]:
            console.print(
                "[yellow]"
                + ", ".join(f"{n} cached mode-{m}" for m, n in info["stale"].items())
                + " record(s) were made with other skills than the bank gives those questions now: "
                "running them again[/]"
            )

    return on_start


def _run(settings: EvalSettings, policy: Any, overwrite: bool, bar: EvalProgress) -> Any:
    """The eval itself, its failures said as the user's (a bad setting, path or model) or the disk's."""
    from pydantic import ValidationError

    from sesa_eval.harness import evaluate

    on_start = _start_printer(settings.out_dir)
    try:
        return asyncio.run(
            evaluate(settings, policy=policy, overwrite=overwrite, progress=bar, on_start=on_start)
        )
    except ValidationError as exc:
        raise UserError(f"invalid eval settings: {_errors(exc)}") from None
    except FileNotFoundError as exc:  # a path given on the command line or in the settings
        raise UserError(f"{exc.filename or ''}: no such file or directory ({exc.strerror})") from None
    except OSError as exc:  # a disk that refuses the eval's files, or transformers' word for a bad model
        if exc.errno in WRITE_ERRNOS and not isinstance(exc, UserError):
            raise write_error(exc, settings.out_dir) from None
        if isinstance(exc, UserError) or settings.policy.model not in str(exc):
            raise
        raise UserError(
            f"--model {settings.policy.model}: cannot be loaded: {' '.join(str(exc).split())}"
        ) from None
    except KeyboardInterrupt:
        err_console.print(
            f"[yellow]interrupted[/]: finished questions are kept in {cell(settings.out_dir, None)}/records.jsonl; "
            "rerun the same command to resume"
        )
        raise typer.Exit(130) from None


def _print_outcome(outcome: Any) -> None:
    """The report's tables, the wall time, where the files are; exit 1 when the eval did not finish."""
    report = outcome.report
    print_report(report)
    t = report["timing"]
    console.print(
        f"wall: setup {t['setup_s']} s + rollouts {t['run_s']} s; {t['computed']} rollouts computed "
        f"({t['rollouts_per_minute']} rollouts/minute, {t['questions_per_minute']} questions/minute in every "
        f"mode and seed), {t['cached']} cached"
    )
    where = shown(outcome.out_dir, None, one_line=True)
    console.print(f"report: {where}/report.md  records: {where}/records.jsonl", markup=False)
    if not report["complete"]:
        err_console.print(
            f"[red]INCOMPLETE[/]: {report['done']} of {report['planned']} done"
            + (f"; stopped: {cell(report['aborted'], 2000)}" if report["aborted"] else "")
            + ". Rerun the same command to resume."
        )
        raise typer.Exit(1)


@eval_app.command("compare")
def compare(
    a: Annotated[
        str, typer.Argument(help="Baseline eval: its directory (evals/NAME), DIR:MODE, or a report.json.")
    ],
    b: Annotated[str, typer.Argument(help="Eval compared against A: directory, DIR:MODE or report.json.")],
    metric: Annotated[str, typer.Option(help="judge, em, f1, or all.")] = "judge",
    tolerance: Annotated[
        float, typer.Option(help="Flag a dataset only when B is below A by more than this many points.")
    ] = 0.0,
    fail_on_regression: Annotated[
        bool, typer.Option(help="Exit with status 1 when any dataset regressed.")
    ] = False,
) -> None:
    """Per-dataset deltas B - A for each bank mode both evals ran, flagging datasets where B is below A."""
    from sesa_eval.compare import compare_reports
    from sesa_eval.report import METRICS

    metrics = list(METRICS) if metric == "all" else [metric]
    regressed = False
    for m in metrics:
        comparisons = compare_reports(a, b, metric=m, tolerance=tolerance)  # errors: UserErrors, reported
        for c in comparisons:
            print_comparison(c)
            regressed |= any(d != "mean" for d in c.regressions)
    if regressed and fail_on_regression:
        raise typer.Exit(1)
