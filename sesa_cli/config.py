"""`sesa config`: the resolved run config, and where each value comes from."""

from __future__ import annotations

from pathlib import Path

import typer

config_app = typer.Typer(help="Inspect run configs.", no_args_is_help=True)


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
    arm: str | None = typer.Option(
        None,
        "--arm",
        help="Show a comparison arm: 'ssp' applies the SSP-style arm's settings (--bank off --proposer-reward "
        "1-p) and, with --origins, marks values against SSP itself instead of SESA.",
    ),
    set_: list[str] = typer.Option(
        [],
        "--set",
        help="Override a field as `sesa train --set` would, to preview it: --set solver.max_turns=4.",
    ),
) -> None:
    """Print the resolved run config (defaults filled in) as YAML, or with --origins where each value comes from."""
    from sesa_cli.common import parse_overrides, print_settings
    from sesa_graph.config import DEFAULT_CONFIG, resolve_config
    from sesa_graph.fsutil import dump_yaml
    from sesa_graph.reference_values import ARMS
    from tools.errors import UserError

    if arm is not None and arm not in ARMS:
        raise UserError(f"--arm {arm!r}: not a known arm; choose one of {', '.join(sorted(ARMS))}")
    path = config or DEFAULT_CONFIG
    overrides = parse_overrides(set_)
    flags = {}
    if arm:  # the arm's settings, under any --set (as a flag would be)
        flags = {k: f"--arm {arm}" for k in ARMS[arm].settings if k not in overrides}
        overrides = {**{k: v for k, v in ARMS[arm].settings.items() if k in flags}, **overrides}
    cfg, rows = resolve_config(path, overrides, flags)
    if not origins:
        # plain echo: a value may hold brackets (not markup) and a console would wrap long lines mid-YAML
        typer.echo(
            f"# from {path}{' with ' + ' '.join('--set ' + x for x in set_) if set_ else ''}; fields absent there are defaults"
        )
        typer.echo(dump_yaml(cfg.model_dump(mode="json"), allow_unicode=False, width=80))
        return
    if arm:
        typer.echo(f"# the {arm} arm ({ARMS[arm].command}), marked against its own reference")
    print_settings(rows, arm=arm)
