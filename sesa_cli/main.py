"""The ``sesa`` command line: one typer app assembled from one module per command group.

Heavy imports (torch, transformers, the graphs, the trainers) happen inside each command so that
``sesa --help`` is instant.
"""

from __future__ import annotations

import os

import typer

from sesa_cli import rollouts, runs
from sesa_cli.bank import bank_app
from sesa_cli.common import ReportingGroup
from sesa_cli.config import config_app
from sesa_cli.models import models_app
from sesa_cli.plan import plan_command
from sesa_cli.policy import policy_app
from sesa_cli.search import search_app
from sesa_cli.targets import targets_app
from sesa_cli.train import train, trainers

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def build_app() -> typer.Typer:
    """The whole `sesa` app (a new one each call)."""
    from sesa_cli.eval import eval_app
    from sesa_cli.warmup import warmup_command

    app = typer.Typer(
        name="sesa",
        cls=ReportingGroup,
        help="sesa-graph: self-evolving search agents (search self-play + a distilled skill bank).",
        no_args_is_help=True,
        pretty_exceptions_show_locals=False,
    )

    @app.callback()
    def _root(
        verbose: bool = typer.Option(
            False, "--verbose", "-v", help="On an error, show its traceback too (also: SESA_DEBUG=1)."
        ),
    ) -> None:
        """sesa-graph: self-evolving search agents (search self-play + a distilled skill bank)."""

    app.command()(train)
    app.command()(trainers)
    app.command()(rollouts.rollout)
    app.command()(rollouts.propose)
    app.command("warmup")(warmup_command)
    app.add_typer(search_app, name="search", help="Search the corpus, or serve a backend over HTTP.")
    app.add_typer(bank_app, name="bank", help="Inspect, diff, export and prime skill banks.")
    app.add_typer(
        eval_app, name="eval", help="Benchmark a solver (SESA-Off / On / placebo); compare two evals."
    )
    runs.register(app)
    app.add_typer(policy_app, name="policy")
    app.add_typer(config_app, name="config")
    app.add_typer(models_app, name="models", help="List and fetch the fixed models the set-up fetches.")
    app.add_typer(targets_app, name="targets", help="Build and check target pools (train.target_pool).")
    app.command("plan")(plan_command)
    return app


def main() -> None:
    """The console entry: a UserError or ServiceError is one line ``error: ...`` on stderr and its exit code
    (2 or 1); a traceback only with -v/--verbose anywhere on the command line, or SESA_DEBUG=1."""
    build_app()()


if __name__ == "__main__":  # pragma: no cover
    main()
