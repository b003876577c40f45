"""The ablation's table (benchmarks/experiment.py): each arm's EM per seed, the A/A spread, and every paired
difference with its two-level interval, exact McNemar p per seed and mde.

Arms are lists of eval directories, one per training seed (the base: one). Nothing is averaged before
the statistics: ``sesa_eval.resample`` resamples the seeds, then the questions (or their clusters), and
gives a t-interval with the seed spread pooled over the trained arms.
The probe's headline row leaves out the layout-bound forms (probe v2's ``layout``), which get their own
row; hops and seen/unseen forms are slices of the headline.
"""

from __future__ import annotations

from pathlib import Path

MODE = {"base": "off", "ssp": "off", "nobank": "off", "sesa": "on"}
ARMS = tuple(MODE)
UNTRAINED = ("base",)  # no training seed: its one eval adds no seed-to-seed spread
# (B, A): what B - A isolates
COMPARISONS = {
    ("sesa", "nobank"): "the bank alone (same frontier reward)",
    ("nobank", "ssp"): "the proposer reward alone (both without a bank)",
    ("sesa", "ssp"): "bank + reward together",
    ("sesa", "base"): "SESA's training",
    ("nobank", "base"): "self-play without a bank",
    ("ssp", "base"): "SSP-style self-play",
}
BENCHMARKS = ("nq", "triviaqa", "popqa", "hotpotqa", "2wiki", "musique", "bamboogle")


def probe_meta(probe: str) -> tuple[dict[str, tuple[str, ...]], dict[str, int]]:
    """(question id -> the rows it is scored under, question id -> its cluster) for the probe set
    ``probe``: the headline (``probe``) unless its form is layout-bound (then ``<probe> layout``), and
    within the headline its hop count and whether the warm-up saw its form. Clusters: the file's, else
    questions linked by a shared article or answer."""
    from sesa_eval.datasets import PROBE_FILES
    from sesa_eval.resample import connected
    from sesa_graph.fsutil import read_jsonl
    from sesa_graph.scoring import normalize_answer

    rows = list(read_jsonl(PROBE_FILES[probe]))
    slices: dict[str, tuple[str, ...]] = {}
    for r in rows:
        if r.get("layout"):
            slices[str(r["id"])] = (f"{probe} layout",)
        else:
            seen = "seen" if r["seen_form"] else "unseen"
            slices[str(r["id"])] = (probe, f"{probe} {r['hops']}-hop", f"{probe} {seen} forms")
    if all("cluster" in r for r in rows):
        clusters = {str(r["id"]): int(r["cluster"]) for r in rows}
    else:
        keys = [
            [f"a:{t}" for t in r["articles"]] + [f"g:{normalize_answer(r['golden_answers'][0])}"]
            for r in rows
        ]
        clusters = {str(r["id"]): c for r, c in zip(rows, connected(keys))}
    return slices, clusters


def with_slices(records: list[dict], probe: str, slices: dict[str, tuple[str, ...]]) -> list[dict]:
    """``records`` with each probe record copied once per row it is scored under (its dataset renamed)."""
    out = [r for r in records if r.get("dataset") != probe]
    return out + [
        {**r, "dataset": s}
        for r in records
        if r.get("dataset") == probe
        for s in slices.get(str(r["id"]), ())
    ]


def _keep(records: list[dict], reach: dict) -> list[dict]:
    """Benchmark records of answerable questions only (the probe's answers are in the corpus by
    construction)."""
    from sesa_eval.answerability import answerable_keys

    ok = answerable_keys(reach)
    return [r for r in records if r.get("dataset") not in BENCHMARKS or f"{r['dataset']}/{r['id']}" in ok]


def rows_of(probe: str, datasets: list[str], slices: dict[str, tuple[str, ...]]) -> list[str]:
    names = {s for v in slices.values() for s in v}
    order = [probe, *sorted(n for n in names if n != probe and not n.endswith("layout")), f"{probe} layout"]
    return [n for n in order if n in names] + [d for d in datasets if d != probe]


def table(evals: dict[str, list[Path]], datasets: list[str], probe: str = "probe-v2") -> dict:
    """Per row: EM per arm per seed, A/A (seed 1 - seed 0 of each trained arm) and the comparisons."""
    from sesa_eval.answerability import read_answerability
    from sesa_eval.paired import read_records
    from sesa_eval.resample import em_per_replicate, per_run_tests, pooled_seed_t, replicates, two_level

    slices, clusters = probe_meta(probe)
    reach = {k: v for d in evals["base"] for k, v in read_answerability(d).items()}
    runs = {
        arm: [_keep(with_slices(read_records(d) or [], probe, slices), reach) for d in dirs]
        for arm, dirs in evals.items()
        if dirs
    }
    out: dict = {"rows": rows_of(probe, datasets, slices), "em": {}, "aa": {}, "pairs": {}, "probe": probe}
    for ds in out["rows"]:
        cl = clusters if ds.startswith(probe) else None
        reps = {arm: replicates(rs, MODE[arm], "em", ds) for arm, rs in runs.items()}
        out["em"][ds] = {
            arm: {"seeds": em_per_replicate(r), "n": len(r[0]) if r else 0} for arm, r in reps.items() if r
        }
        out["aa"][ds] = {
            arm: {**(two_level(r[:1], r[1:2], cl) or {}), "tests": per_run_tests(r[:1], r[1:2])}
            for arm, r in reps.items()
            if len(r) >= 2
        }
        seeds = {arm: cell["seeds"] for arm, cell in out["em"][ds].items()}
        out["pairs"][ds] = {
            f"{b} - {a}": {
                "questions": two_level(reps[a], reps[b]),
                "clusters": two_level(reps[a], reps[b], cl) if cl else None,
                "tests": per_run_tests(reps[a], reps[b]),
                "seeds_t": pooled_seed_t(seeds, a, b, fixed=UNTRAINED),
            }
            for (b, a) in COMPARISONS
            if reps.get(a) and reps.get(b)
        }
    return out


def controls(evals: list[Path], modes: tuple[str, ...], datasets: list[str]) -> dict:
    """SESA's solver in each mode per dataset: EM (mean over seeds) and n."""
    from sesa_eval.paired import per_question, read_records

    recs = [r for d in evals for r in (read_records(d) or [])]
    return {
        m: {ds: (100.0 * sum(v.values()) / len(v), len(v)) for ds, v in em.items() if v and ds in datasets}
        for m in modes
        if (em := per_question(recs, m, "em"))
    }
