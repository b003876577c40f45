"""The ablation as one command: the warm base and three trained arms that differ in one thing each, N seeds,
one table that keeps every seed.

    .venv/bin/python benchmarks/experiment.py --steps 12 --seeds 2 [--probe probe-v2] [--probe-limit N]
        [--data-dir ../shared/data/benchmarks --limit 100] [--controls] [--name exp] [--engine vllm|local]
        [--doc docs/EXPERIMENT.md]

Arms (``ARM_FLAGS``), each ``sesa train --name NAME-ARM-sS --steps N --set seed=S`` on the default config:

- ``ssp``: no bank, SSP's 1-p proposer reward (the SSP-style arm);
- ``nobank``: no bank, SESA's frontier reward: against ``sesa`` the bank is the only difference, against
  ``ssp`` the reward is;
- ``sesa``: SESA (bank on, frontier reward).

Then ``sesa eval`` of each trained solver (bank off; SESA: its own bank, on; with --controls also closed,
off and oracle) and of the warm base (bank off; refused if the warm model predates the held-out split):
on the probe set (default ``probe-v2``, evaluated at the cut it was generated at) and, with --data-dir, the
seven benchmarks' answerable subset.

Resumable: a finished run or eval is skipped, an interrupted run is continued with ``--resume`` (same
--steps: a run whose learning-rate schedule decays over the budget refuses another), an interrupted eval
from its record cache; a killed experiment re-run with the same command picks up at the first unfinished
arm/seed/eval. Each piece's wall time is kept in ``evals/NAME-timing.json`` across invocations.

The table (``evals/NAME-table.md``/``.json``, and with --doc the marked section of that file): EM per arm
and seed; A/A (seed 1 vs seed 0 of each arm: the run-to-run spread); every comparison with the two-level
bootstrap interval (seeds, then questions or clusters of questions sharing an article or answer), the
exact McNemar test per seed pairing and the exact-test mde (``sesa_eval.resample``, ``sesa_eval.mcnemar``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import experiment_keep as keep
from experiment_table import BENCHMARKS

ROOT = Path(__file__).resolve().parent.parent
ARM_FLAGS = {
    "ssp": ["--bank", "off", "--proposer-reward", "1-p"],
    "nobank": ["--bank", "off", "--proposer-reward", "frontier"],
    "sesa": ["--proposer-reward", "frontier"],
}
CONTROL_MODES = ("closed", "off", "on", "oracle")
DOC_BEGIN, DOC_END = "<!-- experiment-table -->", "<!-- /experiment-table -->"


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


class Timing:
    """Each piece's wall time in ``evals/NAME-timing.json``, summed over the invocations that worked on it (a
    piece skipped as finished keeps its time; the part of a piece a kill cut short is not counted, its
    resumed remainder is)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.s: dict[str, float] = json.loads(path.read_text()) if path.is_file() else {}

    def run(self, piece: str, fn, *args):
        t0 = time.monotonic()
        out = fn(*args)
        took = time.monotonic() - t0
        if took > 5 or piece not in self.s:  # a skip takes well under 5 s
            self.s[piece] = round(self.s.get(piece, 0.0) + took, 1) if took > 5 else round(took, 1)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.s, indent=1))
        return out


def warm_up(log: Path) -> None:
    """Build the format-warmed model the base is (``sesa train`` would build it too, but the base eval runs
    first); one older than the held-out split is rebuilt, as ``sesa train`` does."""
    from sesa_graph.warm_model import is_complete, is_current, warm_dir

    path = warm_dir("embedded")
    if not is_current(path):
        sesa(["warmup", *(["--force"] if is_complete(path) else [])], log)


def train(arm: str, seed: int, a: argparse.Namespace, log: Path) -> Path:
    run = a.runs_dir / f"{a.name}-{arm}-s{seed}"
    if (run / "summary.json").is_file():
        return run
    common = ["--runs-dir", str(a.runs_dir), *(["--engine", a.engine] if a.engine else [])]
    if (run / "config.yaml").is_file():
        # the same --steps: a changed budget is refused where the learning-rate schedule depends on it
        sesa(["train", "--resume", str(run), "--steps", str(a.steps), *common[2:]], log)
    else:
        args = ["train", "--name", run.name, "--steps", str(a.steps), "--set", f"seed={seed}"]
        extra = [x for kv in a.train_set for x in ("--set", kv)]
        sesa([*args, *ARM_FLAGS[arm], *extra, *common], log)
    return run


def eval_parts(name: str, a: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """Each eval directory's name under --evals-dir with its dataset arguments."""
    parts = [
        (
            f"{name}-probe",
            ["--datasets", a.probe, *(["--limit", str(a.probe_limit)] if a.probe_limit else [])],
        )
    ]
    if a.data_dir:
        bench = ["--data-dir", str(a.data_dir), "--datasets", ",".join(BENCHMARKS), "--subset", "answerable"]
        parts.append((f"{name}-bench", bench + (["--limit", str(a.limit)] if a.limit else [])))
    return parts


def evaluate(
    name: str, model: str, modes: list[str], bank: Path | None, a: argparse.Namespace, log: Path
) -> list[Path]:
    """The probe set (all its questions, or the first --probe-limit); with --data-dir, the benchmarks on their
    answerable subset (on the embedded corpus about 3 in 4 benchmark questions have no gold answer in the
    search's reach, and their rollouts would only dilute the table)."""
    out = []
    for part, data in eval_parts(name, a):
        args = ["eval", "--name", part, "--out-root", str(a.evals_dir), "--model", model, *data]
        args += ["--bank-modes", ",".join(modes)] + (["--bank", str(bank)] if bank else [])
        args += ["--engine", a.engine] if a.engine else []
        args += ["--judge", "none"]  # the table is exact match; a judge model would only add time and memory
        if not keep.finished_eval(a.evals_dir / part):  # missing, or interrupted (its records are reused)
            sesa(args, log)
        out.append(a.evals_dir / part)
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


def _keep(a: argparse.Namespace, run: Path | None, eval_dirs: list[Path], timing: Path) -> None:
    """With --keep: a piece's finished evals, its run's small files and the timing, into the kept directory."""
    if not a.keep:
        return
    if all(keep.keep_eval(d, a.keep) for d in eval_dirs) and run is not None:
        keep.keep_run(run, a.keep)
    keep.keep_timing(timing, a.keep)


def write_doc(doc: Path, text: str) -> None:
    """Put ``text`` between the table markers of ``doc`` (appended with them if it has none)."""
    old = doc.read_text() if doc.is_file() else ""
    block = f"{DOC_BEGIN}\n{text}{DOC_END}\n"
    if DOC_BEGIN in old and DOC_END in old:
        new = old[: old.index(DOC_BEGIN)] + block + old[old.index(DOC_END) + len(DOC_END) + 1 :]
    else:
        new = old + ("\n" if old else "") + block
    doc.write_text(new)


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=4, help="Self-play steps of each trained arm (the budget).")
    ap.add_argument("--seeds", type=int, default=2, help="Seeds per trained arm (2: the A/A comparison).")
    ap.add_argument(
        "--arms", default="ssp,nobank,sesa", help="Trained arms, comma-separated (of ssp, nobank, sesa)."
    )
    ap.add_argument("--name", default="exp", help="Prefix of the runs and evals.")
    ap.add_argument(
        "--probe", default="probe-v2", choices=("probe-v2", "probe"), help="The probe set (probe: v1)."
    )
    ap.add_argument(
        "--probe-limit", type=int, default=None, help="First N probe questions (smoke runs only)."
    )
    ap.add_argument(
        "--data-dir", type=Path, default=None, help="Benchmark JSONL directory (adds the seven benchmarks)."
    )
    ap.add_argument(
        "--limit", type=int, default=None, help="First N questions of each benchmark (default: all)."
    )
    ap.add_argument(
        "--controls",
        action="store_true",
        help="Evaluate SESA's solver in all four modes (closed-book floor, bank off, on, open-book ceiling).",
    )
    ap.add_argument(
        "--engine", choices=("vllm", "local"), default=None, help="Default: the config's backends."
    )
    ap.add_argument(
        "--train-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Passed to every new run as --set KEY=VALUE (smoke runs: a smaller step; solver.doc_chars must "
        "stay the probe set's cut).",
    )
    ap.add_argument("--runs-dir", type=Path, default=ROOT / "runs")
    ap.add_argument("--evals-dir", type=Path, default=ROOT / "evals")
    ap.add_argument(
        "--doc", type=Path, default=None, help="Also write the table into this file's marked section."
    )
    ap.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="Keep each finished piece (eval records, the run's metrics, the timing) in this directory, to be "
        "committed, and restore from it: a run spanning sittings on machines that do not keep runs/ and "
        "evals/ (benchmarks/experiment_keep.py).",
    )
    a = ap.parse_args(argv)
    a.arms = [x for x in a.arms.split(",") if x]
    if a.steps < 1 or a.seeds < 1:
        ap.error(f"--steps and --seeds must be at least 1 (got {a.steps}, {a.seeds})")
    if not a.arms or any(x not in ARM_FLAGS for x in a.arms):
        ap.error(f"--arms {','.join(a.arms)}: choose from {', '.join(ARM_FLAGS)}")
    if a.keep and (rule := keep.ignored_by_git(a.keep)):
        ap.error(
            f"--keep {a.keep}: git ignores what would be kept there ({rule}), so no commit would keep it; "
            "choose a directory git tracks, or add a '!' rule for it to .gitignore"
        )
    return a


def main(argv: list[str] | None = None) -> None:
    from experiment_render import render
    from experiment_table import controls, table

    a = parse(argv)
    datasets = [a.probe, *(BENCHMARKS if a.data_dir else ())]
    log = a.evals_dir / f"{a.name}-log.txt"
    timing_path = a.evals_dir / f"{a.name}-timing.json"
    if a.keep:
        keep.restore_timing(timing_path, a.keep)
    timing = Timing(timing_path)
    t0 = time.monotonic()
    runs: dict[str, list[Path]] = {arm: [] for arm in a.arms}
    base = [a.evals_dir / part for part, _ in eval_parts(f"{a.name}-base", a)]
    if not (a.keep and all(keep.restore_eval(d, a.keep) for d in base)):
        timing.run("warm-up", warm_up, log)
        timing.run("base eval", evaluate, f"{a.name}-base", "embedded-warm", ["off"], None, a, log)
    evals: dict[str, list[Path]] = {"base": base}
    _keep(a, None, base, timing_path)  # also a piece finished here before --keep was given
    for seed in range(a.seeds):
        for arm in a.arms:
            name = f"{a.name}-{arm}-s{seed}"
            if a.keep:
                parts = [a.evals_dir / part for part, _ in eval_parts(name, a)]
                keep.restore_piece(a.runs_dir / name, parts, a.keep)
            run = timing.run(f"{arm} s{seed} train", train, arm, seed, a, log)
            runs[arm].append(run)
            bank = run / "bank" if arm == "sesa" else None
            modes = (list(CONTROL_MODES) if a.controls else ["on"]) if arm == "sesa" else ["off"]
            solver = str(run / "policies" / "solver")
            piece = f"{arm} s{seed} eval"
            done = timing.run(piece, evaluate, name, solver, modes, bank, a, log)
            evals.setdefault(arm, []).extend(done)
            _keep(a, run, done, timing_path)
    t = table(evals, datasets, a.probe)
    total = sum(timing.s.values())
    header = (
        f"## {a.name}: warm base vs {', '.join(a.arms)}, {a.steps} steps x {a.seeds} seed(s), {a.probe}\n\n"
        f"Wall time: {total / 60:.1f} min over all invocations (this one {(time.monotonic() - t0) / 60:.1f} min). "
        "Per piece (s): "
        + ", ".join(f"{k} {v:.0f}" for k, v in timing.s.items() if not k.endswith("(interrupted)"))
    )
    ctl = controls(evals.get("sesa", []), tuple(CONTROL_MODES), datasets) if a.controls else None
    text = render(t, header, ctl)
    (a.evals_dir / f"{a.name}-table.md").write_text(text)
    (a.evals_dir / f"{a.name}-table.json").write_text(json.dumps({**t, "timing": timing.s}, indent=1))
    if a.doc:
        write_doc(a.doc, text)
    print(text)
    if fig := learning_curves(runs, a.evals_dir / f"{a.name}-learning-curves.png"):
        print(f"learning curves: {fig}")


if __name__ == "__main__":
    main()
