"""The building blocks of a ``sesa report`` page (:mod:`sesa_runs.report`): the style, escaped cells, tables,
headline tiles, the plots saved as PNG and shown as figures, the failure taxonomy with an example each, the
example rollouts, the notes on files a run lacks, and the page around them."""

from __future__ import annotations

import html
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from sesa_graph import statuses
from sesa_runs.load import Eval, Run
from sesa_runs.plots import KIND_COLOURS, KIND_LABELS, KIND_ORDER

CSS = """
body{font-family:system-ui,-apple-system,sans-serif;font-size:14px;color:#24292f;max-width:1240px;margin:18px auto;
padding:0 16px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:16px;border-bottom:1px solid #d0d7de;padding-bottom:3px;margin-top:22px}
.pill{display:inline-block;border-radius:10px;padding:1px 9px;font-size:12px;font-weight:600;color:#fff}
.tiles{display:grid;gap:8px;margin:10px 0}
.tile{border:1px solid #d0d7de;border-radius:6px;padding:6px 12px}
.tile b{display:block;font-size:18px} .tile span{color:#57606a;font-size:12px}
.figs{display:grid;grid-template-columns:repeat(auto-fill,minmax(540px,1fr));gap:14px}
.figs img{width:100%;border:1px solid #eaeef2;border-radius:4px} figcaption{font-size:12px}
table{border-collapse:collapse;font-size:13px;margin:6px 0} td,th{border:1px solid #d0d7de;padding:3px 8px;
text-align:left;vertical-align:top} th{background:#f6f8fa} td.n{text-align:right;font-variant-numeric:tabular-nums}
.muted{color:#57606a} details{margin:4px 0} summary{cursor:pointer}
.note{background:#fff8c5;border:1px solid #d4a72c;border-radius:6px;padding:6px 10px;margin:8px 0}
"""


def esc(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def table(head: list[str], rows: list[list[Any]], numeric: set[int] | None = None) -> str:
    numeric = numeric or set()
    h = "".join(f"<th>{esc(c)}</th>" for c in head)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{h}</tr>{body}</table>"


def tiles(items: list[tuple[str, str]], per_row: int = 8) -> str:
    # balanced rows (10 tiles: 5 + 5), so no tile is left alone on the last row
    rows = -(-len(items) // per_row)
    cols = -(-len(items) // max(rows, 1))
    return (
        f'<div class="tiles" style="grid-template-columns:repeat({cols},minmax(0,1fr))">'
        + "".join(f'<div class="tile"><b>{esc(v)}</b><span>{esc(k)}</span></div>' for k, v in items)
        + "</div>"
    )


def save_figures(figures: dict[str, Callable], obj: Any, out: Path) -> tuple[list[str], list[str]]:
    out.mkdir(parents=True, exist_ok=True)
    saved, empty = [], []
    for name, fn in figures.items():
        target = out / f"{name}.png"
        fig = fn(obj)
        if fig is None:
            target.unlink(missing_ok=True)
            empty.append(name)
            continue
        fig.savefig(target, dpi=110)
        saved.append(name)
    return saved, empty


def taxonomy(df: pd.DataFrame, by: str | None = None) -> str:
    """Failure-kind counts (optionally per ``by``), each with one example rollout."""
    if df.empty:
        return '<p class="muted">no solver rollouts yet</p>'
    rows = []
    groups = [(None, df)] if by is None else list(df.groupby(by, sort=False))
    total = len(df) if by is None else None
    for key, sub in groups:
        for kind in [k for k in KIND_ORDER if k in set(sub["failure"])]:
            ex = sub[sub["failure"] == kind].iloc[0]
            n = int((sub["failure"] == kind).sum())
            what = statuses.OUTCOMES[kind].description
            final = ex["final"] if isinstance(ex["final"], str) else "(none)"
            example = (
                f"<code>{esc(ex['id'])}</code><br>Q: {esc(str(ex['question'])[:160])}<br>"
                f"A: {esc(final)} · gold: {esc(' | '.join(ex['golds']))}"
            )
            label = (
                f'<span style="color:{KIND_COLOURS.get(kind, "#8c959f")}">■</span> {esc(KIND_LABELS[kind])}'
            )
            cells = ([esc(key)] if by else []) + [
                label,
                n,
                f"{100 * n / (total or len(sub)):.0f}%",
                esc(what),
                example,
            ]
            rows.append(cells)
    head = ([by] if by else []) + ["outcome", "rollouts", "share", "meaning", "first example"]
    off = 1 if by else 0
    return table(head, rows, numeric={1 + off, 2 + off})


def examples(obj: Run | Eval, df: pd.DataFrame, limit: int = 6) -> str:
    """One collapsed trace per failure kind (a person without Jupyter can read a rollout here)."""
    parts = []
    for kind in [k for k in KIND_ORDER if k in set(df["failure"])][:limit]:
        rid = df[df["failure"] == kind].iloc[0]["id"]
        try:
            body = obj.trace(rid).to_html()
        except (KeyError, ValueError) as exc:
            body = f"<p>{esc(exc)}</p>"
        parts.append(
            f"<details{' open' if not parts else ''}><summary><b>{esc(KIND_LABELS[kind])}</b>: "
            f"<code>{esc(rid)}</code></summary>{body}</details>"
        )
    return "".join(parts) or '<p class="muted">no rollouts yet</p>'


def figs_html(saved: list[str], empty: list[str], captions: dict[str, str]) -> str:
    imgs = "".join(
        f'<figure style="margin:0"><img src="plots/{n}.png" alt="{esc(captions.get(n, n))}">'
        f'<figcaption class="muted">{esc(captions.get(n, ""))}</figcaption></figure>'
        for n in saved
    )
    note = (
        f'<p class="muted">nothing to plot yet for: {"; ".join(captions.get(n, n) for n in empty)}</p>'
        if empty
        else ""
    )
    return f'<div class="figs">{imgs}</div>{note}'


def page(title: str, body: str) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M")
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{esc(title)}</title><style>{CSS}</style>'
        f'</head><body>{body}<p class="muted" style="margin-top:24px">written by <code>sesa report</code> '
        f"at {stamp}; the plots are in <code>plots/</code>.</p></body></html>"
    )


def report_notes(obj: Run | Eval) -> list[str]:
    """What a reader of the report must know about files the run lacks (also said by ``sesa report``)."""
    if isinstance(obj, Eval):
        path = obj.path / "report.json"
        if path.exists() and obj.report is None:
            return [
                f"{path} is damaged (not a JSON object): the headline tables are left out; rerun `sesa eval`"
            ]
        return []
    if (obj.path / "metrics.jsonl").is_file():
        return []
    if not (obj.shard_steps() or obj.finished):
        return []
    missing = obj.path / "metrics.jsonl"
    note = (
        f"{missing} is missing although the run has written steps: no step counts as committed and the "
        "per-step plots and tables are empty; restore the file from a backup to see them"
    )
    return [note]
