"""The eval report's own tables (answerability, every metric on all and on the answerable subset, the paired
deltas against mode off with their power figure) as HTML for ``sesa report evals/NAME``: the same rows as
``report.md`` and the ``sesa eval`` output, built by :mod:`sesa_eval.report` from ``report.json``."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from sesa_eval.report import METRIC_TITLES, answerability_rows, metric_table, vs_off_table


def _table(rows: Sequence[Sequence[str]]) -> str:
    head, *body = rows
    h = "".join(f"<th>{html.escape(str(c))}</th>" for c in head)
    b = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{html.escape(str(c))}</td>' if i else f"<td>{html.escape(str(c))}</td>"
            for i, c in enumerate(r)
        )
        + "</tr>"
        for r in body
    )
    return f"<table><tr>{h}</tr>{b}</table>"


def eval_tables_html(report: Mapping[str, Any]) -> str:
    """The sections, or '' for a report from before answerability (the page's own table covers it)."""
    if not report.get("answerability"):
        return ""
    parts = [
        "<h2>Answerability</h2>",
        (
            f"<p>A gold answer in the top-{html.escape(str(report.get('search_k')))} documents for the question "
            "(reach_question) or for the question followed by a gold answer (reach_oracle); % (n).</p>"
        ),
        _table(answerability_rows(report)),
        f"<h2>{html.escape(METRIC_TITLES['judge'])}: all questions, then the answerable subset</h2>",
        _table(metric_table(report, "judge")),
    ]
    if any(report.get("vs_off", {}).get("judge", {}).values()):
        parts += [
            "<h2>Against mode off (judge score)</h2>",
            (
                "<p>delta [paired 95% interval] mde = the smallest difference this n could detect (two-sided "
                "alpha 0.05, 80% power) (n pairs): an interval holding 0 with a large mde means the eval cannot "
                "see, not that there is no effect.</p>"
            ),
            _table(vs_off_table(report, ["judge"])),
        ]
    return "".join(parts)
