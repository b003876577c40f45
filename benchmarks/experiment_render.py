"""Markdown of the ablation's table (benchmarks/experiment_table.py): EM per seed, A/A, the comparisons."""

from __future__ import annotations

from experiment_table import ARMS, BENCHMARKS, COMPARISONS

from sesa_eval.mcnemar import fmt_p

CONTROL_NAMES = {
    "closed": "floor: no search",
    "off": "search, no skills",
    "on": "search + its bank",
    "oracle": "ceiling: the answer-bearing document first",
}


def _label(ds: str) -> str:
    return f"{ds} (answerable)" if ds in BENCHMARKS else ds


def _seeds(cell: dict | None) -> str:
    if not cell or not cell["seeds"]:
        return "-"
    xs = cell["seeds"]
    mean = sum(xs) / len(xs)
    per = " / ".join(f"{x:.1f}" for x in xs)
    return f"{mean:.1f} ({per}; n={cell['n']})" if len(xs) > 1 else f"{mean:.1f} (n={cell['n']})"


def _interval(p: dict | None) -> str:
    return "-" if not p else f"[{p['lo']:+.1f}, {p['hi']:+.1f}]"


def _seed_t(p: dict | None) -> str:
    """``[-27.0, +3.6] (sd 4.8, df 3)``; ``-`` without a seed spread to pool."""
    return "-" if not p else f"{_interval(p)} (sd {p['sd']:.1f}, df {p['df']})"


def _tests(tests: list[dict]) -> tuple[str, str]:
    """(``19:4 p 0.0026`` per seed, the exact mde per seed)."""
    if not tests:
        return "-", "-"
    ps = ", ".join(f"{t['b']}:{t['c']} p {fmt_p(t['p'])}" for t in tests)
    mdes = " / ".join("none" if t["mde"] is None else f"{t['mde']:.1f}" for t in tests)
    return ps, mdes


def render(t: dict, header: str, controls: dict | None = None) -> str:
    lines = [header, "", "### EM per arm (mean over seeds, then each seed; n questions)", ""]
    arms = [a for a in ARMS if any(a in t["em"][ds] for ds in t["rows"])]
    lines += ["| row | " + " | ".join(arms) + " |", "|---" * (len(arms) + 1) + "|"]
    for ds in t["rows"]:
        lines.append(f"| {_label(ds)} | " + " | ".join(_seeds(t["em"][ds].get(a)) for a in arms) + " |")
    lines += [
        "",
        "### A/A: seed 1 - seed 0 of the same arm (run-to-run spread)",
        "",
        "| row | arm | s1 - s0 | 95% (questions) | discordant s1:s0, exact McNemar p |",
        "|---|---|---|---|---|",
    ]
    for ds in t["rows"]:
        for arm, aa in t["aa"][ds].items():
            if "delta" in aa:
                lines.append(
                    f"| {_label(ds)} | {arm} | {aa['delta']:+.1f} | {_interval(aa)} | {_tests(aa['tests'])[0]} |"
                )
    lines += [
        "",
        (
            "### Paired differences (points): two-level bootstrap 95% (seeds, then questions | clusters), "
            "seed-level t 95% (seed sd pooled over the trained arms), exact McNemar per seed pairing (B:A "
            "discordant), exact-test mde per seed pairing"
        ),
        "",
        "| row | B - A | isolates | delta | 95% questions | 95% clusters | 95% seeds (t) | McNemar | mde |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for ds in t["rows"]:
        for (b, a), what in COMPARISONS.items():
            p = t["pairs"][ds].get(f"{b} - {a}")
            if not p or not p["questions"]:
                continue
            ps, mdes = _tests(p["tests"])
            lines.append(
                f"| {_label(ds)} | {b} - {a} | {what} | {p['questions']['delta']:+.1f} | "
                f"{_interval(p['questions'])} | {_interval(p['clusters'])} | {_seed_t(p.get('seeds_t'))} | "
                f"{ps} | {mdes} |"
            )
    if controls and len(controls) > 1:
        modes = list(controls)
        lines += [
            "",
            "Controls, SESA's solver: " + ", ".join(f"{m} ({CONTROL_NAMES[m]})" for m in modes),
            "",
            "| dataset | " + " | ".join(modes) + " |",
            "|---" * (len(modes) + 1) + "|",
        ]
        for ds in sorted({d for m in modes for d in controls[m]}):
            cells = ["-" if (c := controls[m].get(ds)) is None else f"{c[0]:.1f} (n={c[1]})" for m in modes]
            lines.append(f"| {_label(ds)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
