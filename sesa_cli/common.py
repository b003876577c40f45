"""What every `sesa` command shares: the console, logging, --set parsing and the engine switch."""

from __future__ import annotations

import logging

import typer
import yaml
from rich.console import Console

console = Console()

ENGINE_HELP = (
    "vllm: a vLLM OpenAI server per policy (the production path; about 45 s to start on a CPU) | "
    "local: transformers in-process (the fallback)"
)


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


def parse_overrides(pairs: list[str]) -> dict:

    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise typer.BadParameter(f"--set expects KEY=VALUE (dotted key), got {pair!r}")
        k, v = pair.split("=", 1)
        out[k.strip()] = yaml.safe_load(v)
    return out


def interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def check_engine(engine: str) -> str:
    if engine not in ("vllm", "local"):
        raise typer.BadParameter(f"--engine must be vllm or local, got {engine!r}")
    return engine


def print_settings(rows: list, echo=typer.echo) -> None:
    """One line per resolved setting: ``key = value  # source [paper]/[SSP]/deviation``."""
    import json

    from sesa_graph.reference_values import UNSUPPORTED, origin

    for key, value, source in rows:
        echo(f"{key} = {json.dumps(value)}  # {source} {origin(key, value)}".rstrip())
    echo("# reference choices no setting expresses (deviations):")
    for what, why in UNSUPPORTED.items():
        echo(f"#   {what}: {why}")
