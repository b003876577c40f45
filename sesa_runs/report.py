"""``sesa report``: the plots of a run or an eval as PNG plus a one-page HTML summary, written into its
directory so a person without Jupyter can look at it::

    sesa report runs/tiny-cpu        # or evals/NAME
    -> runs/tiny-cpu/report.html, runs/tiny-cpu/plots/*.png

The page: status (finished / in progress, steps committed), the headline numbers, every plot of
:mod:`sesa_runs.plots`, the failure taxonomy with an example each, the most helpful and harmful skills,
the bank versions, the last steps, and one rollout per outcome rendered turn by turn.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from sesa_graph import statuses
from sesa_runs.eval_tables import eval_tables_html
from sesa_runs.load import Eval, Run, open_dir, truthy
from sesa_runs.plots import (
    EVAL_FIGURES,
    KIND_COLOURS,
    KIND_LABELS,
    KIND_ORDER,
    RUN_FIGURES,
    fmt_num,
    solver_groups,
)

# ---- the HTML page ---------------------------------------------------------------------------------------

_CSS = """
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


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def _table(head: list[str], rows: list[list[Any]], numeric: set[int] | None = None) -> str:
    numeric = numeric or set()
    h = "".join(f"<th>{_e(c)}</th>" for c in head)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{h}</tr>{body}</table>"


def _tiles(items: list[tuple[str, str]], per_row: int = 8) -> str:
    # balanced rows (10 tiles: 5 + 5), so no tile is left alone on the last row
    rows = -(-len(items) // per_row)
    cols = -(-len(items) // max(rows, 1))
    return (
        f'<div class="tiles" style="grid-template-columns:repeat({cols},minmax(0,1fr))">'
        + "".join(f'<div class="tile"><b>{_e(v)}</b><span>{_e(k)}</span></div>' for k, v in items)
        + "</div>"
    )


def _save_figures(figures: dict[str, Callable], obj: Any, out: Path) -> tuple[list[str], list[str]]:
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


def _taxonomy(df: pd.DataFrame, by: str | None = None) -> str:
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
                f"<code>{_e(ex['id'])}</code><br>Q: {_e(str(ex['question'])[:160])}<br>"
                f"A: {_e(final)} · gold: {_e(' | '.join(ex['golds']))}"
            )
            label = (
                f'<span style="color:{KIND_COLOURS.get(kind, "#8c959f")}">■</span> {_e(KIND_LABELS[kind])}'
            )
            cells = ([_e(key)] if by else []) + [
                label,
                n,
                f"{100 * n / (total or len(sub)):.0f}%",
                _e(what),
                example,
            ]
            rows.append(cells)
    head = ([by] if by else []) + ["outcome", "rollouts", "share", "meaning", "first example"]
    off = 1 if by else 0
    return _table(head, rows, numeric={1 + off, 2 + off})


def _examples(obj: Run | Eval, df: pd.DataFrame, limit: int = 6) -> str:
    """One collapsed trace per failure kind (a person without Jupyter can read a rollout here)."""
    parts = []
    for kind in [k for k in KIND_ORDER if k in set(df["failure"])][:limit]:
        rid = df[df["failure"] == kind].iloc[0]["id"]
        try:
            body = obj.trace(rid).to_html()
        except (KeyError, ValueError) as exc:
            body = f"<p>{_e(exc)}</p>"
        parts.append(
            f"<details{' open' if not parts else ''}><summary><b>{_e(KIND_LABELS[kind])}</b>: "
            f"<code>{_e(rid)}</code></summary>{body}</details>"
        )
    return "".join(parts) or '<p class="muted">no rollouts yet</p>'


def _figs_html(saved: list[str], empty: list[str], captions: dict[str, str]) -> str:
    imgs = "".join(
        f'<figure style="margin:0"><img src="plots/{n}.png" alt="{_e(captions.get(n, n))}">'
        f'<figcaption class="muted">{_e(captions.get(n, ""))}</figcaption></figure>'
        for n in saved
    )
    note = (
        f'<p class="muted">nothing to plot yet for: {"; ".join(captions.get(n, n) for n in empty)}</p>'
        if empty
        else ""
    )
    return f'<div class="figs">{imgs}</div>{note}'


def _page(title: str, body: str) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M")
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{_e(title)}</title><style>{_CSS}</style>'
        f'</head><body>{body}<p class="muted" style="margin-top:24px">written by <code>sesa report</code> '
        f"at {stamp}; the plots are in <code>plots/</code>.</p></body></html>"
    )


def _run_page(run: Run, saved: list[str], empty: list[str]) -> str:
    cfg, m, summary = run.config, run.metrics(), run.summary or {}
    solver, prop = run.rollouts("solver"), run.rollouts("proposer")
    planned = (cfg.get("train") or {}).get("steps")
    steps = run.steps()
    pending = run.pending_steps()
    state = ("finished", "#1a7f37") if run.finished else ("in progress", "#bf8700")
    mem = (cfg.get("memory") or {}).get("mode", "?")
    mean = lambda col: fmt_num(pd.to_numeric(m[col], errors="coerce").mean()) if len(m) else "–"
    groups = solver_groups(run)
    frontier = f"{100 * ((groups['p'] > 0) & (groups['p'] < 1)).mean():.0f}%" if len(groups) else "–"
    bank = pd.to_numeric(m["bank_size"], errors="coerce") if len(m) else pd.Series(dtype=float)
    guided_failed = select_guided_failed(solver)
    tiles = [
        ("steps committed" + (f" of {planned}" if planned else ""), str(len(steps))),
        (
            "valid-proposal rate",
            fmt_num(pd.to_numeric(m["valid_rate"], errors="coerce").mean() * 100, "{:.0f}%")
            if len(m)
            else "–",
        ),
        ("proposer reward (mean)", mean("proposer_reward_mean")),
        ("solver reward (mean)", mean("solver_reward_mean")),
        ("frontier groups (0<p<1)", frontier),
        ("solver rollouts correct", f"{int(solver['correct'].map(truthy).sum())} / {len(solver)}"),
        (
            "skill bank size",
            f"{fmt_num(bank.iloc[0], '{:.0f}')} → {fmt_num(bank.iloc[-1], '{:.0f}')}" if len(bank) else "–",
        ),
        ("guided but failed", str(len(guided_failed))),
    ]
    if summary.get("wall_s"):
        tiles.append(("wall time", f"{summary['wall_s'] / 60:.1f} min"))
    sp, pp = cfg.get("solver_policy") or {}, cfg.get("proposer_policy") or {}
    sc, se = cfg.get("solver") or {}, cfg.get("search") or {}
    setup = (
        f"solver <code>{_e(sp.get('model'))}</code> ({_e(sp.get('backend'))}), proposer <code>"
        f"{_e(pp.get('model'))}</code>; search {_e(se.get('backend'))} over {_e(se.get('corpus'))} (k={_e(se.get('k'))}); "
        f"group size {_e(sc.get('group_size'))}, at most {_e(sc.get('max_turns'))} turns; memory mode "
        f"<b>{_e(mem)}</b>; judge {_e((cfg.get('judge') or {}).get('kind'))}"
    )
    body = [
        f'<h1>Run {_e(run.name)} <span class="pill" style="background:{state[1]}">{state[0]}</span></h1>',
        f'<div class="muted">{_e(run.path.resolve())}</div><p>{setup}</p>',
    ]
    if pending:
        which = (
            f"step {pending[0]} has" if len(pending) == 1 else f"steps {', '.join(map(str, pending))} have"
        )
        body.append(
            f'<div class="note">{which} trajectories but no metrics line yet (not committed); left out '
            "below.</div>"
        )
    body += [f'<div class="note">{_e(n)}</div>' for n in report_notes(run)]
    if not steps:
        body.append(
            '<div class="note">no step is committed yet: the plots and tables fill in as the run goes.</div>'
        )
    body.append(_tiles(tiles))
    caps = {
        "learning_curve": "probe-set EM of the solver as served at each probed step, bank off and on "
        "(train.probe_every)",
        "rewards": "mean reward per step of both policies",
        "proposals": "proposals per step; groups the solver got from the reuse pool instead",
        "frontier": "solver groups per step: the proposer is rewarded for the frontier (0 < p < 1)",
        "success_hist": "distribution of the solver group success rate",
        "outcomes": "how solver rollouts ended (failure taxonomy)",
        "bank": "skill-bank size and consolidations",
        "hops": "proposer questions by hop count",
        "hops_success": "solver success by hop count",
        "invalid_reasons": "why proposals were invalid",
        "skills": "most retrieved skills: helpful vs hurt",
    }
    body += ["<h2>Plots</h2>", _figs_html(saved, empty, caps)]
    n_guided = int(solver["skill_ids"].map(len).gt(0).sum()) if len(solver) else 0
    body += [
        "<h2>How solver rollouts ended</h2>",
        _taxonomy(solver),
        (
            f'<p class="muted">guided but failed (skills in the prompt, not correct): {len(guided_failed)} of '
            f"{n_guided} guided rollouts.</p>"
        ),
    ]
    sk = run.skills()
    if len(sk) and sk["retrieved"].sum() > 0:
        used = sk[sk["retrieved"] > 0]
        rows = lambda d: [
            [
                f"<code>{_e(r.id)}</code>",
                _e(r.category),
                r.retrieved,
                r.helpful,
                r.hurt,
                r.score,
                _e(str(r.description)[:140]),
            ]
            for r in d.itertuples()
        ]
        head = ["skill", "category", "retrieved", "helpful", "hurt", "helpful - hurt", "description"]
        # a skill is listed as helpful only if it helped more than it hurt, and as harmful only if the reverse
        helped = used[used["score"] > 0].sort_values(["score", "retrieved"], ascending=False).head(5)
        harmed = used[used["score"] < 0].sort_values(["score", "retrieved"], ascending=[True, False]).head(5)
        body += ["<h2>Skills</h2>"]
        for title, part, none in (
            ("most helpful", helped, "no retrieved skill has helped more often than it hurt"),
            ("most harmful", harmed, "no retrieved skill has hurt more often than it helped"),
        ):
            body.append(f"<p><b>{title}</b></p>")
            body.append(
                _table(head, rows(part), {2, 3, 4, 5}) if len(part) else f'<p class="muted">{none}</p>'
            )
    hist = run.bank_history()
    if len(hist) > 1:
        body += [
            "<h2>Bank versions</h2>",
            _table(
                ["version", "step", "skills", "admitted", "evicted", "rejected", "error"],
                [
                    [r.version, r.step, r.n_skills, r.admitted, r.evicted, r.rejected, _e(r.error or "")]
                    for r in hist.itertuples()
                ],
                {0, 1, 2, 3, 4, 5},
            ),
        ]
    if len(m):
        rows = []
        for r in m.tail(12).to_dict("records"):
            c = (
                (
                    f"v{int(r['consolidation_version'])}: +{int(r['consolidation_admitted'])} "
                    f"−{int(r['consolidation_evicted'])}"
                )
                if pd.notna(r.get("consolidation_version"))
                else ""
            )
            rows.append(
                [
                    r["step"],
                    f"{r.get('valid_proposals', 0)}/{r.get('items', 0)}",
                    r.get("reused_groups", 0),
                    fmt_num(r.get("proposer_reward_mean")),
                    fmt_num(r.get("solver_reward_mean")),
                    _e(", ".join(f"{k} {v}" for k, v in (r.get("solver_status") or {}).items())),
                    r.get("bank_size", ""),
                    _e(c),
                    fmt_num(r.get("seconds"), "{:.0f}"),
                ]
            )
        body += [
            f"<h2>Last {len(rows)} steps</h2>",
            _table(
                [
                    "step",
                    "valid",
                    "reused",
                    "R proposer",
                    "R solver",
                    "solver status",
                    "bank",
                    "consolidation",
                    "s",
                ],
                rows,
                {0, 2, 3, 4, 6, 8},
            ),
        ]
    body += ["<h2>Example rollouts (one per outcome; click to open)</h2>", _examples(run, solver)]
    if len(prop):
        body.append(_examples_proposer(run, prop))
    return _page(f"run {run.name}", "".join(body))


def select_guided_failed(df: pd.DataFrame) -> pd.DataFrame:
    """Solver rollouts that had skills in the prompt and still did not answer correctly."""
    if df.empty:
        return df
    return df[df["skill_ids"].map(len).gt(0) & ~df["correct"].map(truthy).astype(bool)]


def _examples_proposer(run: Run, prop: pd.DataFrame) -> str:
    v = prop[prop["valid"].map(truthy)]
    inv = prop[~prop["valid"].map(truthy)]
    parts = []
    for label, d in (("valid proposal", v), ("invalid proposal", inv)):
        if len(d):
            rid = d.iloc[0]["id"]
            parts.append(
                f"<details><summary><b>{label}</b>: <code>{_e(rid)}</code></summary>"
                f"{run.trace(rid).to_html()}</details>"
            )
    return "".join(parts)


def _eval_page(ev: Eval, saved: list[str], empty: list[str]) -> str:
    df, rep, st = ev.records(), ev.report or {}, ev.settings
    state = ("complete", "#1a7f37") if ev.finished else ("incomplete", "#bf8700")
    policy = (st.get("policy") or {}).get("model") or rep.get("model")
    bank = rep.get("bank") or {}
    body = [
        f'<h1>Eval {_e(ev.name)} <span class="pill" style="background:{state[1]}">{state[0]}</span></h1>',
        f'<div class="muted">{_e(ev.path.resolve())}</div>',
        f"<p>model <code>{_e(policy)}</code>; bank modes {_e(', '.join(st.get('bank_modes') or rep.get('modes') or []))}"
        + (
            f"; bank <code>{_e(bank.get('path'))}</code> v{_e(bank.get('version'))} ({_e(bank.get('n_skills'))} skills)"
            if bank
            else ""
        )
        + f"; judge {_e(rep.get('judge') or (st.get('judge') or {}).get('kind'))}; "
        f"{len(df)} records</p>",
    ]
    body += [f'<div class="note">{_e(n)}</div>' for n in report_notes(ev)]
    if rep.get("aborted"):
        body.append(f'<div class="note">stopped: {_e(rep["aborted"])}</div>')
    t = ev.off_on()
    if len(t):
        modes = [c for c in t.columns if c not in ("dataset", "on - off") and not c.startswith("n_")]
        rows = [
            [_e(r["dataset"])]
            + [f"{fmt_num(r[m], '{:.1f}')} ({r[f'n_{m}']})" for m in modes]
            + ([fmt_num(r["on - off"], "{:+.1f}")] if "on - off" in t.columns else [])
            for r in t.to_dict("records")
        ]
        body += [
            "<h2>Judge score (%) per dataset</h2>",
            _table(
                ["dataset"] + modes + (["on - off"] if "on - off" in t.columns else []),
                rows,
                set(range(1, len(modes) + 2)),
            ),
        ]
    body.append(eval_tables_html(rep))
    caps = {"scores": "score per dataset and bank mode", "outcomes": "how rollouts ended, per bank mode"}
    body += [
        "<h2>Plots</h2>",
        _figs_html(saved, empty, caps),
        "<h2>How rollouts ended</h2>",
        _taxonomy(df, by="mode"),
    ]
    if "on" in set(df["mode"]):
        fx = ev.skill_effects()
        if len(fx):
            body += [
                "<h2>Skills in mode on (paired with mode off on the same question)</h2>",
                _table(
                    ["skill", "fired", "on correct", "paired", "helped", "hurt", "net", "datasets"],
                    [
                        [
                            f"<code>{_e(r.skill_id)}</code>",
                            r.fired,
                            r.on_correct,
                            r.paired,
                            r.helped,
                            r.hurt,
                            r.net,
                            _e(r.datasets),
                        ]
                        for r in fx.head(10).itertuples()
                    ],
                    {1, 2, 3, 4, 5, 6},
                ),
            ]
    body += ["<h2>Example rollouts (one per outcome; click to open)</h2>", _examples(ev, df)]
    return _page(f"eval {ev.name}", "".join(body))


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


def write_report(path: str | Path) -> Path:
    """Write ``plots/*.png`` and ``report.html`` into a run or eval directory; return the HTML path."""
    obj = open_dir(path)
    figures = RUN_FIGURES if isinstance(obj, Run) else EVAL_FIGURES
    saved, empty = _save_figures(figures, obj, obj.path / "plots")
    page = _run_page(obj, saved, empty) if isinstance(obj, Run) else _eval_page(obj, saved, empty)
    out = obj.path / "report.html"
    tmp = out.with_name(".report.html.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    return out
