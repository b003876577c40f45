"""The ablation as one command: the warm base, the SSP-style arm and SESA, same budget, N seeds, one table.

    .venv/bin/python benchmarks/experiment.py --steps 4 --seeds 2 [--data-dir ../shared/data/benchmarks]
                                              [--limit 50] [--controls] [--name exp] [--engine vllm|local]

For each seed: ``sesa train --name NAME-ssp-sS --bank off --proposer-reward 1-p --steps N --set seed=S`` (the
SSP-style arm) and ``sesa train --name NAME-sesa-sS --steps N --set seed=S`` (SESA), on the default config
otherwise; then ``sesa eval`` of each trained solver (SSP: bank off; SESA: its own bank, on; with
--controls also closed, off and oracle) and of the warm base (bank off): on the probe set (held out from
training, see docs/PROBE.md; every question) and, with --data-dir, the seven benchmarks (``--subset
answerable``: only the questions whose gold answer the search can reach get rollouts). Every piece
resumes: a finished run or eval is skipped, an interrupted run is continued with ``--resume``, an
interrupted eval from its record cache; re-running the command finishes what is missing and rewrites the
table.

The table (``evals/NAME-table.md`` and ``.json``): EM per dataset for each arm (the mean over seeds of each
question's EM), the probe set on all its questions and the benchmarks on their answerable subset (the base
eval's answerability, :mod:`sesa_eval.answerability`), and paired 95% intervals with the smallest
detectable difference (:func:`sesa_eval.paired.paired_intervals`): SSP - base, SESA - base, SESA - SSP;
with --controls, SESA's solver in the four modes side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ("nq", "triviaqa", "popqa", "hotpotqa", "2wiki", "musique", "bamboogle")
COMPARISONS = (("ssp", "base"), ("sesa", "base"), ("sesa", "ssp"))
ARM_FLAGS = {"ssp": ["--bank", "off", "--proposer-reward", "1-p"], "sesa": []}
CONTROL_MODES = ("closed", "off", "on", "oracle")
CONTROL_NAMES = {
    "closed": "floor: no search",
    "off": "search, no skills",
    "on": "search + its bank",
    "oracle": "ceiling: the answer-bearing document first",
}


def sesa(args: list[str], log: Path) -> None:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as out:
        out.write(f"\n$ sesa {' '.join(args)}\n")
        out.flush()
        rc = subprocess.call(
            [sys.executable, "-m", "sesa_cli.main", *args], cwd=ROOT, env=env, stdout=out, stderr=out
        )
    if rc != 0:
        sys.exit(
            f"`sesa {' '.join(args)}` failed with exit code {rc}; see {log}. Re-run this command to resume."
        )


def train(arm: str, seed: int, a: argparse.Namespace, log: Path) -> Path:
    run = a.runs_dir / f"{a.name}-{arm}-s{seed}"
    if (run / "summary.json").is_file():
        return run
    common = ["--runs-dir", str(a.runs_dir), *(["--engine", a.engine] if a.engine else [])]
    if (run / "config.yaml").is_file():
        # --steps too: a re-run with another budget extends (or, down to its committed steps, shortens) it
        sesa(["train", "--resume", str(run), "--steps", str(a.steps), *common[2:]], log)
    else:
        sesa(
            [
                "train",
                "--name",
                run.name,
                "--steps",
                str(a.steps),
                "--set",
                f"seed={seed}",
                *ARM_FLAGS[arm],
                *common,
            ],
            log,
        )
    return run


def evaluate(
    name: str, model: str, modes: list[str], bank: Path | None, a: argparse.Namespace, log: Path
) -> list[Path]:
    """The probe set on all its questions; with --data-dir, the benchmarks on their answerable subset
    (``--subset answerable``: on the embedded corpus about 3 in 4 benchmark questions have no gold answer
    in the search's reach, and their rollouts would only dilute the table)."""
    parts = [(f"{name}-probe", ["--datasets", "probe"])]
    if a.data_dir:
        parts.append(
            (
                f"{name}-bench",
                ["--data-dir", str(a.data_dir), "--datasets", ",".join(BENCHMARKS), "--subset", "answerable"]
                + (["--limit", str(a.limit)] if a.limit else []),
            )
        )
    out = []
    for part, data in parts:
        args = ["eval", "--name", part, "--out-root", str(a.evals_dir), "--model", model, *data]
        args += ["--bank-modes", ",".join(modes)] + (["--bank", str(bank)] if bank else [])
        args += ["--engine", a.engine] if a.engine else []
        sesa(args, log)
        out.append(a.evals_dir / part)
    return out


SLICES = ("probe 1-hop", "probe 2-hop", "probe 3-hop", "probe seen forms", "probe unseen forms")


def probe_slices() -> dict[str, tuple[str, ...]]:
    """Probe question id -> its slices: its hop count, and whether its form overlaps the warm-up's templates
    (docs/PROBE.md: seen-ness is confounded with hops, so compare within a hop)."""
    from sesa_eval.datasets import PROBE_FILE
    from sesa_graph.fsutil import read_jsonl

    return {
        str(r["id"]): (f"probe {r['hops']}-hop", f"probe {'seen' if r['seen_form'] else 'unseen'} forms")
        for r in read_jsonl(PROBE_FILE)
    }


def with_slices(records: list[dict], slices: dict[str, tuple[str, ...]]) -> list[dict]:
    """``records`` plus a copy of each probe record per slice, under the slice's name as its dataset."""
    return records + [
        {**r, "dataset": s}
        for r in records
        if r.get("dataset") == "probe"
        for s in slices.get(str(r["id"]), ())
    ]


def table(evals: dict[str, list[Path]], datasets: list[str]) -> dict:
    from sesa_eval.answerability import answerable_keys, read_answerability
    from sesa_eval.paired import paired_intervals, per_question, read_records

    slices = probe_slices()
    records = {
        arm: with_slices([r for d in dirs for r in (read_records(d) or [])], slices)
        for arm, dirs in evals.items()
    }
    mode = {"base": "off", "ssp": "off", "sesa": "on"}
    reach = {k: v for d in evals["base"] for k, v in read_answerability(d).items()}
    # the probe set's answers are in the corpus by construction; the benchmarks count where they can be reached
    probe_ids = per_question(records["base"], "off", "em").get("probe", {})
    keep = answerable_keys(reach) | {f"{ds}/{q}" for q in probe_ids for ds in ("probe", *slices.get(q, ()))}
    out: dict = {"em": {}, "n": {}, "pairs": {}}
    for arm, recs in records.items():
        em = per_question(recs, mode[arm], "em", keep)
        out["em"][arm] = {ds: 100.0 * sum(v.values()) / len(v) for ds, v in em.items() if v}
        out["n"][arm] = {ds: len(v) for ds, v in em.items()}
        if datasets and all(
            ds in out["em"][arm] for ds in datasets
        ):  # the unweighted mean, like the report's
            out["em"][arm]["mean"] = sum(out["em"][arm][ds] for ds in datasets) / len(datasets)
            out["n"][arm]["mean"] = sum(out["n"][arm][ds] for ds in datasets)
    parts = [s for s in SLICES if s in out["em"]["base"]]
    for b, a in COMPARISONS:
        out["pairs"][f"{b} - {a}"] = paired_intervals(
            records[a], records[b], mode[a], mode[b], "em", datasets, keep=keep
        )
        if parts:  # the slices' own pairs; their mean would count the probe twice
            whole = paired_intervals(records[a], records[b], mode[a], mode[b], "em", parts, keep=keep)
            out["pairs"][f"{b} - {a}"].update({s: whole[s] for s in parts if s in whole})
    out["slices"] = parts
    # the controls that bracket SESA's solver: floor, without and with its bank, ceiling (paired questions)
    out["controls"] = {
        m: {ds: (100.0 * sum(v.values()) / len(v), len(v)) for ds, v in em.items() if v}
        for m in CONTROL_MODES
        if (em := per_question(records["sesa"], m, "em", keep))
    }
    return out


def learning_curves(runs: dict[str, list[Path]], out: Path) -> Path | None:
    """One figure of every trained arm's learning curve (probe EM during training, bank off and on, per seed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sesa_runs.load import open_run
    from sesa_runs.probe import probe_curve

    curves = [
        (arm, run, c)
        for arm, paths in runs.items()
        for run in paths
        if not (c := probe_curve(open_run(run))).empty
    ]
    if not curves:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    for arm, run, c in curves:
        for mode, g in c.groupby("mode", sort=False):
            style = {"ssp": ":", "sesa": "-"}[arm] if mode == "on" else "--"
            ax.plot(
                g["step"], g["em"], style, marker="o", label=f"{run.name}, bank {mode} (n={g['n'].iloc[-1]})"
            )
    ax.set(title="Learning curves: probe-set EM during training", xlabel="step", ylabel="EM (%)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def render(t: dict, datasets: list[str], header: str) -> str:
    def cell(ds: str, arm: str) -> str:
        v = t["em"][arm].get(ds)
        return "-" if v is None else f"{v:.1f} (n={t['n'][arm][ds]})"

    def pair(ds: str, key: str) -> str:
        p = t["pairs"][key].get(ds)
        if p is None:
            return "-"
        mde = "none" if p["mde"] is None else f"{p['mde']:.1f}"
        return f"{p['delta']:+.1f} [{p['lo']:+.1f}, {p['hi']:+.1f}] mde {mde}"

    cols = ["base", "ssp", "sesa", *t["pairs"]]
    lines = [header, "", "| dataset | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for ds in [*datasets, *t.get("slices", ()), "mean"]:
        cells = [cell(ds, arm) for arm in ("base", "ssp", "sesa")] + [pair(ds, k) for k in t["pairs"]]
        lines.append(f"| {ds}{' (answerable)' if ds in BENCHMARKS else ''} | " + " | ".join(cells) + " |")
    if len(t.get("controls") or {}) > 1:  # SESA ran more than its own mode
        modes = list(t["controls"])
        lines += [
            "",
            "Controls, SESA's solver: " + ", ".join(f"{m} ({CONTROL_NAMES[m]})" for m in modes),
            "",
            "| dataset | " + " | ".join(modes) + " |",
            "|---" * (len(modes) + 1) + "|",
        ]
        for ds in datasets:
            cells = [
                "-" if (c := t["controls"][m].get(ds)) is None else f"{c[0]:.1f} (n={c[1]})" for m in modes
            ]
            lines.append(f"| {ds}{' (answerable)' if ds in BENCHMARKS else ''} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=4, help="Self-play steps of each trained arm (the budget).")
    ap.add_argument("--seeds", type=int, default=1, help="Seeds per trained arm.")
    ap.add_argument("--name", default="exp", help="Prefix of the runs and evals.")
    ap.add_argument(
        "--data-dir", type=Path, default=None, help="Benchmark JSONL directory (adds the seven benchmarks)."
    )
    ap.add_argument(
        "--limit",
        type=int,
        default=None,
        help="First N questions of each benchmark, of which the answerable ones run (default: all).",
    )
    ap.add_argument(
        "--controls",
        action="store_true",
        help="Evaluate SESA's solver in all four modes (closed-book floor, bank off, on, open-book ceiling), "
        "paired, and add the controls table (the SESA eval costs 4x).",
    )
    ap.add_argument(
        "--engine", choices=("vllm", "local"), default=None, help="Default: the config's backends."
    )
    ap.add_argument("--runs-dir", type=Path, default=ROOT / "runs")
    ap.add_argument("--evals-dir", type=Path, default=ROOT / "evals")
    a = ap.parse_args(argv)
    if a.steps < 1 or a.seeds < 1:
        ap.error(f"--steps and --seeds must be at least 1 (got {a.steps}, {a.seeds})")
    a.datasets = ["probe", *(BENCHMARKS if a.data_dir else ())]
    log = a.evals_dir / f"{a.name}-log.txt"
    t0 = time.monotonic()
    runs: dict[str, list[Path]] = {"ssp": [], "sesa": []}
    evals = {
        "base": evaluate(f"{a.name}-base", "embedded-warm", ["off"], None, a, log),
        "ssp": [],
        "sesa": [],
    }
    for seed in range(a.seeds):
        for arm in ("ssp", "sesa"):
            run = train(arm, seed, a, log)
            runs[arm].append(run)
            bank = run / "bank" if arm == "sesa" else None
            modes = (list(CONTROL_MODES) if a.controls else ["on"]) if arm == "sesa" else ["off"]
            solver = str(run / "policies" / "solver")
            evals[arm] += evaluate(f"{a.name}-{arm}-s{seed}", solver, modes, bank, a, log)
    t = table(evals, a.datasets)
    header = (
        f"# {a.name}: warm base vs SSP-style arm vs SESA, {a.steps} steps x {a.seeds} seed(s); "
        f"EM %, paired 95% intervals (points) with the smallest detectable difference (mde); "
        f"this invocation {time.monotonic() - t0:.0f} s"
    )
    text = render(t, a.datasets, header)
    (a.evals_dir / f"{a.name}-table.md").write_text(text)
    (a.evals_dir / f"{a.name}-table.json").write_text(json.dumps(t, indent=1))
    print(text)
    if fig := learning_curves(runs, a.evals_dir / f"{a.name}-learning-curves.png"):
        print(f"learning curves: {fig}")


if __name__ == "__main__":
    main()
