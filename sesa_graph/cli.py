"""The ``sesa`` command line.

Heavy imports (torch, transformers, the graphs, the trainers) happen inside each command so that
``sesa --help`` is instant and this module only imports down the layers at module level.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from tools.cli import search_app

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

app = typer.Typer(
    name="sesa",
    help="sesa-graph: self-evolving search agents (search self-play + a distilled skill bank).",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
app.add_typer(search_app, name="search", help="Search the corpus, or serve a backend over HTTP.")
policy_app = typer.Typer(help="Policy utilities.", no_args_is_help=True)
app.add_typer(policy_app, name="policy")
config_app = typer.Typer(help="Inspect run configs.", no_args_is_help=True)
app.add_typer(config_app, name="config")
console = Console()


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


@config_app.command("show")
def config_show(
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML run config (default configs/tiny-cpu.yaml)."),
) -> None:
    """Print the resolved run config (defaults filled in) as YAML."""
    import yaml

    from sesa_graph.config import DEFAULT_CONFIG, load_config

    cfg = load_config(config)
    console.print(f"# from {config or DEFAULT_CONFIG}; fields absent there are defaults")
    console.print(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))


@policy_app.command("serve")
def policy_serve(
    model: str = typer.Option("embedded", help="Model: 'embedded', 'embedded-warm', HF id or local path."),
    host: str = typer.Option("127.0.0.1", help="Bind address (loopback unless you mean to expose it)."),
    port: int = typer.Option(8001, help="Port."),
    device: str = typer.Option("cpu", help="Torch device."),
) -> None:
    """Serve a local policy with vLLM's /v1/completions fields (token ids + logprobs), for CPU machines."""
    from sesa_graph.policy.local import LocalPolicy
    from sesa_graph.policy.serve import build_app
    from tools.server import serve_app

    policy = LocalPolicy(model, device=device)
    console.print(f"serving {model} at http://{host}:{port}/v1")
    serve_app(build_app(policy), host, port)


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
