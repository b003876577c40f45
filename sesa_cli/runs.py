"""``sesa runs``, ``sesa trace`` and ``sesa report``: look at runs and evals from a terminal, without Jupyter.

    sesa runs                                         # every run: steps, how its last attempt ended, disk
    sesa trace runs/tiny-cpu                          # list rollouts (filter with --role/--status/--failure)
    sesa trace runs/tiny-cpu --rollout solver/3/3-1/0 # one rollout turn by turn
    sesa trace evals/NAME --rollout bamboogle/test_49/on/greedy --html trace.html
    sesa report runs/tiny-cpu                         # plots/*.png + report.html in the run directory

Both read only what runs and evals write (see :mod:`sesa_runs.load`). Mount them on the ``sesa`` app with
:func:`register` (or ``app.command("trace")(trace_command)``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from sesa_cli.common import reporting
from tools.errors import UserError
from tools.terminal import ID_CHARS, shown

console = Console(highlight=False)  # what runs and evals hold is data: never highlighted, never markup


def trace_command(
    run: Annotated[
        Path, typer.Argument(help="A run directory (runs/NAME) or an eval directory (evals/NAME).")
    ],
    rollout: Annotated[
        str | None,
        typer.Option(
            "--rollout",
            "-r",
            help="Rollout id to show (run: role/step/question_id/sample; eval: "
            "dataset/id/mode/seed). Without it, list the rollouts.",
        ),
    ] = None,
    role: Annotated[str | None, typer.Option(help="List only this role (proposer | solver).")] = None,
    status: Annotated[
        str | None,
        typer.Option(
            help="List only this status (answered, malformed, max_turns, search_error; error in an eval)."
        ),
    ] = None,
    failure: Annotated[
        str | None,
        typer.Option(
            help="List only this outcome (correct, wrong_gold_retrieved, "
            "wrong_gold_not_retrieved, max_turns, malformed, ...)."
        ),
    ] = None,
    limit: Annotated[int, typer.Option(help="List at most this many rollouts (the last ones).")] = 40,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            help="Also write the rollout as an HTML file (an existing one only with --force; never inside a "
            "bank, run or eval).",
        ),
    ] = None,
    plain: Annotated[bool, typer.Option("--plain", help="Plain text, no colour.")] = False,
    force: Annotated[bool, typer.Option(help="Replace an existing --html file.")] = False,
) -> None:
    """Show one rollout turn by turn (reasoning, searches and their documents, skills, answer, verdict, gold),
    or list a run's / eval's rollouts with their ids."""
    from sesa_runs.load import open_dir
    from sesa_runs.outputs import output_file

    if limit < 1:
        raise UserError(f"--limit must be a positive count of rollouts, got {limit}")
    _check_filters(role, status, failure)
    if html is not None:  # refused before anything is read
        output_file(html, "--html", force=force)
    path = shown(run, ID_CHARS, one_line=True)
    obj = open_dir(run)  # (a RunNotFoundError is reported by the app, like every user error)
    if rollout is None:
        _list_rollouts(obj, path, role, status, failure, limit)
    else:
        _show_rollout(obj, rollout, plain, html)


def _list_rollouts(
    obj: Any, path: str, role: str | None, status: str | None, failure: str | None, limit: int
) -> None:
    """A table of the last ``limit`` rollouts that pass the filters: id, outcome, reward, skills, question."""
    from rich.table import Table
    from rich.text import Text

    from sesa_runs.load import select

    df = obj.rollouts(uncommitted=True) if obj.kind == "run" else obj.records()
    df = select(df, role=role, status=status, failure=failure)
    if df.empty:
        console.print(f"{path}: no rollouts match (yet)", markup=False)
        return
    # every cell and the title are Text: questions, ids and paths are data, never rich markup
    t = Table(title=Text(f"{path}: {len(df)} rollouts" + (f", the last {limit}" if len(df) > limit else "")))
    last = df.tail(limit)
    for col in ("id", "outcome", "reward", "skills"):
        t.add_column(col, no_wrap=True)
    wide = console.width >= 100
    if wide:
        t.add_column("question", overflow="ellipsis", no_wrap=True, ratio=1)
    for r in last.itertuples():
        outcome = r.failure if r.role == "solver" else ("valid" if r.valid else f"invalid {r.invalid_reason}")
        question = str(r.question or "") or f"(target: {r.target})"
        reward = f"{r.reward:.2f}" if r.reward == r.reward and r.reward is not None else ""
        cells = [str(r.id), str(outcome), reward, str(len(r.skill_ids)), *([question] if wide else [])]
        t.add_row(*(Text(shown(c, ID_CHARS, one_line=True)) for c in cells))
    console.print(t)
    console.print(f"show one: sesa trace {path} --rollout ID", markup=False)


def _show_rollout(obj: Any, rollout: str, plain: bool, html: Path | None) -> None:
    """One rollout turn by turn on the terminal, and as an HTML file with --html."""
    from sesa_runs.outputs import writing

    try:
        tr = obj.trace(rollout)
    except KeyError as exc:  # an unknown id: the message lists the near ones
        raise UserError(str(exc.args[0])) from None
    if plain:
        print(tr.to_text())
    else:
        console.print(tr)
    if html is not None:
        from html import escape

        with writing(html, "--html file"):
            html.write_text(
                f'<!doctype html><meta charset="utf-8"><title>{escape(rollout)}</title>{tr.to_html()}',
                encoding="utf-8",
            )
        console.print(f"wrote {shown(html, ID_CHARS, one_line=True)}", markup=False)


def _check_filters(role: str | None, status: str | None, failure: str | None) -> None:
    """A filter value no rollout can have is a typo: refused with the values there are, not "no match"."""
    from sesa_graph.statuses import KIND_ORDER, OUTCOMES
    from sesa_runs.files import ROLES

    known = {
        "--role": ROLES,
        "--status": tuple(n for n, o in OUTCOMES.items() if o.status),
        "--failure": KIND_ORDER,
    }
    for flag, value in (("--role", role), ("--status", status), ("--failure", failure)):
        if value is not None and value not in known[flag]:
            raise UserError(
                f"{flag} {shown(value, ID_CHARS, one_line=True)!r}: use one of {', '.join(known[flag])}"
            )


def report_command(
    run: Annotated[
        Path, typer.Argument(help="A run directory (runs/NAME) or an eval directory (evals/NAME).")
    ],
) -> None:
    """Write the plots (plots/*.png) and a one-page HTML summary (report.html) into a run or eval directory.
    A run still in progress shows its committed steps."""
    from sesa_runs.load import open_dir
    from sesa_runs.outputs import writing
    from sesa_runs.report import report_notes, write_report

    for note in report_notes(open_dir(run)):
        typer.echo(f"warning: {shown(note, None, one_line=True)}", err=True)
    with writing(Path(run) / "report.html", "report"):
        out = write_report(run)
    pngs = sorted(p.name for p in (out.parent / "plots").glob("*.png"))
    console.print(
        f"wrote {shown(out, None, one_line=True)} and plots/ ({', '.join(pngs) or 'nothing to plot yet'})",
        markup=False,
    )


def runs_command(
    runs_dir: Annotated[Path, typer.Option("--runs-dir", help="Where the runs are.")] = Path("runs"),
    prune: Annotated[
        list[str] | None,
        typer.Option(
            "--prune",
            help="Remove checkpoints/ (and superseded/) from this finished run, keeping its results "
            "(policies/, metrics, trajectories, skills): ~3 GiB of a default run. It can then no longer be "
            "extended with --resume --steps. Repeat for several runs.",
        ),
    ] = None,
) -> None:
    """List the runs: steps committed of the configured ones, how the last attempt ended (finished, running,
    stopped with its error, or died without a word -- a SIGKILL, most likely the out-of-memory killer -- and
    in which step), and the disk each takes, checkpoints apart."""
    from sesa_graph.config_yaml import read_config_file
    from training.run_disk import footprint, pruned
    from training.run_disk import prune as prune_run
    from training.run_life import committed_steps, status

    if not runs_dir.is_dir():
        raise UserError(f"--runs-dir {runs_dir} is not a directory (runs are written to runs/ by default)")
    for name in prune or []:
        run = runs_dir / name
        if not (run / "config.yaml").is_file():
            raise UserError(f"--prune {name}: no run of that name in {runs_dir} (`sesa runs` lists them)")
        freed = prune_run(run)
        console.print(
            f"pruned {shown(name, None, one_line=True)}: {freed / 2**30:.2f} GiB freed", markup=False
        )
    found = sorted(p for p in runs_dir.iterdir() if (p / "config.yaml").is_file())
    if not found:
        console.print(f"no runs in {runs_dir}", markup=False)
        return
    total = 0
    for run in found:
        try:
            steps = read_config_file(run / "config.yaml")[0].get("train", {}).get("steps", "?")
        except Exception:  # noqa: BLE001 -- a damaged config is shown, not fatal to the listing
            steps = "?"
        parts = footprint(run)
        size, ckpt = sum(parts.values()), parts.get("checkpoints", 0)
        total += size
        disk = f"{size / 2**30:.2f} GiB" + (
            f" (checkpoints {ckpt / 2**30:.2f})" if ckpt else " (pruned)" if pruned(run) else ""
        )
        console.print(
            f"{shown(run.name, None, one_line=True)}  steps {committed_steps(run)}/{steps}  {disk}  {status(run)}",
            markup=False,
            soft_wrap=True,
        )
    console.print(
        f"{len(found)} runs, {total / 2**30:.2f} GiB; `sesa runs --prune NAME` frees a finished run's checkpoints",
        markup=False,
    )


def register(app: typer.Typer) -> None:
    """Mount ``runs``, ``trace`` and ``report`` on a typer app (the ``sesa`` CLI)."""
    app.command("runs")(reporting(runs_command))
    app.command("trace")(reporting(trace_command))
    app.command("report")(reporting(report_command))
