"""The run page of ``sesa report`` (:func:`run_page`): status and set-up, headline tiles, the plots, how solver
rollouts ended, the most helpful and harmful skills, the bank versions, the last steps and example rollouts."""

from __future__ import annotations

import pandas as pd

from sesa_runs.load import Run, truthy
from sesa_runs.plots import fmt_num, solver_groups
from sesa_runs.report_html import esc, examples, figs_html, page, report_notes, table, taxonomy, tiles

RUN_CAPTIONS = {
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


def run_page(run: Run, saved: list[str], empty: list[str]) -> str:
    """The whole page of a run: ``saved``/``empty`` are the plots written and the ones with nothing to show."""
    solver, prop = run.rollouts("solver"), run.rollouts("proposer")
    guided_failed = select_guided_failed(solver)
    body = run_header(run) + [tiles(run_tiles(run, solver, guided_failed))]
    body += ["<h2>Plots</h2>", figs_html(saved, empty, RUN_CAPTIONS)]
    n_guided = int(solver["skill_ids"].map(len).gt(0).sum()) if len(solver) else 0
    body += [
        "<h2>How solver rollouts ended</h2>",
        taxonomy(solver),
        (
            f'<p class="muted">guided but failed (skills in the prompt, not correct): {len(guided_failed)} of '
            f"{n_guided} guided rollouts.</p>"
        ),
    ]
    body += skills_section(run) + bank_versions_section(run) + last_steps_section(run.metrics())
    body += ["<h2>Example rollouts (one per outcome; click to open)</h2>", examples(run, solver)]
    if len(prop):
        body.append(examples_proposer(run, prop))
    return page(f"run {run.name}", "".join(body))


def run_header(run: Run) -> list[str]:
    """Name, state and set-up of the run, then the notes: steps not committed yet, files it lacks, no step."""
    cfg = run.config
    state = ("finished", "#1a7f37") if run.finished else ("in progress", "#bf8700")
    mem = (cfg.get("memory") or {}).get("mode", "?")
    sp, pp = cfg.get("solver_policy") or {}, cfg.get("proposer_policy") or {}
    sc, se = cfg.get("solver") or {}, cfg.get("search") or {}
    setup = (
        f"solver <code>{esc(sp.get('model'))}</code> ({esc(sp.get('backend'))}), proposer <code>"
        f"{esc(pp.get('model'))}</code>; search {esc(se.get('backend'))} over {esc(se.get('corpus'))} (k={esc(se.get('k'))}); "
        f"group size {esc(sc.get('group_size'))}, at most {esc(sc.get('max_turns'))} turns; memory mode "
        f"<b>{esc(mem)}</b>; judge {esc((cfg.get('judge') or {}).get('kind'))}"
    )
    body = [
        f'<h1>Run {esc(run.name)} <span class="pill" style="background:{state[1]}">{state[0]}</span></h1>',
        f'<div class="muted">{esc(run.path.resolve())}</div><p>{setup}</p>',
    ]
    pending = run.pending_steps()
    if pending:
        which = (
            f"step {pending[0]} has" if len(pending) == 1 else f"steps {', '.join(map(str, pending))} have"
        )
        body.append(
            f'<div class="note">{which} trajectories but no metrics line yet (not committed); left out '
            "below.</div>"
        )
    body += [f'<div class="note">{esc(n)}</div>' for n in report_notes(run)]
    if not run.steps():
        body.append(
            '<div class="note">no step is committed yet: the plots and tables fill in as the run goes.</div>'
        )
    return body


def run_tiles(run: Run, solver: pd.DataFrame, guided_failed: pd.DataFrame) -> list[tuple[str, str]]:
    """The headline numbers: steps, valid proposals, rewards, frontier groups, correct rollouts, bank size."""
    cfg, m, summary = run.config, run.metrics(), run.summary or {}
    planned = (cfg.get("train") or {}).get("steps")
    mean = lambda col: fmt_num(pd.to_numeric(m[col], errors="coerce").mean()) if len(m) else "–"
    groups = solver_groups(run)
    frontier = f"{100 * ((groups['p'] > 0) & (groups['p'] < 1)).mean():.0f}%" if len(groups) else "–"
    bank = pd.to_numeric(m["bank_size"], errors="coerce") if len(m) else pd.Series(dtype=float)
    out = [
        ("steps committed" + (f" of {planned}" if planned else ""), str(len(run.steps()))),
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
        ("correct by exact match / by the model judge", judge_share(solver)),
        (
            "skill bank size",
            f"{fmt_num(bank.iloc[0], '{:.0f}')} → {fmt_num(bank.iloc[-1], '{:.0f}')}" if len(bank) else "–",
        ),
        ("guided but failed", str(len(guided_failed))),
    ]
    if summary.get("wall_s"):
        out.append(("wall time", f"{summary['wall_s'] / 60:.1f} min"))
    return out


def judge_share(solver: pd.DataFrame) -> str:
    """How many correct solver rewards exact match gave and how many the model judge gave ('llm'): a reader
    sees at once when a model judge carries the reward."""
    if not len(solver):
        return "–"
    methods = solver.loc[solver["correct"].map(truthy), "judge_method"].value_counts()
    return f"{int(methods.get('exact', 0))} / {int(methods.get('llm', 0))}"


def skills_section(run: Run) -> list[str]:
    """The most helpful and most harmful retrieved skills (none when no skill was retrieved yet)."""
    out: list[str] = []
    sk = run.skills()
    if len(sk) and sk["retrieved"].sum() > 0:
        used = sk[sk["retrieved"] > 0]
        rows = lambda d: [
            [
                f"<code>{esc(r.id)}</code>",
                esc(r.category),
                r.retrieved,
                r.helpful,
                r.hurt,
                r.score,
                esc(str(r.description)[:140]),
            ]
            for r in d.itertuples()
        ]
        head = ["skill", "category", "retrieved", "helpful", "hurt", "helpful - hurt", "description"]
        # a skill is listed as helpful only if it helped more than it hurt, and as harmful only if the reverse
        helped = used[used["score"] > 0].sort_values(["score", "retrieved"], ascending=False).head(5)
        harmed = used[used["score"] < 0].sort_values(["score", "retrieved"], ascending=[True, False]).head(5)
        out += ["<h2>Skills</h2>"]
        for title, part, none in (
            ("most helpful", helped, "no retrieved skill has helped more often than it hurt"),
            ("most harmful", harmed, "no retrieved skill has hurt more often than it helped"),
        ):
            out.append(f"<p><b>{title}</b></p>")
            out.append(table(head, rows(part), {2, 3, 4, 5}) if len(part) else f'<p class="muted">{none}</p>')
    return out


def bank_versions_section(run: Run) -> list[str]:
    """Every bank version with what its consolidation admitted, evicted and rejected."""
    out: list[str] = []
    hist = run.bank_history()
    if len(hist) > 1:
        out += [
            "<h2>Bank versions</h2>",
            table(
                ["version", "step", "skills", "admitted", "evicted", "rejected", "error"],
                [
                    [r.version, r.step, r.n_skills, r.admitted, r.evicted, r.rejected, esc(r.error or "")]
                    for r in hist.itertuples()
                ],
                {0, 1, 2, 3, 4, 5},
            ),
        ]
    return out


def last_steps_section(m: pd.DataFrame) -> list[str]:
    """The last twelve committed steps, one row each."""
    out: list[str] = []
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
                    esc(", ".join(f"{k} {v}" for k, v in (r.get("solver_status") or {}).items())),
                    r.get("bank_size", ""),
                    esc(c),
                    fmt_num(r.get("seconds"), "{:.0f}"),
                ]
            )
        out += [
            f"<h2>Last {len(rows)} steps</h2>",
            table(
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
    return out


def select_guided_failed(df: pd.DataFrame) -> pd.DataFrame:
    """Solver rollouts that had skills in the prompt and still did not answer correctly."""
    if df.empty:
        return df
    return df[df["skill_ids"].map(len).gt(0) & ~df["correct"].map(truthy).astype(bool)]


def examples_proposer(run: Run, prop: pd.DataFrame) -> str:
    v = prop[prop["valid"].map(truthy)]
    inv = prop[~prop["valid"].map(truthy)]
    parts = []
    for label, d in (("valid proposal", v), ("invalid proposal", inv)):
        if len(d):
            rid = d.iloc[0]["id"]
            parts.append(
                f"<details><summary><b>{label}</b>: <code>{esc(rid)}</code></summary>"
                f"{run.trace(rid).to_html()}</details>"
            )
    return "".join(parts)
