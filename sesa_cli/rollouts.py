"""`sesa rollout` and `sesa propose`: one solver or proposer rollout, printed turn by turn."""

from __future__ import annotations

import typer

from sesa_cli.common import ENGINE_HELP, check_engine, console
from tools.errors import UserError


def _rollout_parts(
    model: str, max_turns: int, corpus: str, engine: str = "vllm", base_url: str | None = None
):
    from sesa_graph.config import SearchConfig, load_config
    from sesa_graph.model_config import PolicyConfig
    from tools.config_model import updated

    # every flag is validated as the same key in a config file would be, before a server starts for minutes
    solver = updated(load_config(None).solver, {"max_turns": max_turns})
    settings = {"model": model, "backend": "openai", "base_url": base_url} if base_url else {}
    pcfg = updated(
        PolicyConfig(),
        settings or {"model": model, "backend": check_engine(engine)},
        {"model": "--model", "base_url": "--base-url", "backend": "--base-url" if base_url else "--engine"},
    )
    search_cfg = updated(SearchConfig(), {"corpus": corpus})
    if corpus != "embedded":
        from tools.inputs import regular_file

        regular_file(corpus, "--corpus")

    from graphs.contexts import solver_context
    from sesa_graph.policy.factory import make_policy
    from tools.backends import make_backend

    if pcfg.backend == "vllm":
        console.print(
            f"starting a vLLM server for {model} (about 45 s on a CPU; `sesa policy serve` + --base-url "
            "keeps one running, --engine local skips it) ...",
            markup=False,
        )
    try:
        policy = make_policy(pcfg)
    except OSError as exc:  # transformers' word for a model it cannot load
        if isinstance(exc, UserError):
            raise
        raise UserError(f"--model {model}: cannot be loaded: {' '.join(str(exc).split())}") from None
    search = make_backend(search_cfg)
    return policy, search, solver_context(solver, policy, search, greedy=True)


def _print_trace(state: dict, title: str) -> None:
    """The rollout as :class:`sesa_runs.trace.Trace` renders it (the one trace renderer: rich text, no
    markup parsing, so documents and questions holding ``[/]`` print as they are)."""
    from sesa_runs.trace import Trace

    console.print(Trace.from_state(state, role="proposer" if title == "question" else "solver"))
    console.print(f"turns: {state.get('n_turns')}", markup=False)


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
    from sesa_graph.rollout.judge import Judge

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
            f"verdict: {'correct' if v.correct else 'wrong'} (EM {v.em:.0f}, F1 {v.f1:.2f}, {v.method})",
            markup=False,
        )


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

    from graphs.contexts import propose_context
    from graphs.propose import propose as run_propose
    from sesa_graph.config import load_config

    if not target.strip():
        raise typer.BadParameter("the target is empty")
    policy, search, _ = _rollout_parts(model, 4, corpus, engine, base_url)
    cfg = load_config(None)  # the default run's proposer budgets and checks (its RAG check is off on CPU)
    ctx = propose_context(cfg, policy, search, judge=policy)
    try:
        state = asyncio.run(run_propose(target, hops, ctx))
    finally:
        getattr(policy, "close", lambda: None)()
    _print_trace(state, "question")
    console.print(  # the RAG reader's answer is model output: printed as it is, never as markup
        f"valid: {state.get('valid')}  reason: {state.get('invalid_reason')}  rag answer: {state.get('rag_answer')!r}",
        markup=False,
        highlight=False,
    )
