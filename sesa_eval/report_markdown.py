"""report.md of an eval (:func:`render_markdown`): its set-up, the metric tables, the comparison with mode
off, answerability, diagnostics, data hygiene and timing, from the report :mod:`sesa_eval.report` builds;
:func:`write_report` writes it and report.json."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sesa_eval.report import (
    METRIC_TITLES,
    METRICS,
    answerability_rows,
    diagnostic_rows,
    metric_table,
    vs_off_table,
)
from sesa_graph.fsutil import write_json_atomic, write_text_atomic


def write_report(out_dir: Path, report: Mapping[str, Any]) -> None:
    write_json_atomic(Path(out_dir) / "report.json", report)
    write_text_atomic(Path(out_dir) / "report.md", render_markdown(report))


def render_markdown(report: Mapping[str, Any]) -> str:
    """report.md: settings, the three metric tables, diagnostics, data hygiene, timing, status."""
    judge = report["judge"]
    judge_note = (
        "exact match only (--judge none): equal to EM"
        if judge == "none"
        else f"exact match, else the LLM judge ({judge})"
    ) + (f" -- {report['judge_fallback']}" if report.get("judge_fallback") else "")
    lines = _settings_lines(report, judge_note)
    if not report.get("complete"):
        lines += [
            f"**INCOMPLETE: {report['done']} of {report['planned']} rollouts done"
            + (f"; stopped: {report['aborted']}" if report.get("aborted") else "")
            + ". Rerun the same command to resume.**",
            "",
        ]
    for metric in METRICS:
        title = METRIC_TITLES[metric] + (f" ({judge_note})" if metric == "judge" else "")
        lines += [f"## {title}", "", md_table(metric_table(report, metric)), ""]
    lines += _vs_off_lines(report) + _answerability_lines(report)
    lines += ["## Diagnostics", "", md_table(diagnostic_rows(report)), ""]
    lines += hygiene_lines(report.get("hygiene"))
    lines += _timing_lines(report)
    return "\n".join(lines)


def _settings_lines(report: Mapping[str, Any], judge_note: str) -> list[str]:
    """The eval's set-up: model, search, decoding, judge, bank, datasets, and how to read the tables."""
    bank = report.get("bank")
    return [
        f"# Eval `{report['name']}`",
        "",
        f"- model: `{report['model']}`" + (f" at {report['endpoint']}" if report.get("endpoint") else ""),
        f"- search: {report['search']['backend']} over `{report['search']['corpus']}`, k={report['search']['k']}",
        f"- decoding: {report['decoding']}, at most {report['max_turns']} turns",
        f"- judge: {judge_note}",
        f"- bank: `{bank['path']}` version {bank['version']}, {bank['n_skills']} skills"
        if bank
        else "- bank: none",
        f"- datasets: {', '.join(report['datasets'])}"
        + (f" (first {report['limit']} each)" if report.get("limit") else "")
        + (
            "; rollouts on the answerable questions only (--subset answerable)"
            if report.get("subset") == "answerable"
            else ""
        ),
        "",
        "Scores are percentages; `(n)` is the number of questions behind each cell; rows `MODE, answerable` "
        "hold the questions a search can answer (see Answerability; their Mean is over the datasets that "
        "have any)"
        + (" (`n×seeds` with seeds; ± is the std over seeds)" if "seed" in report["decoding"] else "")
        + ". Mean = unweighted mean of the dataset columns.",
        "",
    ]


def _vs_off_lines(report: Mapping[str, Any]) -> list[str]:
    """The paired comparison of each mode with mode off, when there is one."""
    out: list[str] = []
    if any(report.get("vs_off", {}).get("judge", {}).values()):
        out += [
            "## Against mode off",
            "",
            (
                "Paired over the questions both modes answered: the mean difference in points, its "
                "bootstrap 95% interval, `mde` = the smallest difference this n could detect (two-sided "
                "alpha 0.05, 80% power, from the observed discordant-pair rate) and `(n)` pairs. An interval "
                "that holds 0 means no effect of `mde` or more when `mde` is small, and that the eval "
                "cannot see when it is large."
            ),
            "",
            md_table(vs_off_table(report)),
            "",
        ]
    return out


def _answerability_lines(report: Mapping[str, Any]) -> list[str]:
    """How many questions a search can answer, per dataset."""
    out: list[str] = []
    if report.get("answerability"):
        out += [
            "## Answerability",
            "",
            (
                f"Whether a gold answer appears in the top-{report.get('search_k')} documents (as the solver "
                "sees them) for the question itself (reach_question) or for the question followed by a gold "
                "answer (reach_oracle); answerable = either. `% (n)`. Mode oracle runs only questions with "
                "an answer-bearing document; the others are counted under 'oracle not run'."
            ),
            "",
            md_table(answerability_rows(report)),
            "",
        ]
    return out


def hygiene_lines(h: Mapping[str, Any] | None) -> list[str]:
    """The data-hygiene section: questions found in training or bank text, and what was not checked."""
    if not h:
        return []
    verdict = "clean" if h["clean"] else "**EVAL QUESTIONS FOUND in training/bank text**"
    lines = [
        "## Data hygiene",
        "",
        (
            f"{h['questions']} eval questions checked: {verdict}. A hit is a question "
            "found as an exact substring, or as whole words after normalization."
        ),
        "",
    ]
    for s in h["sections"]:
        lines.append(
            f"- {s['source']}: {s['texts']} texts; {s['exact']} exact, {s['normalized']} normalized hits"
        )
        for hit in s["hits"][:5]:
            lines.append(
                f"  - {hit['dataset']}/{hit['id']} ({hit['match']}, in {hit['source']}): {hit['question']}"
            )
    for s in h["not_checked"]:
        lines.append(f"- not checked: {s}")
    return lines + [""]


def _timing_lines(report: Mapping[str, Any]) -> list[str]:
    """What this invocation computed, re-judged and took from cache, and how long it took."""
    out: list[str] = []
    t = report.get("timing") or {}
    if t:
        out += [
            "## Timing",
            "",
            (
                f"- this invocation: {t.get('computed', 0)} rollouts computed, {t.get('rejudged', 0)} re-judged, "
                f"{t.get('cached', 0)} from cache"
                + (
                    f", {t['stale_rerun']} cached ones run again because the bank now gives their questions "
                    "other skills"
                    if t.get("stale_rerun")
                    else ""
                )
            ),
            f"- setup {t.get('setup_s')} s, rollouts {t.get('run_s')} s"
            + (
                f", {t['rollouts_per_minute']} rollouts/minute = {t['questions_per_minute']} questions/minute "
                "in every mode and seed"
                if t.get("rollouts_per_minute")
                else ""
            ),
            "",
        ]
    return out


def md_table(rows: Sequence[Sequence[str]]) -> str:
    head, *body = rows
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)
