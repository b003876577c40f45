"""The figures of a run or an eval (matplotlib ``Figure`` objects, made without pyplot, so they need no
display and are safe to make from any thread).

Each ``fig_*`` function takes a :class:`sesa_runs.load.Run` or :class:`~sesa_runs.load.Eval` and returns
a ``Figure``, or None when there is nothing to plot yet (an empty or just-started run). ``sesa report``
saves them as PNG (:mod:`sesa_runs.report`); the notebooks show the same figures::

    from sesa_runs import load, plots
    plots.fig_frontier(load.open_run("runs/tiny-cpu"))
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pandas as pd
from matplotlib.ticker import FuncFormatter, MaxNLocator

from sesa_graph import statuses
from sesa_runs.load import Eval, Run, missing, truthy

KIND_ORDER = statuses.KIND_ORDER
KIND_COLOURS = {
    "correct": "#2da44e",
    "wrong_gold_retrieved": "#fb8f44",
    "wrong_gold_not_retrieved": "#bc4c00",
    "wrong_retrieval_unknown": "#d4a72c",
    "max_turns": "#8250df",
    "max_tokens": "#c297ff",
    "malformed": "#cf222e",
    "search_error": "#6e7781",
    "error": "#24292f",
}
"""Colours keyed by the names of :data:`sesa_graph.statuses.OUTCOMES` (a kind without one is grey)."""
KIND_LABELS = {k: statuses.label(k) for k in KIND_ORDER}
MODE_COLOURS = {"off": "#8c959f", "on": "#0969da", "placebo": "#d4a72c"}
PROPOSER, SOLVER = "#8250df", "#0969da"

_RC = {
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "legend.fontsize": 8,
    "legend.frameon": False,
    "figure.dpi": 100,
}


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


def fmt_num(x: Any, fmt: str = "{:.2f}") -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "–"
    return "–" if missing(v) else fmt.format(v)


def _int_x(ax: Any) -> None:
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _counts(axis: Any) -> None:
    """Whole-number ticks on an axis that counts things (matplotlib would put 0.5 rollouts there)."""
    axis.set_major_locator(MaxNLocator(integer=True))


# ---- run figures -----------------------------------------------------------------------------------------


def fig_rewards(run: Run) -> Any:
    """Mean reward per step of both policies (a rolling mean over 10 steps once there are more than 20)."""
    m = run.metrics()
    if m.empty:
        return None
    with _style():
        fig, ax = _figure()
        for col, label, c in (
            ("proposer_reward_mean", "proposer", PROPOSER),
            ("solver_reward_mean", "solver", SOLVER),
        ):
            y = pd.to_numeric(m[col], errors="coerce")
            if len(m) > 20:
                ax.plot(m["step"], y, color=c, alpha=0.25, lw=1)
                ax.plot(
                    m["step"],
                    y.rolling(10, min_periods=1).mean(),
                    color=c,
                    lw=2,
                    label=f"{label} (10-step mean)",
                )
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
            ax.plot(
                m["step"][reused > 0],
                reused[reused > 0],
                "D",
                color="#24292f",
                ms=5,
                label="solver groups from the reuse pool",
            )
        rate = pd.to_numeric(m["valid_rate"], errors="coerce").mean()
        ax.set(
            title=f"Proposals per step (valid rate {fmt_num(rate * 100, '{:.0f}')}% overall)",
            xlabel="step",
            ylabel="proposals",
        )
        _int_x(ax)
        _counts(ax.yaxis)
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
        _counts(ax.xaxis)
    return fig


def solver_groups(run: Run) -> pd.DataFrame:
    """One row per solver group (step, group_id): its success rate p, whether it was reused, and whether it
    was in the trainer's batch (groups run beyond the batch are kept, unselected)."""
    df = run.rollouts("solver")
    if df.empty:
        return pd.DataFrame(columns=["step", "group_id", "p", "reused", "hops", "selected"])
    if "selected" not in df:
        df = df.assign(selected=True)
    return (
        df.groupby(["step", "group_id"], sort=True)
        .agg(
            p=("correct", lambda c: sum(map(truthy, c)) / len(c)),
            reused=("reused", "first"),
            hops=("hops", "first"),
            selected=("selected", lambda s: bool(any(map(truthy, s)))),
        )
        .reset_index()
    )


_P_CLASSES = (
    ("p = 0 (too hard)", "#cf222e", lambda p: p == 0),
    ("0 < p < 1 (frontier)", "#2da44e", lambda p: (p > 0) & (p < 1)),
    ("p = 1 (too easy)", "#0969da", lambda p: p == 1),
)


def fig_frontier(run: Run) -> Any:
    """Solver groups per step by success rate p: unsolved (p=0), frontier (0<p<1), solved (p=1)."""
    g = solver_groups(run)
    if g.empty:
        return None
    steps = sorted(g["step"].unique())
    with _style():
        fig, ax = _figure()
        bottom = pd.Series(0, index=steps, dtype=float)
        for label, c, test in _P_CLASSES:
            n = g[test(g["p"])].groupby("step").size().reindex(steps, fill_value=0)
            ax.bar(steps, n, bottom=bottom, color=c, label=label)
            bottom = bottom + n  # a new Series: matplotlib may keep the array it was given
        frontier = (g["p"] > 0) & (g["p"] < 1)
        if not g["selected"].all():  # some groups were run beyond the batch (resampling): show what trained
            n = g[frontier & g["selected"]].groupby("step").size().reindex(steps, fill_value=0)
            ax.plot(steps, n, "D", color="#24292f", ms=5, label="frontier groups in the trainer's batch")
        ax.set(
            title=f"Solver groups by success rate (frontier {frontier.mean():.0%})",
            xlabel="step",
            ylabel="groups",
        )
        _int_x(ax)
        _counts(ax.yaxis)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def fig_success_hist(run: Run) -> Any:
    """Distribution of the solver group success rate p over all committed steps."""
    g = solver_groups(run)
    if g.empty:
        return None
    with _style():
        fig, ax = _figure()
        ax.hist(g["p"], bins=[i / 10 - 0.05 for i in range(12)], color=SOLVER, rwidth=0.85)
        reused = int(g["reused"].map(truthy).sum())
        ax.set(
            title=f"Group success rate p ({len(g)} groups, {reused} from the reuse pool)",
            xlabel="success rate p",
            ylabel="groups",
            xlim=(-0.08, 1.08),
        )
        _counts(ax.yaxis)
    return fig


def _kind_bars(ax: Any, table: pd.DataFrame, horizontal: bool = False) -> None:
    """Stacked bars of failure kinds; ``table``: index = x, columns = kinds (counts)."""
    bottom = pd.Series(0.0, index=table.index)
    x = [str(i) for i in table.index] if horizontal else list(table.index)
    for k in [k for k in KIND_ORDER if k in table.columns]:
        vals = table[k].astype(float)
        if horizontal:
            ax.barh(x, vals, left=bottom, color=KIND_COLOURS.get(k, "#8c959f"), label=KIND_LABELS[k])
        else:
            ax.bar(x, vals, bottom=bottom, color=KIND_COLOURS.get(k, "#8c959f"), label=KIND_LABELS[k])
        bottom = bottom + vals  # a new Series: matplotlib may keep the array it was given


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
        _counts(ax.yaxis)
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
        _counts(ax.yaxis)
        # every committed consolidation, also one that admitted and evicted nothing (a step line says +0)
        c = m[pd.to_numeric(m["consolidation_version"], errors="coerce").notna()]
        if len(c):
            a2 = ax.twinx()
            w = 0.4
            a2.bar(
                c["step"] - w / 2,
                c["consolidation_admitted"],
                width=w,
                color="#2da44e",
                alpha=0.5,
                label="admitted",
            )
            a2.bar(
                c["step"] + w / 2,
                c["consolidation_evicted"],
                width=w,
                color="#cf222e",
                alpha=0.5,
                label="evicted",
            )
            a2.set_ylabel("skills per consolidation")
            top = max(c["consolidation_admitted"].max(), c["consolidation_evicted"].max(), 1)
            a2.set_ylim(0, top * 2.5)  # keep the bars in the lower part, under the size line
            a2.yaxis.set_major_locator(MaxNLocator(integer=True))
            a2.grid(False)
            a2.spines["right"].set_visible(True)
            h1, l1 = ax.get_legend_handles_labels()
            h2, l2 = a2.get_legend_handles_labels()
            # under the axes: inside, it covered the bars of the last consolidations
            ax.legend(
                h1 + h2,
                l1 + l2,
                loc="upper center",
                bbox_to_anchor=(0.5, -0.2),
                ncol=3,
                title=f"{len(c)} consolidation(s) committed",
            )
        else:
            ax.legend(loc="lower right", title="no consolidation committed yet")
    return fig


def fig_hops(run: Run) -> Any:
    """The proposer's questions by the hop count it was asked for, valid / invalid."""
    p = run.rollouts("proposer")
    if p.empty:
        return None
    p = p.assign(
        valid=p["valid"].map(truthy), hops=pd.to_numeric(p["hops"], errors="coerce").fillna(0).astype(int)
    )
    hops = sorted(p["hops"].unique())
    valid = p[p["valid"]].groupby("hops").size().reindex(hops, fill_value=0)
    invalid = p[~p["valid"]].groupby("hops").size().reindex(hops, fill_value=0)
    with _style():
        fig, ax = _figure()
        ax.bar(hops, valid, color="#2da44e", label="valid")
        ax.bar(hops, invalid, bottom=valid, color="#cf222e", alpha=0.75, label="invalid")
        ax.set(title="Proposed questions by hop count", xlabel="hops asked for", ylabel="questions")
        ax.set_xticks(hops)
        _counts(ax.yaxis)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def fig_hops_success(run: Run) -> Any:
    """The solver's share of correct rollouts by the question's hop count."""
    s = run.rollouts("solver")
    if s.empty:
        return None
    s = s.assign(
        hops=pd.to_numeric(s["hops"], errors="coerce").fillna(0).astype(int),
        ok=s["correct"].map(truthy).astype(float),
    )
    by = s.groupby("hops")["ok"].agg(["mean", "size"])
    with _style():
        fig, ax = _figure()
        ax.bar(by.index, by["mean"], color=SOLVER, width=0.6)
        for h, row in by.iterrows():
            ax.text(
                h, row["mean"] + 0.02, f"{row['mean']:.0%} of {int(row['size'])}", ha="center", fontsize=8
            )
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
        _counts(ax.xaxis)
        # hurt counts are drawn leftwards but are counts all the same: label them without a minus sign
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{abs(v):g}"))
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2)
    return fig


def fig_learning_curve(run: Run) -> Any:
    """Probe-set EM of the served solver per probed step, bank off and on, each point with its n."""
    from sesa_runs.probe import probe_curve

    c = probe_curve(run)
    if c.empty:
        return None
    with _style():
        fig, ax = _figure()
        for mode, g in c.groupby("mode", sort=False):
            ax.plot(g["step"], g["em"], "o-", color=MODE_COLOURS.get(mode), label=f"bank {mode}")
            for x, y, n in zip(g["step"], g["em"], g["n"]):
                ax.annotate(
                    f"n={n}", (x, y), textcoords="offset points", xytext=(0, 5), fontsize=7, ha="center"
                )
        ax.set(title="Learning curve: probe-set EM", xlabel="step", ylabel="EM (%)")
        ax.set_ylim(0, max(10.0, float(c["em"].max()) * 1.25))
        last = max(int(c["step"].max()), int((run.config.get("train") or {}).get("steps") or 1) - 1)
        ax.set_xlim(-0.5, last + 0.5)  # the whole run, so a run in progress shows how far the curve got
        _int_x(ax)
        ax.legend()
    return fig


RUN_FIGURES: dict[str, Callable[[Run], Any]] = {
    "learning_curve": fig_learning_curve,
    "rewards": fig_rewards,
    "proposals": fig_proposals,
    "frontier": fig_frontier,
    "success_hist": fig_success_hist,
    "outcomes": fig_outcomes,
    "bank": fig_bank,
    "hops": fig_hops,
    "hops_success": fig_hops_success,
    "invalid_reasons": fig_invalid_reasons,
    "skills": fig_skills,
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
        ax.set(
            title=f"Eval {ev.name}: {metric} per dataset and bank mode",
            ylabel=f"{metric} (%)",
            ylim=(0, max(10.0, (0 if missing(top) else top) * 1.3)),
        )
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
