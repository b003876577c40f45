"""Plots of a run or an eval (matplotlib, no display needed) and a one-page HTML summary of it.

The ``fig_*`` functions take a :class:`sesa_graph.runs.Run` or :class:`~sesa_graph.runs.Eval` and return a
matplotlib ``Figure`` (None when there is nothing to plot yet); the notebooks show the same figures.
:func:`write_report` saves them as PNG under ``<dir>/plots/`` and writes ``<dir>/report.html``, which a
person opens in a browser::

    sesa report runs/tiny-cpu        # or evals/NAME
"""

from __future__ import annotations

import html
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from sesa_graph.runs import FAILURE_KINDS, Eval, Run, missing, open_dir, truthy

KIND_ORDER = ("correct", "wrong_gold_retrieved", "wrong_gold_not_retrieved", "wrong_retrieval_unknown",
              "max_turns", "malformed", "search_error", "error")
KIND_COLOURS = {"correct": "#2da44e", "wrong_gold_retrieved": "#fb8f44", "wrong_gold_not_retrieved": "#bc4c00",
                "wrong_retrieval_unknown": "#d4a72c", "max_turns": "#8250df", "malformed": "#cf222e",
                "search_error": "#6e7781", "error": "#24292f"}
KIND_LABELS = {"correct": "correct", "wrong_gold_retrieved": "wrong, gold retrieved",
               "wrong_gold_not_retrieved": "wrong, gold never retrieved",
               "wrong_retrieval_unknown": "wrong (docs not recorded)", "max_turns": "max turns", "malformed": "malformed", "search_error": "search error", "error": "error"}
MODE_COLOURS = {"off": "#8c959f", "on": "#0969da", "placebo": "#d4a72c"}
PROPOSER, SOLVER = "#8250df", "#0969da"

_RC = {"axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3,
       "font.size": 9, "axes.titlesize": 10, "axes.titleweight": "bold", "legend.fontsize": 8,
       "legend.frameon": False, "figure.dpi": 100}


@contextmanager
def _style() -> Iterator[None]:
    import matplotlib

    with matplotlib.rc_context(_RC):
        yield


def _figure(ncols: int = 1, width: float = 5.6, height: float = 3.0) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, ncols)
    return fig, axes


def _int_x(ax: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


# ---- run figures -----------------------------------------------------------------------------------------


def fig_rewards(run: Run) -> Any:
    """Mean reward per step of both policies (a rolling mean over 10 steps once there are more than 20)."""
    m = run.metrics()
    if m.empty:
        return None
    with _style():
        fig, ax = _figure()
        for col, label, c in (("proposer_reward_mean", "proposer", PROPOSER), ("solver_reward_mean", "solver", SOLVER)):
            y = pd.to_numeric(m[col], errors="coerce")
            if len(m) > 20:
                ax.plot(m["step"], y, color=c, alpha=0.25, lw=1)
                ax.plot(m["step"], y.rolling(10, min_periods=1).mean(), color=c, lw=2, label=f"{label} (10-step mean)")
            else:
                ax.plot(m["step"], y, "o-", color=c, label=label)
        ax.axhline(0, color="#57606a", lw=0.8)
        ax.set(title="Mean reward per step", xlabel="step", ylabel="reward")
        _int_x(ax)
        ax.legend()
    return fig


def fig_proposals(run: Run) -> Any:
    """Proposals per step, valid vs invalid, and the solver groups filled from the reuse pool instead."""
    m = run.metrics()
    if m.empty:
        return None
    valid = pd.to_numeric(m["valid_proposals"], errors="coerce").fillna(0)
    invalid = pd.to_numeric(m["items"], errors="coerce").fillna(0) - valid
    with _style():
        fig, ax = _figure()
        ax.bar(m["step"], valid, color="#2da44e", label="valid")
        ax.bar(m["step"], invalid, bottom=valid, color="#cf222e", alpha=0.75, label="invalid")
        reused = pd.to_numeric(m["reused_groups"], errors="coerce").fillna(0)
        if reused.sum():
            ax.plot(m["step"][reused > 0], reused[reused > 0], "D", color="#24292f", ms=5,
                    label="solver groups from the reuse pool")
        rate = pd.to_numeric(m["valid_rate"], errors="coerce").mean()
        ax.set(title=f"Proposals per step (valid rate {_num(rate * 100, '{:.0f}')}% overall)", xlabel="step",
               ylabel="proposals")
        _int_x(ax)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def fig_invalid_reasons(run: Run) -> Any:
    """Why proposals were invalid, over all committed steps."""
    m = run.metrics()
    reasons: Counter[str] = Counter()
    for d in m["invalid_reasons"] if len(m) else []:
        reasons.update(d or {})
    if not reasons:
        return None
    names, counts = zip(*reasons.most_common(10))
    with _style():
        fig, ax = _figure(height=0.32 * len(names) + 1.3)
        ax.barh(range(len(names))[::-1], counts, color="#cf222e", alpha=0.75)
        ax.set_yticks(range(len(names))[::-1], [n.replace("_", " ") for n in names])
        ax.set(title="Why proposals were invalid (all steps)", xlabel="proposals")
    return fig


def _groups(run: Run) -> pd.DataFrame:
    """One row per solver group (step, group_id): its success rate p and whether it was reused."""
    df = run.rollouts("solver")
    if df.empty:
        return pd.DataFrame(columns=["step", "group_id", "p", "reused", "hops"])
    return df.groupby(["step", "group_id"], sort=True).agg(
        p=("correct", lambda c: sum(map(truthy, c)) / len(c)), reused=("reused", "first"),
        hops=("hops", "first")).reset_index()


_P_CLASSES = (("p = 0 (too hard)", "#cf222e", lambda p: p == 0),
              ("0 < p < 1 (frontier)", "#2da44e", lambda p: (p > 0) & (p < 1)),
              ("p = 1 (too easy)", "#0969da", lambda p: p == 1))


def fig_frontier(run: Run) -> Any:
    """Solver groups per step by success rate p: unsolved (p=0), frontier (0<p<1), solved (p=1)."""
    g = _groups(run)
    if g.empty:
        return None
    steps = sorted(g["step"].unique())
    with _style():
        fig, ax = _figure()
        bottom = pd.Series(0, index=steps, dtype=float)
        for label, c, test in _P_CLASSES:
            n = g[test(g["p"])].groupby("step").size().reindex(steps, fill_value=0)
            ax.bar(steps, n, bottom=bottom, color=c, label=label)
            bottom += n
        share = ((g["p"] > 0) & (g["p"] < 1)).mean()
        ax.set(title=f"Solver groups by success rate (frontier {share:.0%})", xlabel="step", ylabel="groups")
        _int_x(ax)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def fig_success_hist(run: Run) -> Any:
    """Distribution of the solver group success rate p over all committed steps."""
    g = _groups(run)
    if g.empty:
        return None
    with _style():
        fig, ax = _figure()
        ax.hist(g["p"], bins=[i / 10 - 0.05 for i in range(12)], color=SOLVER, rwidth=0.85)
        reused = int(g["reused"].map(truthy).sum())
        ax.set(title=f"Group success rate p ({len(g)} groups, {reused} from the reuse pool)",
               xlabel="success rate p", ylabel="groups", xlim=(-0.08, 1.08))
    return fig


def _kind_bars(ax: Any, table: pd.DataFrame, horizontal: bool = False) -> None:
    """Stacked bars of failure kinds; ``table``: index = x, columns = kinds (counts)."""
    bottom = pd.Series(0.0, index=table.index)
    x = [str(i) for i in table.index] if horizontal else list(table.index)
    for k in [k for k in KIND_ORDER if k in table.columns]:
        vals = table[k].astype(float)
        if horizontal:
            ax.barh(x, vals, left=bottom, color=KIND_COLOURS[k], label=KIND_LABELS[k])
        else:
            ax.bar(x, vals, bottom=bottom, color=KIND_COLOURS[k], label=KIND_LABELS[k])
        bottom += vals


def fig_outcomes(run: Run) -> Any:
    """How solver rollouts ended, per step: correct, wrong (gold retrieved or not), max turns, malformed..."""
    df = run.rollouts("solver")
    if df.empty:
        return None
    t = pd.crosstab(df["step"], df["failure"])
    with _style():
        fig, ax = _figure()
        _kind_bars(ax, t)
        ax.set(title="How solver rollouts ended, per step", xlabel="step", ylabel="rollouts")
        _int_x(ax)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def fig_bank(run: Run) -> Any:
    """Skill-bank size per step, and skills admitted / evicted at each consolidation."""
    m = run.metrics()
    if m.empty or pd.to_numeric(m["bank_size"], errors="coerce").fillna(0).sum() == 0:
        return None
    size = pd.to_numeric(m["bank_size"], errors="coerce")
    with _style():
        fig, ax = _figure()
        ax.plot(m["step"], size, "o-" if len(m) <= 40 else "-", color="#1f883d", label="skills in the bank")
        ax.set(title="Skill bank", xlabel="step", ylabel="skills", ylim=(0, max(10.0, size.max() * 1.15)))
        _int_x(ax)
        c = m[pd.to_numeric(m["consolidation_admitted"], errors="coerce").fillna(0)
              + pd.to_numeric(m["consolidation_evicted"], errors="coerce").fillna(0) > 0]
        if len(c):
            a2 = ax.twinx()
            w = 0.4
            a2.bar(c["step"] - w / 2, c["consolidation_admitted"], width=w, color="#2da44e", alpha=0.5, label="admitted")
            a2.bar(c["step"] + w / 2, c["consolidation_evicted"], width=w, color="#cf222e", alpha=0.5, label="evicted")
            a2.set_ylabel("skills per consolidation")
            top = max(c["consolidation_admitted"].max(), c["consolidation_evicted"].max())
            a2.set_ylim(0, top * 2.5)  # keep the bars in the lower part, under the size line
            a2.grid(False)
            a2.spines["right"].set_visible(True)
            h1, l1 = ax.get_legend_handles_labels()
            h2, l2 = a2.get_legend_handles_labels()
            ax.legend(h1 + h2, l1 + l2, loc="lower right")
        else:
            ax.legend(loc="lower right", title="no consolidation committed yet")
    return fig


def fig_hops(run: Run) -> Any:
    """The proposer's questions by the hop count it was asked for, valid / invalid."""
    p = run.rollouts("proposer")
    if p.empty:
        return None
    p = p.assign(valid=p["valid"].map(truthy), hops=pd.to_numeric(p["hops"], errors="coerce").fillna(0).astype(int))
    hops = sorted(p["hops"].unique())
    valid = p[p["valid"]].groupby("hops").size().reindex(hops, fill_value=0)
    invalid = p[~p["valid"]].groupby("hops").size().reindex(hops, fill_value=0)
    with _style():
        fig, ax = _figure()
        ax.bar(hops, valid, color="#2da44e", label="valid")
        ax.bar(hops, invalid, bottom=valid, color="#cf222e", alpha=0.75, label="invalid")
        ax.set(title="Proposed questions by hop count", xlabel="hops asked for", ylabel="questions")
        ax.set_xticks(hops)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def fig_hops_success(run: Run) -> Any:
    """The solver's share of correct rollouts by the question's hop count."""
    s = run.rollouts("solver")
    if s.empty:
        return None
    s = s.assign(hops=pd.to_numeric(s["hops"], errors="coerce").fillna(0).astype(int),
                 ok=s["correct"].map(truthy).astype(float))
    by = s.groupby("hops")["ok"].agg(["mean", "size"])
    with _style():
        fig, ax = _figure()
        ax.bar(by.index, by["mean"], color=SOLVER, width=0.6)
        for h, row in by.iterrows():
            ax.text(h, row["mean"] + 0.02, f"{row['mean']:.0%} of {int(row['size'])}", ha="center", fontsize=8)
        ax.set(title="Solver success by hop count", xlabel="hops", ylabel="share correct", ylim=(0, 1.1))
        ax.set_xticks(list(by.index))
    return fig


def fig_skills(run: Run, top: int = 12) -> Any:
    """The most retrieved skills with their helpful / hurt counters."""
    sk = run.skills()
    if sk.empty or pd.to_numeric(sk["retrieved"]).sum() == 0:
        return None
    sk = sk[sk["retrieved"] > 0].sort_values(["retrieved", "score"], ascending=False).head(top)[::-1]
    with _style():
        fig, ax = _figure(height=0.3 * len(sk) + 1.3)
        y = range(len(sk))
        ax.barh(y, sk["helpful"], color="#2da44e", label="helpful (right)")
        ax.barh(y, -sk["hurt"], color="#cf222e", label="hurt (wrong answer)")
        ax.set_yticks(list(y), [f"{i} ({n}x)" for i, n in zip(sk["id"], sk["retrieved"])])
        ax.axvline(0, color="#57606a", lw=0.8)
        ax.set(title="Most retrieved skills (Nx = times retrieved)", xlabel="hurt  ←  rollouts  →  helpful")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2)
    return fig


RUN_FIGURES: dict[str, Callable[[Run], Any]] = {
    "rewards": fig_rewards, "proposals": fig_proposals, "frontier": fig_frontier,
    "success_hist": fig_success_hist, "outcomes": fig_outcomes, "bank": fig_bank, "hops": fig_hops,
    "hops_success": fig_hops_success, "invalid_reasons": fig_invalid_reasons, "skills": fig_skills,
}


# ---- eval figures ----------------------------------------------------------------------------------------


def fig_eval_scores(ev: Eval, metric: str = "score") -> Any:
    """Mean score (%) per dataset for each bank mode, side by side."""
    t = ev.off_on(metric)
    modes = [c for c in t.columns if c not in ("dataset", "on - off") and not c.startswith("n_")]
    if t.empty or not modes:
        return None
    with _style():
        fig, ax = _figure(width=max(6.4, 1.1 * len(t) + 2))
        w = 0.8 / len(modes)
        for i, m in enumerate(modes):
            x = [j + (i - (len(modes) - 1) / 2) * w for j in range(len(t))]
            vals = pd.to_numeric(t[m], errors="coerce")
            ax.bar(x, vals.fillna(0), width=w, color=MODE_COLOURS.get(m, "#57606a"), label=f"{m} ({metric})")
            for xi, v, n in zip(x, vals, t[f"n_{m}"]):
                if not missing(v):
                    ax.text(xi, v + 0.5, f"{v:.0f}\nn={n}", ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(t)), list(t["dataset"]))
        top = pd.to_numeric(t[modes].stack(), errors="coerce").max()
        ax.set(title=f"Eval {ev.name}: {metric} per dataset and bank mode", ylabel=f"{metric} (%)",
               ylim=(0, max(10.0, (0 if missing(top) else top) * 1.3)))
        ax.legend()
    return fig


def fig_eval_outcomes(ev: Eval) -> Any:
    """How rollouts ended per bank mode (failure taxonomy, share of records)."""
    df = ev.records()
    if df.empty:
        return None
    t = pd.crosstab(df["mode"].fillna("?"), df["failure"])
    t = t.div(t.sum(axis=1), axis=0)
    with _style():
        fig, ax = _figure(height=0.45 * len(t) + 1.4)
        _kind_bars(ax, t, horizontal=True)
        ax.set(title="How rollouts ended, per bank mode", xlabel="share of records", xlim=(0, 1))
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


EVAL_FIGURES: dict[str, Callable[[Eval], Any]] = {"scores": fig_eval_scores, "outcomes": fig_eval_outcomes}


# ---- the HTML page ---------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,sans-serif;font-size:14px;color:#24292f;max-width:1240px;margin:18px auto;
padding:0 16px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:16px;border-bottom:1px solid #d0d7de;padding-bottom:3px;margin-top:22px}
.pill{display:inline-block;border-radius:10px;padding:1px 9px;font-size:12px;font-weight:600;color:#fff}
.tiles{display:flex;flex-wrap:wrap;gap:8px;margin:10px 0}
.tile{border:1px solid #d0d7de;border-radius:6px;padding:6px 12px;min-width:120px}
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


def _num(x: Any, fmt: str = "{:.2f}") -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "–"
    return "–" if missing(v) else fmt.format(v)


def _table(head: list[str], rows: list[list[Any]], numeric: set[int] | None = None) -> str:
    numeric = numeric or set()
    h = "".join(f"<th>{_e(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>"
                                    for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{h}</tr>{body}</table>"


def _tiles(items: list[tuple[str, str]]) -> str:
    return '<div class="tiles">' + "".join(f'<div class="tile"><b>{_e(v)}</b><span>{_e(k)}</span></div>'
                                           for k, v in items) + "</div>"


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
            what = FAILURE_KINDS.get(kind, "") if kind != "correct" else "answered correctly"
            final = ex["final"] if isinstance(ex["final"], str) else "(none)"
            example = (f"<code>{_e(ex['id'])}</code><br>Q: {_e(str(ex['question'])[:160])}<br>"
                       f"A: {_e(final)} · gold: {_e(' | '.join(ex['golds']))}")
            label = f'<span style="color:{KIND_COLOURS[kind]}">■</span> {_e(KIND_LABELS[kind])}'
            cells = ([_e(key)] if by else []) + [label, n, f"{100 * n / (total or len(sub)):.0f}%", _e(what), example]
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
        parts.append(f"<details{' open' if not parts else ''}><summary><b>{_e(KIND_LABELS[kind])}</b>: "
                     f"<code>{_e(rid)}</code></summary>{body}</details>")
    return "".join(parts) or '<p class="muted">no rollouts yet</p>'


def _figs_html(saved: list[str], empty: list[str], captions: dict[str, str]) -> str:
    imgs = "".join(f'<figure style="margin:0"><img src="plots/{n}.png" alt="{_e(captions.get(n, n))}">'
                   f'<figcaption class="muted">{_e(captions.get(n, ""))}</figcaption></figure>' for n in saved)
    note = (f'<p class="muted">nothing to plot yet: {", ".join(empty)}</p>') if empty else ""
    return f'<div class="figs">{imgs}</div>{note}'


def _page(title: str, body: str) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M")
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>{_e(title)}</title><style>{_CSS}</style>'
            f'</head><body>{body}<p class="muted" style="margin-top:24px">written by <code>sesa report</code> '
            f"at {stamp}; the plots are in <code>plots/</code>.</p></body></html>")


def _run_page(run: Run, saved: list[str], empty: list[str]) -> str:
    cfg, m, summary = run.config, run.metrics(), run.summary or {}
    solver, prop = run.rollouts("solver"), run.rollouts("proposer")
    planned = (cfg.get("train") or {}).get("steps")
    steps = run.steps()
    pending = run.pending_steps()
    state = ("finished", "#1a7f37") if run.finished else ("in progress", "#bf8700")
    mem = (cfg.get("memory") or {}).get("mode", "?")
    mean = lambda col: _num(pd.to_numeric(m[col], errors="coerce").mean()) if len(m) else "–"
    groups = _groups(run)
    frontier = f"{100 * ((groups['p'] > 0) & (groups['p'] < 1)).mean():.0f}%" if len(groups) else "–"
    bank = pd.to_numeric(m["bank_size"], errors="coerce") if len(m) else pd.Series(dtype=float)
    guided_failed = select_guided_failed(solver)
    tiles = [("steps committed" + (f" of {planned}" if planned else ""), str(len(steps))),
             ("valid-proposal rate", _num(pd.to_numeric(m["valid_rate"], errors="coerce").mean() * 100, "{:.0f}%")
              if len(m) else "–"), ("proposer reward (mean)", mean("proposer_reward_mean")),
             ("solver reward (mean)", mean("solver_reward_mean")), ("frontier groups (0<p<1)", frontier),
             ("solver rollouts correct", f"{int(solver['correct'].map(truthy).sum())} / {len(solver)}"),
             ("skill bank size", f"{_num(bank.iloc[0], '{:.0f}')} → {_num(bank.iloc[-1], '{:.0f}')}" if len(bank) else "–"),
             ("guided but failed", str(len(guided_failed)))]
    if summary.get("wall_s"):
        tiles.append(("wall time", f"{summary['wall_s'] / 60:.1f} min"))
    sp, pp = cfg.get("solver_policy") or {}, cfg.get("proposer_policy") or {}
    sc, se = cfg.get("solver") or {}, cfg.get("search") or {}
    setup = (f"solver <code>{_e(sp.get('model'))}</code> ({_e(sp.get('backend'))}), proposer <code>"
             f"{_e(pp.get('model'))}</code>; search {_e(se.get('backend'))} over {_e(se.get('corpus'))} (k={_e(se.get('k'))}); "
             f"group size {_e(sc.get('group_size'))}, at most {_e(sc.get('max_turns'))} turns; memory mode "
             f"<b>{_e(mem)}</b>; judge {_e((cfg.get('judge') or {}).get('kind'))}")
    body = [f'<h1>Run {_e(run.name)} <span class="pill" style="background:{state[1]}">{state[0]}</span></h1>',
            f'<div class="muted">{_e(run.path.resolve())}</div><p>{setup}</p>']
    if pending:
        body.append(f'<div class="note">steps {", ".join(map(str, pending))} have trajectories but are not committed '
                    "yet; they are left out below.</div>")
    if not steps:
        body.append('<div class="note">no step is committed yet: the plots and tables fill in as the run goes.</div>')
    body.append(_tiles(tiles))
    caps = {"rewards": "mean reward per step of both policies",
            "proposals": "proposals per step; groups the solver got from the reuse pool instead",
            "frontier": "solver groups per step: the proposer is rewarded for the frontier (0 < p < 1)",
            "success_hist": "distribution of the solver group success rate",
            "outcomes": "how solver rollouts ended (failure taxonomy)", "bank": "skill-bank size and consolidations",
            "hops": "proposer questions by hop count", "hops_success": "solver success by hop count",
            "invalid_reasons": "why proposals were invalid", "skills": "most retrieved skills: helpful vs hurt"}
    body += ["<h2>Plots</h2>", _figs_html(saved, empty, caps)]
    n_guided = int(solver["skill_ids"].map(len).gt(0).sum()) if len(solver) else 0
    body += ["<h2>How solver rollouts ended</h2>", _taxonomy(solver),
             f'<p class="muted">guided but failed (skills in the prompt, not correct): {len(guided_failed)} of '
             f"{n_guided} guided rollouts.</p>"]
    sk = run.skills()
    if len(sk) and sk["retrieved"].sum() > 0:
        used = sk[sk["retrieved"] > 0]
        rows = lambda d: [[f"<code>{_e(r.id)}</code>", _e(r.category), r.retrieved, r.helpful, r.hurt, r.score,
                           _e(str(r.description)[:140])] for r in d.itertuples()]
        head = ["skill", "category", "retrieved", "helpful", "hurt", "helpful - hurt", "description"]
        body += ["<h2>Skills</h2><p><b>most helpful</b></p>",
                 _table(head, rows(used.sort_values(["score", "retrieved"], ascending=False).head(5)), {2, 3, 4, 5}),
                 "<p><b>most harmful</b></p>",
                 _table(head, rows(used.sort_values(["score", "retrieved"], ascending=[True, False]).head(5)), {2, 3, 4, 5})]
    hist = run.bank_history()
    if len(hist) > 1:
        body += ["<h2>Bank versions</h2>", _table(
            ["version", "step", "skills", "admitted", "evicted", "rejected", "error"],
            [[r.version, r.step, r.n_skills, r.admitted, r.evicted, r.rejected, _e(r.error or "")]
             for r in hist.itertuples()], {0, 1, 2, 3, 4, 5})]
    if len(m):
        rows = []
        for r in m.tail(12).to_dict("records"):
            c = (f"v{int(r['consolidation_version'])}: +{int(r['consolidation_admitted'])} "
                 f"−{int(r['consolidation_evicted'])}") if pd.notna(r.get("consolidation_version")) else ""
            rows.append([r["step"], f"{r.get('valid_proposals', 0)}/{r.get('items', 0)}", r.get("reused_groups", 0),
                         _num(r.get("proposer_reward_mean")), _num(r.get("solver_reward_mean")),
                         _e(", ".join(f"{k} {v}" for k, v in (r.get("solver_status") or {}).items())),
                         r.get("bank_size", ""), _e(c), _num(r.get("seconds"), "{:.0f}")])
        body += [f"<h2>Last {len(rows)} steps</h2>", _table(
            ["step", "valid", "reused", "R proposer", "R solver", "solver status", "bank", "consolidation", "s"],
            rows, {0, 2, 3, 4, 6, 8})]
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
            parts.append(f"<details><summary><b>{label}</b>: <code>{_e(rid)}</code></summary>"
                         f"{run.trace(rid).to_html()}</details>")
    return "".join(parts)


def _eval_page(ev: Eval, saved: list[str], empty: list[str]) -> str:
    df, rep, st = ev.records(), ev.report or {}, ev.settings
    state = ("complete", "#1a7f37") if ev.finished else ("incomplete", "#bf8700")
    policy = (st.get("policy") or {}).get("model") or rep.get("model")
    bank = rep.get("bank") or {}
    body = [f'<h1>Eval {_e(ev.name)} <span class="pill" style="background:{state[1]}">{state[0]}</span></h1>',
            f'<div class="muted">{_e(ev.path.resolve())}</div>',
            f"<p>model <code>{_e(policy)}</code>; bank modes {_e(', '.join(st.get('bank_modes') or rep.get('modes') or []))}"
            + (f"; bank <code>{_e(bank.get('path'))}</code> v{_e(bank.get('version'))} ({_e(bank.get('n_skills'))} skills)"
               if bank else "") + f"; judge {_e(rep.get('judge') or (st.get('judge') or {}).get('kind'))}; "
            f"{len(df)} records</p>"]
    if rep.get("aborted"):
        body.append(f'<div class="note">stopped: {_e(rep["aborted"])}</div>')
    t = ev.off_on()
    if len(t):
        modes = [c for c in t.columns if c not in ("dataset", "on - off") and not c.startswith("n_")]
        rows = [[_e(r["dataset"])] + [f"{_num(r[m], '{:.1f}')} ({r[f'n_{m}']})" for m in modes]
                + ([_num(r["on - off"], "{:+.1f}")] if "on - off" in t.columns else []) for r in t.to_dict("records")]
        body += ["<h2>Judge score (%) per dataset</h2>",
                 _table(["dataset"] + modes + (["on - off"] if "on - off" in t.columns else []), rows,
                        set(range(1, len(modes) + 2)))]
    caps = {"scores": "score per dataset and bank mode", "outcomes": "how rollouts ended, per bank mode"}
    body += ["<h2>Plots</h2>", _figs_html(saved, empty, caps), "<h2>How rollouts ended</h2>", _taxonomy(df, by="mode")]
    if "on" in set(df["mode"]):
        fx = ev.skill_effects()
        if len(fx):
            body += ["<h2>Skills in mode on (paired with mode off on the same question)</h2>", _table(
                ["skill", "fired", "on correct", "paired", "helped", "hurt", "net", "datasets"],
                [[f"<code>{_e(r.skill_id)}</code>", r.fired, r.on_correct, r.paired, r.helped, r.hurt, r.net,
                  _e(r.datasets)] for r in fx.head(10).itertuples()], {1, 2, 3, 4, 5, 6})]
    body += ["<h2>Example rollouts (one per outcome; click to open)</h2>", _examples(ev, df)]
    return _page(f"eval {ev.name}", "".join(body))


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
