"""What ``sesa eval`` prints: the resolved settings, the report's tables and ``compare``'s tables. Every cell
that comes from data (dataset names from file names, labels from paths, settings from files) goes through
the terminal sanitiser and is escaped as rich markup."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sesa_eval.datasets import display_name
from tools.terminal import ID_CHARS, shown

console = Console(highlight=False)


def cell(value: object, limit: int = ID_CHARS) -> str:
    """A table cell or a line's field from data: control characters visible, cut, markup escaped."""
    return escape(shown(value, limit, one_line=True))


def print_settings(rows: list[tuple[str, str, str]]) -> None:
    t = Table(title="eval settings", show_header=True, header_style="bold", box=None, padding=(0, 1))
    t.add_column("setting")
    t.add_column("value")
    t.add_column("from", style="dim")
    for k, v, s in rows:
        t.add_row(cell(k), cell(v, 500), cell(s))
    console.print(t)


def print_rows(title: str, rows: list[list[str]]) -> None:
    t = Table(title=escape(title), title_justify="left")
    for i, h in enumerate(rows[0]):  # dataset names come from the data files: shown, never markup
        t.add_column(cell(h), justify="left" if i == 0 else "right")
    for r in rows[1:]:
        t.add_row(*(cell(c) for c in r))
    console.print(t)


def print_report(report: dict) -> None:
    from sesa_eval.report import METRIC_TITLES, METRICS, answerability_rows, metric_table, vs_off_table

    if report.get("answerability"):
        print_rows(
            f"Answerability (a gold answer in the top-{report.get('search_k')} for the question / for question + "
            "answer), % (n)",
            answerability_rows(report),
        )
    for metric in METRICS:
        title = METRIC_TITLES[metric] + (
            " = EM (--judge none)" if metric == "judge" and report["judge"] == "none" else ""
        )
        print_rows(title + ": all questions, then the answerable subset", metric_table(report, metric))
    if any(report.get("vs_off", {}).get("judge", {}).values()):
        print_rows(
            "Against mode off (judge score): delta [paired 95% CI] mde = smallest detectable difference (n)",
            vs_off_table(report, ["judge"]),
        )
    h = report.get("hygiene")
    if h:
        color = "green" if h["clean"] else "red"
        console.print(
            f"[{color}]data hygiene: {h['questions']} questions, "
            + ("clean" if h["clean"] else "EVAL QUESTIONS FOUND")
            + "[/]  "
            + "; ".join(
                f"{cell(s['source'])}: {s['exact']} exact / {s['normalized']} normalized"
                for s in h["sections"]
            )
            + "".join(f"  [dim](not checked: {cell(x)})[/]" for x in h["not_checked"])
        )


def print_comparison(c: Any) -> None:
    from sesa_eval.compare import flag_text, fmt_ci, fmt_mde
    from sesa_eval.report import METRIC_TITLES, fmt_cell, fmt_delta

    t = Table(
        title=f"{METRIC_TITLES[c.metric]}: B = {cell(c.b_label)} vs A = {cell(c.a_label)}"
        + (", answerable questions" if c.subset == "answerable" else ""),
        title_justify="left",
    )
    for col, just in (
        ("dataset", "left"),
        ("A", "right"),
        ("B", "right"),
        ("B - A", "right"),
        ("95% CI (paired)", "right"),
        ("mde (n)", "right"),
        ("", "left"),
    ):
        t.add_column(col, justify=just, no_wrap=not col)  # the flag stays on one line (cut, not wrapped)
    for r in c.rows:
        name = "Mean" if r.dataset == "mean" else cell(display_name(r.dataset))
        d = fmt_delta(r.delta)
        if r.regression:
            d = f"[bold red]{d}[/]"
        t.add_row(
            name,
            fmt_cell(r.a),
            fmt_cell(r.b),
            d,
            fmt_ci(r),
            fmt_mde(r),
            f"[bold red]{cell(flag_text(r))}[/]" if r.regression else f"[dim]{cell(flag_text(r))}[/]",
        )
    console.print(t)
    regs = [cell(display_name(d)) for d in c.regressions if d != "mean"]
    console.print(
        f"[bold red]B is below A on: {', '.join(regs)}[/]"
        if regs
        else "[green]B is not below A on any dataset.[/]"
    )
    for w in c.warnings:
        console.print(f"[yellow]note:[/] {cell(w, 2000)}")
