"""``sesa report``: the plots of a run or an eval as PNG plus a one-page HTML summary, written into its
directory so a person without Jupyter can look at it::

    sesa report runs/tiny-cpu        # or evals/NAME
    -> runs/tiny-cpu/report.html, runs/tiny-cpu/plots/*.png

The page: status (finished / in progress, steps committed), the headline numbers, every plot of
:mod:`sesa_runs.plots`, the failure taxonomy with an example each, the most helpful and harmful skills,
the bank versions, the last steps, and one rollout per outcome rendered turn by turn. The run's page is
:mod:`sesa_runs.report_run`, the eval's is here; their building blocks are :mod:`sesa_runs.report_html`.
"""

from __future__ import annotations

from pathlib import Path

from sesa_runs.eval_tables import eval_tables_html
from sesa_runs.load import Eval, Run, open_dir
from sesa_runs.plots import EVAL_FIGURES, RUN_FIGURES, fmt_num
from sesa_runs.report_html import esc, examples, figs_html, page, report_notes, save_figures, table, taxonomy
from sesa_runs.report_run import run_page

__all__ = ["report_notes", "write_report"]


def _eval_page(ev: Eval, saved: list[str], empty: list[str]) -> str:
    df, rep, st = ev.records(), ev.report or {}, ev.settings
    state = ("complete", "#1a7f37") if ev.finished else ("incomplete", "#bf8700")
    policy = (st.get("policy") or {}).get("model") or rep.get("model")
    bank = rep.get("bank") or {}
    body = [
        f'<h1>Eval {esc(ev.name)} <span class="pill" style="background:{state[1]}">{state[0]}</span></h1>',
        f'<div class="muted">{esc(ev.path.resolve())}</div>',
        f"<p>model <code>{esc(policy)}</code>; bank modes {esc(', '.join(st.get('bank_modes') or rep.get('modes') or []))}"
        + (
            f"; bank <code>{esc(bank.get('path'))}</code> v{esc(bank.get('version'))} ({esc(bank.get('n_skills'))} skills)"
            if bank
            else ""
        )
        + f"; judge {esc(rep.get('judge') or (st.get('judge') or {}).get('kind'))}; "
        f"{len(df)} records</p>",
    ]
    body += [f'<div class="note">{esc(n)}</div>' for n in report_notes(ev)]
    if rep.get("aborted"):
        body.append(f'<div class="note">stopped: {esc(rep["aborted"])}</div>')
    t = ev.off_on()
    if len(t):
        modes = [c for c in t.columns if c not in ("dataset", "on - off") and not c.startswith("n_")]
        rows = [
            [esc(r["dataset"])]
            + [f"{fmt_num(r[m], '{:.1f}')} ({r[f'n_{m}']})" for m in modes]
            + ([fmt_num(r["on - off"], "{:+.1f}")] if "on - off" in t.columns else [])
            for r in t.to_dict("records")
        ]
        body += [
            "<h2>Judge score (%) per dataset</h2>",
            table(
                ["dataset"] + modes + (["on - off"] if "on - off" in t.columns else []),
                rows,
                set(range(1, len(modes) + 2)),
            ),
        ]
    body.append(eval_tables_html(rep))
    caps = {"scores": "score per dataset and bank mode", "outcomes": "how rollouts ended, per bank mode"}
    body += [
        "<h2>Plots</h2>",
        figs_html(saved, empty, caps),
        "<h2>How rollouts ended</h2>",
        taxonomy(df, by="mode"),
    ]
    if "on" in set(df["mode"]):
        fx = ev.skill_effects()
        if len(fx):
            body += [
                "<h2>Skills in mode on (paired with mode off on the same question)</h2>",
                table(
                    ["skill", "fired", "on correct", "paired", "helped", "hurt", "net", "datasets"],
                    [
                        [
                            f"<code>{esc(r.skill_id)}</code>",
                            r.fired,
                            r.on_correct,
                            r.paired,
                            r.helped,
                            r.hurt,
                            r.net,
                            esc(r.datasets),
                        ]
                        for r in fx.head(10).itertuples()
                    ],
                    {1, 2, 3, 4, 5, 6},
                ),
            ]
    body += ["<h2>Example rollouts (one per outcome; click to open)</h2>", examples(ev, df)]
    return page(f"eval {ev.name}", "".join(body))


def write_report(path: str | Path) -> Path:
    """Write ``plots/*.png`` and ``report.html`` into a run or eval directory; return the HTML path."""
    obj = open_dir(path)
    figures = RUN_FIGURES if isinstance(obj, Run) else EVAL_FIGURES
    saved, empty = save_figures(figures, obj, obj.path / "plots")
    html = run_page(obj, saved, empty) if isinstance(obj, Run) else _eval_page(obj, saved, empty)
    out = obj.path / "report.html"
    tmp = out.with_name(".report.html.tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(out)
    return out
