"""What every `sesa` command shares: the console, logging, --set parsing and the engine switch."""

from __future__ import annotations

import functools
import logging
import os
import sys
import traceback
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import click
import typer
from rich.console import Console
from typer.core import TyperGroup

from tools.errors import ServiceError, UserError
from tools.terminal import shown

console = Console()

_ARGV: ContextVar[list[str] | None] = ContextVar("sesa_argv", default=None)


def _verbose(args: list[str]) -> bool:
    return os.environ.get("SESA_DEBUG", "") not in ("", "0") or any(a in ("-v", "--verbose") for a in args)


def one_line(message: str) -> str:
    """A user error's message on one line (a multi-line message keeps its parts, joined with '; ')."""
    return "; ".join(line.strip() for line in message.splitlines() if line.strip()) or "(no message)"


def report_error(exc: UserError | ServiceError, verbose: bool) -> typer.Exit:
    """Print ``error: <message>`` on stderr (the traceback first with -v) and return the Exit to raise.
    A service error keeps its line breaks: they hold a server log's tail."""
    if verbose:
        traceback.print_exception(exc, file=sys.stderr)
    message = one_line(str(exc)) if isinstance(exc, UserError) else str(exc).strip()
    click.echo(f"error: {shown(message, 8000)}", err=True)  # messages quote ids and files: never raw
    return typer.Exit(exc.exit_code)


def reporting(command: Callable[..., Any]) -> Callable[..., Any]:
    """A command that reports its own UserError/ServiceError like :class:`ReportingGroup`, for commands
    another app mounts (``sesa_cli.runs.register``)."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (UserError, ServiceError) as exc:
            raise report_error(exc, _verbose(_ARGV.get() or [])) from None

    return run


class ReportingGroup(TyperGroup):
    """The one place a ``sesa`` command's UserError or ServiceError becomes a message and an exit code.
    Typer's pretty traceback stays for everything else (a bug should show where it is)."""

    def main(self, args=None, *a, **kw):  # type: ignore[override]
        token = _ARGV.set(list(sys.argv[1:] if args is None else args))
        try:
            return super().main(args, *a, **kw)
        finally:
            _ARGV.reset(token)

    def invoke(self, ctx: click.Context):
        # the rest of the command line, for -v, when this group is mounted under an app of its own
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        try:
            return super().invoke(ctx)
        except (UserError, ServiceError) as exc:
            raise report_error(exc, _verbose((_ARGV.get() or []) + rest)) from None


ENGINE_HELP = (
    "vllm: a vLLM OpenAI server per policy (the production path; about 45 s to start on a CPU) | "
    "local: transformers in-process (the fallback)"
)


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


def parse_overrides(pairs: list[str]) -> dict:
    """``--set KEY=VALUE`` pairs as {dotted key: YAML value}; a malformed one is a ConfigError naming it."""
    from sesa_graph.config_yaml import ConfigError, literal, parse_yaml

    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(
                f"--set {literal(pair)}: expected KEY=VALUE with a dotted key, e.g. --set solver.max_turns=4"
            )
        k, v = pair.split("=", 1)
        out[k.strip()] = parse_yaml(v, f"--set {literal(pair)}")[0]
    return out


def interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def check_engine(engine: str) -> str:
    if engine not in ("vllm", "local"):
        raise UserError(f"--engine must be vllm or local, got {engine!r}")
    return engine


def print_settings(rows: list, echo=typer.echo, arm: str | None = None) -> None:
    """One line per resolved setting: ``key = value  # source [paper]/[SSP]/deviation`` (against ``arm``'s
    references when given, e.g. SSP itself for the SSP-style arm)."""
    import json

    from sesa_graph.reference_values import UNSUPPORTED, origin

    for key, value, source in rows:
        echo(f"{key} = {json.dumps(value)}  # {source} {origin(key, value, arm)}".rstrip())
    echo("# reference choices no setting expresses (deviations):")
    for what, why in UNSUPPORTED.items():
        echo(f"#   {what}: {why}")
