"""``sesa targets``: make and inspect the target pools the proposer writes questions about.

sesa targets build --from nq_hotpotqa_train.jsonl -o runs/targets/pool.jsonl
sesa targets show runs/targets/pool.jsonl
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from sesa_cli.common import ReportingGroup
from tools.errors import UserError

targets_app = typer.Typer(cls=ReportingGroup, no_args_is_help=True)


@targets_app.command("build")
def build(
    src: Annotated[
        Path,
        typer.Option(
            "--from",
            help="Question/answer JSONL (NQ/HotpotQA-style rows: question + answer/answers/golden_answers). "
            "Use a train split, never the benchmark you evaluate on.",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The pool file to write (train.target_pool).")],
    kind: Annotated[
        str | None,
        typer.Option(
            help="Dataset kind for rows without a hop count: nq, triviaqa, popqa (1 hop), hotpotqa, "
            "2wikimultihopqa, bamboogle (2), musique (from each id)."
        ),
    ] = None,
    hops: Annotated[
        int | None, typer.Option(help="Hop count of rows that give none and whose kind is unknown.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the example questions drawn for each row.")] = 0,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing --out file.")] = False,
) -> None:
    """Build a target pool (SSP's answer-pool format) from a question/answer file."""
    from sesa_graph.corpus.target_build import build_pool, write_pool

    if out.exists() and not (force and out.is_file()):
        raise UserError(
            f"--out {out} exists" + ("" if out.is_file() else " and is not a file") + "; give --force"
        )
    rows = build_pool(src, kind=kind, hops=hops, seed=seed)
    write_pool(rows, out)
    by_hops = Counter(r["search_turns"] for r in rows)
    typer.echo(f"{out}: {len(rows)} targets; by hop count {dict(sorted(by_hops.items()))}")


@targets_app.command("show")
def show(pool: Annotated[Path, typer.Argument(help="A pool file (train.target_pool).")]) -> None:
    """Validate a pool file and count its targets by hop count."""
    from sesa_graph.corpus.targets import load_pool_file

    targets = load_pool_file(pool)
    by_hops = Counter(t.hops for t in targets)
    with_examples = sum(1 for t in targets if t.example)
    typer.echo(
        f"{pool}: {len(targets)} targets; by hop count {dict(sorted(by_hops.items()))}; "
        f"{with_examples} with example questions"
    )
