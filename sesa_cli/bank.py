"""``sesa bank``: inspect, diff, export and prime skill banks.

    sesa bank show runs/tiny-cpu --top 20 --sort helpful
    sesa bank diff 3 4 --bank runs/tiny-cpu          # or two snapshot files
    sesa bank export runs/tiny-cpu -o final.yaml     # a priming file for another run (--format jsonl: all)
    sesa bank mine runs/bootstrap -o priming.yaml --distiller openai:MODEL@http://127.0.0.1:8000/v1

show, diff and export read the files a bank writes (``skills.jsonl``, snapshots, ``state.json``), never
its Chroma store and never its writer lock, so they are safe while a run is writing the bank. When a
commit is unfinished they show the last finished state and say so on stderr. BANK is a bank directory or
a run directory that holds ``bank/`` or ``memory/``; ``BANK@vN`` (show, export) is the bank as of snapshot
N, which reads even when ``state.json`` or ``skills.jsonl`` is damaged.
"""

from __future__ import annotations

import importlib
import os
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tools.terminal import ID_CHARS, data_line, shown, unsafe

bank_app = typer.Typer(help="Inspect, diff, export and prime skill banks.", no_args_is_help=True)
console = Console(highlight=False)  # (rich's highlighter is slow on long fields, and styles data)
err_console = Console(stderr=True, highlight=False)

BankArg = Annotated[
    Path, typer.Argument(help="Bank directory, or a run directory holding bank/; BANK@vN: its snapshot N.")
]


class SortKey(str, Enum):
    helpful = "helpful"
    hurt = "hurt"
    retrieved = "retrieved"
    score = "score"
    created = "created"


_SORT = {
    "helpful": lambda s: (s.helpful, s.score),
    "hurt": lambda s: (s.hurt, -s.score),
    "retrieved": lambda s: (s.retrieved, s.score),
    "score": lambda s: (s.score, s.helpful),
    "created": lambda s: (s.created_step, s.id),
}


def _fail(msg: str) -> NoReturn:
    """A user error (a bad argument, a missing or damaged file): one line, exit code 2."""
    err_console.print(f"[red]error:[/red] {escape(shown(msg))}", soft_wrap=True)
    raise typer.Exit(2)


def _warn(msg: str | None) -> None:
    if msg:
        err_console.print(f"[yellow]warning:[/yellow] {escape(shown(msg))}", soft_wrap=True)


def _short(text: str, n: int = 70) -> str:
    """Skill text (the distiller's output) on one line, control characters visible, cut to ``n``."""
    text = shown(text, None, one_line=True)
    return escape(text if len(text) <= n else text[: n - 1] + "…")


def _id(text: object) -> str:
    return escape(shown(text, ID_CHARS, one_line=True))


@bank_app.command("show")
def show(
    bank: BankArg,
    top: Annotated[int, typer.Option("--top", "-n", help="How many skills to list (0: all).")] = 20,
    sort: Annotated[
        SortKey, typer.Option(help="Order by this counter (score = helpful - hurt).")
    ] = SortKey.helpful,
) -> None:
    """The bank's version, size, queue and statistics, and its top skills by a counter."""
    if top < 0:
        _fail(f"--top/-n must be 0 (all) or a positive count, got {top}")
    from sesa_graph.memory.snapshot import committed_view, snapshot_skills, snapshot_version
    from tools.errors import UserError

    state: dict = {}
    try:
        if snapshot_version(bank) is not None:
            file, skills = snapshot_skills(bank)
            header = f"[bold]{_id(file)}[/bold]  skills {len(skills)} ({sum(s.seed for s in skills)} seeds)"
        else:
            view = committed_view(bank)
            state, skills = view.state, view.skills
            header = (
                f"[bold]{_id(view.path)}[/bold]  version {_id(state['version'])}  skills {len(skills)} "
                f"({sum(s.seed for s in skills)} seeds)  tombstones {state.get('n_tombstones', 0)}  "
                f"pending failures {view.queue_len}  embedder {_id(state['embedder'])}"
            )
            _warn(view.warning())
    except (UserError, OSError) as exc:
        _fail(str(exc))
    console.print(header)
    if isinstance(state.get("stats"), dict) and state["stats"]:
        console.print(
            "stats: " + _short(", ".join(f"{k}={v}" for k, v in sorted(state["stats"].items())), 2000)
        )
    skills.sort(key=_SORT[sort.value], reverse=True)
    table = Table(expand=True)
    # on a narrow terminal the id and category are cut before the description is squeezed away
    table.add_column("id", overflow="ellipsis", no_wrap=True, ratio=2)
    table.add_column("cat", overflow="ellipsis", no_wrap=True, ratio=1)
    for col in ("ret", "help", "hurt", "step"):
        table.add_column(col, no_wrap=True)
    table.add_column("description", overflow="fold", ratio=4)
    for s in skills[: top or None]:
        table.add_row(
            _id(s.id) + ("*" if s.seed else ""),
            _id(s.category),
            str(s.retrieved),
            str(s.helpful),
            str(s.hurt),
            str(s.created_step),
            _short(s.description),
        )
    console.print(table)
    console.print("* seed (permanent)")


@bank_app.command("diff")
def diff(
    a: Annotated[
        str, typer.Argument(help="Earlier snapshot: a .jsonl path, or a version number with --bank.")
    ],
    b: Annotated[str, typer.Argument(help="Later snapshot: a .jsonl path, or a version number with --bank.")],
    bank: Annotated[Path | None, typer.Option(help="Bank (or run) directory, for version numbers.")] = None,
) -> None:
    """Skills admitted and evicted, and counter changes, between two snapshots."""
    from sesa_graph.memory.snapshot import diff_snapshots, pending_change, read_skills, resolve_snapshot
    from tools.errors import UserError

    try:
        pa, pb = resolve_snapshot(a, bank), resolve_snapshot(b, bank)
        d = diff_snapshots(read_skills(pa), read_skills(pb))
    except (UserError, OSError) as exc:
        _fail(str(exc))
    try:  # the snapshots read fine: a damaged journal is worth a warning, not a failed diff
        pending = pending_change(bank) if bank is not None else None
        _warn(pending and f"{bank}: an unfinished {pending} is pending; its snapshot may be listed already")
    except UserError as exc:
        _warn(str(exc))
    console.print(
        f"{_id(pa.name)} -> {_id(pb.name)}: +{len(d.admitted)} admitted, -{len(d.evicted)} "
        f"evicted, {len(d.changed)} with new counters"
    )
    for s in d.admitted:
        console.print(f"[green]+ {_id(s.id)}[/green] ({_id(s.category)}) {_short(s.description, 90)}")
    for s in d.evicted:
        console.print(
            f"[red]- {_id(s.id)}[/red] (ret {s.retrieved}, help {s.helpful}, hurt {s.hurt}) "
            f"{_short(s.description, 80)}"
        )
    for old, new in d.changed:
        console.print(
            f"~ {_id(new.id)}: retrieved {old.retrieved}->{new.retrieved}, helpful {old.helpful}->"
            f"{new.helpful}, hurt {old.hurt}->{new.hurt}"
        )


@bank_app.command("export")
def export(
    bank: BankArg,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Output file (default: stdout); an existing one is replaced only with --force, and never one "
            "inside a bank, run or eval directory.",
        ),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="'yaml' (a priming file another run can load) or 'jsonl' "
            "(every field and counter, for notebooks).",
        ),
    ] = "yaml",
    seeds: Annotated[
        bool, typer.Option(help="Include the seed skills (yaml; jsonl always has all).")
    ] = False,
    force: Annotated[bool, typer.Option(help="Replace an existing -o file.")] = False,
) -> None:
    """Write the current skills as a priming YAML or as JSONL."""
    from sesa_graph.fsutil import write_jsonl_atomic
    from sesa_graph.memory.skill import skill_file_data, write_skill_file
    from sesa_graph.memory.snapshot import committed_view, snapshot_skills, snapshot_version
    from sesa_runs.outputs import output_file, writing
    from tools.errors import UserError

    if fmt not in ("yaml", "jsonl"):
        _fail(f"--format must be yaml or jsonl, got {shown(fmt, ID_CHARS)!r}")
    try:
        if out is not None:
            output_file(out, "-o", force=force)
    except UserError as exc:
        _fail(str(exc))
    try:
        if snapshot_version(bank) is not None:
            skills = snapshot_skills(bank)[1]
        else:
            view = committed_view(bank)
            skills = view.skills
            _warn(view.warning())
    except (UserError, OSError) as exc:
        _fail(str(exc))
    try:
        with writing(out or "stdout", "export"):
            if fmt == "jsonl":
                rows = [s.model_dump(mode="json") for s in skills]
                if out:
                    write_jsonl_atomic(out, rows)
                else:
                    for r in rows:
                        print(data_line(r))
                return
            chosen = [s for s in skills if seeds or not s.seed]
            if out:
                write_skill_file(out, chosen, source="mined", note=f"exported from {bank}")
                console.print(f"wrote {len(chosen)} skills to {_id(out)}")
            else:
                print(_yaml_text(skill_file_data(chosen, note=f"exported from {bank}")), end="")
    except UserError as exc:
        _fail(str(exc))


def _yaml_text(data: Any) -> str:
    """YAML for stdout: readable non-ASCII, but every character escaped when a control or bidi character
    would otherwise reach the terminal raw (YAML lets some through: NEL, U+202E)."""
    from sesa_graph.fsutil import dump_yaml

    text = dump_yaml(data)
    return dump_yaml(data, allow_unicode=False) if unsafe(text) else text


def load_distiller(spec: str, api_key_env: str | None = None) -> Any:
    """A distiller client from a spec: 'local' / 'local:MODEL' (in-process transformers policy),
    'openai:MODEL@BASE_URL' (an OpenAI-compatible /v1/completions endpoint, e.g. vLLM), or
    'package.module:factory' (a callable returning a PolicyClient or a langchain-core chat model)."""
    if spec == "local" or spec.startswith("local:"):
        from sesa_graph.policy.local import LocalPolicy

        return LocalPolicy(spec.partition(":")[2] or "embedded")
    if spec.startswith("openai:"):
        model, _, url = spec[len("openai:") :].partition("@")
        if not (model and url):
            raise ValueError(f"distiller spec {spec!r}: expected openai:MODEL@BASE_URL")
        key = "EMPTY"
        if api_key_env:
            key = os.environ.get(api_key_env) or ""
            if not key:
                raise ValueError(f"the distiller's API key variable {api_key_env} is not set")
        from sesa_graph.policy.openai_client import OpenAIPolicy

        return OpenAIPolicy(base_url=url, model=model, api_key=key)
    module, sep, attr = spec.partition(":")
    if not sep:
        raise ValueError(
            f"distiller spec {spec!r}: use local, local:MODEL, openai:MODEL@URL or module:factory"
        )
    return getattr(importlib.import_module(module), attr)()


@bank_app.command("mine")
def mine_cmd(
    run: Annotated[
        Path, typer.Argument(help="Run directory with failures.jsonl (or the JSONL file itself).")
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Priming YAML to write (an existing one only with --force; never inside a bank, run or eval).",
        ),
    ] = Path("priming.yaml"),
    distiller: Annotated[
        str, typer.Option(help="local | local:MODEL | openai:MODEL@BASE_URL | module:factory.")
    ] = "local",
    api_key_env: Annotated[
        str | None, typer.Option(help="Environment variable with the endpoint's API key.")
    ] = None,
    max_failures: Annotated[
        int, typer.Option("--max", help="Most failures to distil, highest priority first.")
    ] = 200,
    against: Annotated[
        list[Path] | None,
        typer.Option(help="Other skill files the mined skills must not duplicate (the seeds always count)."),
    ] = None,
    embedder: Annotated[
        str, typer.Option(help="Embedding model for deduplication (use the run's).")
    ] = "embedded",
    keep: Annotated[
        int | None,
        typer.Option(help="Keep at most this many admitted skills, highest priority first (the paper: 142)."),
    ] = None,
    force: Annotated[bool, typer.Option(help="Replace an existing -o file.")] = False,
) -> None:
    """Mine candidate skills from a run's failures (`sesa train` writes them to RUN/failures/), deduplicate
    them against the seeds and each other, and write a priming file for `memory.priming_files`."""
    from sesa_graph.memory.config import MemoryConfig
    from sesa_graph.memory.mining import mine_run
    from sesa_runs.outputs import output_file
    from tools.encoder import Encoder
    from tools.errors import UserError

    try:  # before the distiller loads: a refused -o costs nothing
        output_file(out, "-o", force=force)
    except UserError as exc:
        _fail(str(exc))
    try:
        client = load_distiller(distiller, api_key_env)
    except (ValueError, ImportError, AttributeError) as exc:
        _fail(str(exc))
    try:
        res = mine_run(
            run,
            out,
            client,
            Encoder(embedder),
            MemoryConfig(embedder=embedder),
            max_failures=max_failures,
            against_files=against or [],
            keep=keep,
        )
    except (OSError, ValueError) as exc:
        _fail(str(exc))
    console.print(
        escape(
            f"distilled {res.responses} failures ({len(res.errored)} distiller errors): "
            f"{len(res.admitted)} admitted, rejected {dict(res.rejected)}"
        )
    )
    if res.error:
        console.print(f"[yellow]distiller error:[/yellow] {escape(shown(res.error))}")
    console.print(f"wrote {_id(out)}")
