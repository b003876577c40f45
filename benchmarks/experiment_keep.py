"""An experiment's finished pieces kept in the source tree (``experiment.py --keep DIR``).

The full ablation needs more hours than one sitting, and ``runs/`` and ``evals/`` live only on the machine
that made them: a fresh clone (or a machine wiped between sittings) would start again from the base eval.
A finished arm/seed needs nothing of its run but its eval records to enter the table, so ``--keep`` copies,
as each piece finishes, its evals' files (records gzipped: tens of MB of trajectories become a few) and its
run's small files (config, metrics, summary: the learning curves), plus the timing, into ``DIR``, meant to
be committed. On the next sitting the same command restores them, skips what they cover and goes on with
the first piece they do not. A piece is kept only when finished: an interrupted run or eval is not.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
from pathlib import Path

EVAL_FILES = (
    "eval.json",
    "answerability.jsonl",
    "report.md",
    "report.json",
)  # the report last: it marks done
RECORDS = "records.jsonl"
RUN_FILES = ("config.yaml", "metrics.jsonl", "summary.json")
TIMING = "timing.json"


def ignored_by_git(keep: Path) -> str | None:
    """The ignore rule (``.gitignore:4:runs/``) that would keep a piece kept in ``keep`` out of a commit, or
    None: nothing ignores it, or ``keep`` is not in a git work tree. A kept piece git never sees is lost
    with the machine, which is the one thing ``--keep`` is for."""
    keep = keep.absolute()  # git runs from inside keep, where a relative path would mean another place
    probes = [keep / "runs" / "x" / RUN_FILES[0], keep / "evals" / "x" / f"{RECORDS}.gz", keep / TIMING]
    cwd = next((p for p in (keep, *keep.parents) if p.is_dir()), None)
    try:
        out = subprocess.run(
            ["git", "check-ignore", "--verbose", *map(str, probes)],
            check=False,
            cwd=cwd,
            capture_output=True,
            text=True,
        )
    except OSError:  # no git: nothing to commit to either
        return None
    hit = out.stdout.splitlines()[0] if out.returncode == 0 and out.stdout else None
    return hit.split("\t")[0] if hit else None


def _copy(src: Path, dest: Path, names: tuple[str, ...]) -> None:
    """Those of ``names`` that ``src`` holds, copied into ``dest`` in that order."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        if (src / name).is_file():
            shutil.copyfile(src / name, dest / name)


def finished_eval(eval_dir: Path) -> bool:
    """An eval whose report says it ran to the end (one interrupted says ``aborted``)."""
    try:
        return not json.loads((eval_dir / "report.json").read_text()).get("aborted")
    except (OSError, ValueError):
        return False


def keep_eval(eval_dir: Path, keep: Path) -> bool:
    """Copy a finished eval into ``keep/evals/<name>``; False (nothing copied) if it is not finished."""
    if not finished_eval(eval_dir):
        return False
    dest = keep / "evals" / eval_dir.name
    dest.mkdir(parents=True, exist_ok=True)
    # mtime 0 and no file name in the header: the same records give the same bytes (no churn in git)
    with (
        open(eval_dir / RECORDS, "rb") as src,
        open(dest / f"{RECORDS}.gz", "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out,
    ):
        shutil.copyfileobj(src, out)
    _copy(eval_dir, dest, EVAL_FILES)  # after the records: a kept report.json means the records are whole
    return True


def restore_eval(eval_dir: Path, keep: Path) -> bool:
    """Put a kept finished eval back at ``eval_dir`` unless a finished one is there; True if one is now."""
    if finished_eval(eval_dir):
        return True
    src = keep / "evals" / eval_dir.name
    if not (finished_eval(src) and (src / f"{RECORDS}.gz").is_file()):
        return False
    eval_dir.mkdir(parents=True, exist_ok=True)
    with gzip.open(src / f"{RECORDS}.gz", "rb") as gz, open(eval_dir / RECORDS, "wb") as out:
        shutil.copyfileobj(gz, out)
    _copy(src, eval_dir, EVAL_FILES)
    return finished_eval(eval_dir)


def keep_run(run: Path, keep: Path) -> None:
    """Copy a finished run's small files (not its policies, checkpoints or bank) into ``keep/runs/<name>``."""
    _copy(run, keep / "runs" / run.name, RUN_FILES)


def restore_piece(run: Path, eval_dirs: list[Path], keep: Path) -> bool:
    """Restore an arm/seed whose evals were all kept: the evals, and the run's small files so that the run
    counts as finished (its summary) and draws its learning curve. False, and the run left alone, if any of
    its evals is not kept: the piece then runs (or resumes) as usual."""
    if (run / "summary.json").is_file() or not all((keep / "evals" / d.name).is_dir() for d in eval_dirs):
        return False
    if not all(restore_eval(d, keep) for d in eval_dirs):
        return False
    _copy(keep / "runs" / run.name, run, RUN_FILES)
    return (run / "summary.json").is_file()


def restore_timing(timing: Path, keep: Path) -> None:
    """The kept per-piece wall times, unless this machine has its own."""
    if not timing.is_file() and (keep / TIMING).is_file():
        timing.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(keep / TIMING, timing)


def keep_timing(timing: Path, keep: Path) -> None:
    if timing.is_file():
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(timing, keep / TIMING)
