"""``sesa train --resume runs/NAME``: check the run directory, apply or refuse the flags given with it, and
set aside -- never delete -- what the interrupted attempt left of steps it did not commit.

What a resume does to each file of the run (nothing is deleted, no line is rewritten):

- ``metrics.jsonl``: a torn last line is closed and marked (``training.metrics_log``), then one
  ``{"resume": {...}}`` record is appended (first step run again, attempt number, what the flags changed);
  readers take per step the latest attempt's record;
- ``config.yaml``: rewritten only when a flag changes a setting that is safe to change mid-run (the old
  values are in the resume record);
- ``trajectories/step-N/``, ``failures/step-N.jsonl`` of steps not committed, ``reuse_pool.json`` when it
  holds what those steps added, ``summary.json`` and ``policies/`` of a finished run being extended, the
  ``sync/`` ready markers and ``STOP.json``: moved under ``superseded/attempt-K/`` (same relative paths)
  before the steps run again and write them anew.

Nothing is written when there is nothing to resume.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sesa_graph.config import RunConfig, load_config
from sesa_graph.fsutil import write_yaml_atomic
from sesa_graph.memory.mining import failures_path
from sesa_graph.reference_values import flatten
from tools.errors import UserError
from tools.terminal import shown
from training.config_record import check_recorded, record_config
from training.metrics_log import append_record, read_metrics, seal_torn_tail
from training.reuse import ReusePool
from training.sync import SyncDir

# learning-rate schedules that decay over train.steps: a changed budget changes the rate of every step
BUDGET_SCHEDULES = ("linear", "cosine")

# Settings that say how a run is carried out, not what it learns: a resume may change them. Everything else
# would make one run mix two settings (the committed steps ran with the stored one), so it is refused.
SAFE_KEYS = (
    "train.steps",
    "train.report_to",
    "train.wait_timeout_s",
    "train.rollout_concurrency",
    # the learning curve only reads the run (training.probe_eval)
    "train.probe_every",
    "train.probe_dataset",
    "train.probe_limit",
    "train.probe_bank_modes",
    "train.trainer_threads",
    "train.trainer_launcher",
    "train.trainer_gpus",
    # the ranks split one batch and compute the same update (tests/training/test_trainer_ranks.py)
    "train.trainer_ranks",
    "train.rendezvous_ports",
    "train.join_timeout_s",
    "train.save_every",
    "train.gpu_memory_gib",
    "train.vllm_gpus",
    # where the processes run and how they reach each other; a trainer that finds no checkpoint where it
    # now runs replays every committed step from its shard, so the updates stay the same
    "cluster",
    "extra",
    "search.url",
    "search.timeout_s",
    "search.retries",
    "search.backoff_s",
)
SAFE_ENDPOINT_FIELDS = {
    "base_url",
    "api_key_env",
    "threads",
    "max_batch_size",
    "batch_wait_ms",
    "batch_max_wait_ms",
    "kv_cache_mb",
    "kv_cache_gib",
    "host",
    "port",
    "cpu_bind",
    "gpu_memory_utilization",
    "enforce_eager",
    "startup_timeout_s",
    "timeout_s",
    "retries",
    "cuda_visible_devices",
    "replicas",
    "max_concurrency",
    "allow_remote",
    "reload",
}
WHY = {
    "memory.mode": "the bank of the committed steps was built with it",
    "memory.use_seeds": "the bank was seeded (or not) when the run started",
    "memory.priming_files": "the bank was primed (or not) when the run started",
    "name": "the run's name is fixed when it starts (it names the run in its records)",
    "rewards.proposer": "the committed steps were rewarded with the stored one",
}


class ResumeError(UserError, ValueError):
    """A ``--resume`` that cannot go on: not a run directory, a damaged file, or a refused flag."""


@dataclass
class Resume:
    cfg: RunConfig
    start: int
    committed: int
    notes: list[str] = field(default_factory=list)
    changed: dict[str, list[Any]] = field(default_factory=dict)


def is_safe(key: str) -> bool:
    if any(key == k or key.startswith(k + ".") for k in SAFE_KEYS):
        return True
    parts = key.split(".")
    return parts[0] in ("solver_policy", "proposer_policy", "models") and parts[-1] in SAFE_ENDPOINT_FIELDS


def check_run_dir(run_dir: Path) -> Path:
    """``run_dir`` made absolute (symlinks resolved) when it is a run directory; else a ResumeError, before
    anything is written into it."""
    given = run_dir
    try:
        run_dir = Path(run_dir).expanduser().resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise ResumeError(f"--resume {given}: {exc}; give a run directory such as runs/NAME") from None
    if not run_dir.is_dir():
        raise ResumeError(f"--resume {given}: no such directory (give a run directory such as runs/NAME)")
    path = run_dir / "config.yaml"
    if not path.is_file():
        have = ", ".join(shown(p.name, 60, one_line=True) for p in sorted(run_dir.iterdir())[:8]) or "nothing"
        raise ResumeError(
            f"--resume {given}: not a run directory, {path.name} is missing (it holds {have}); "
            "give the directory `sesa train` made, e.g. runs/NAME"
        )
    return run_dir


def stored_config(run_dir: Path, overrides: dict[str, Any] | None = None) -> RunConfig:
    """The run's config.yaml (with ``overrides``); a missing or damaged one is a ResumeError naming it."""
    check_run_dir(run_dir)
    path = run_dir / "config.yaml"
    try:
        return load_config(path, overrides)
    except UserError as exc:
        if overrides:
            try:
                load_config(path)
            except UserError:
                pass
            else:  # the stored file is fine: the flags made it invalid
                raise ResumeError(
                    f"a flag given with --resume {run_dir} makes its config invalid: {exc}"
                ) from None
        raise ResumeError(
            f"{path} (the run's stored config) is damaged: {exc} -- restore it, or start a new run"
        ) from None
    except (TypeError, AttributeError) as exc:  # a --set key that goes below a plain value
        raise ResumeError(
            f"a --set key given with --resume {run_dir} does not fit its config: {exc}"
        ) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ResumeError(
            f"{path} (the run's stored config) is damaged: {detail} -- restore it, or start a new run"
        ) from None


def check_flags(
    run_dir: Path,
    old: RunConfig,
    new: RunConfig,
    overrides: dict[str, Any],
    flags: dict[str, str],
    committed: int,
) -> dict[str, list[Any]]:
    """The settings the flags change ({key: [stored, new]}); a change that is not safe is a ResumeError."""
    before, after = flatten(old.model_dump(mode="json")), flatten(new.model_dump(mode="json"))
    changed = {
        k: [before.get(k), after.get(k)]
        for k in sorted(set(before) | set(after))
        if before.get(k) != after.get(k)
    }
    refused = []
    for key, (was, now) in changed.items():
        src = next((k for k in overrides if key == k or key.startswith(k + ".")), key)
        flag = flags.get(src, f"--set {src}")
        if not is_safe(key):
            why = WHY.get(src, "the committed steps ran with the stored value and one run must not mix two")
            refused.append(
                f"{flag} cannot change on --resume: {run_dir} was started with {key}={json.dumps(was)} "
                f"(asked: {json.dumps(now)}); {why}. Drop the flag, or start a new run with --name"
            )
    if refused:
        raise ResumeError("\n".join(refused))
    if new.train.steps != old.train.steps and old.train.lr_scheduler in BUDGET_SCHEDULES:
        flag = flags.get("train.steps", "--set train.steps")
        raise ResumeError(
            f"{flag} {new.train.steps} cannot change the step budget on --resume: {run_dir} uses "
            f"train.lr_scheduler={old.train.lr_scheduler}, whose learning rate decays over train.steps "
            f"({old.train.steps}), so its committed steps ran on another schedule than the new budget gives. "
            f"Give {flag} {old.train.steps} (or leave it out), or start a new run with --name; a run whose "
            f"schedule does not depend on the budget (constant, constant_with_warmup) can be extended"
        )
    if new.train.steps < committed:
        flag = flags.get("train.steps", "--set train.steps")
        raise ResumeError(
            f"{flag} {new.train.steps} is below the {committed} steps {run_dir} has committed; a run cannot "
            f"be shortened: give {flag} {committed} or more (or leave it out to keep {old.train.steps})"
        )
    return changed


def prepare_resume(
    run_dir: Path,
    overrides: dict[str, Any] | None = None,
    flags: dict[str, str] | None = None,
    before_write: Callable[[Path], None] | None = None,
) -> Resume:
    """Check everything, then -- only when steps will run -- call ``before_write`` (stop what the killed
    attempt left running, so it writes nothing more), set aside what must be and append the marker."""
    from training.run_disk import refuse_if_pruned

    overrides, flags = overrides or {}, flags or {}
    refuse_if_pruned(run_dir, ResumeError)
    old = stored_config(run_dir)
    unrecorded = check_recorded(run_dir, ResumeError)  # a hand edit since the run wrote it is refused
    new = stored_config(run_dir, overrides) if overrides else old
    metrics = read_metrics(run_dir)  # a bad middle line: a JsonlError naming metrics.jsonl:line
    _check_reuse_pool(run_dir)
    sync = SyncDir(run_dir)
    done = sync.committed_steps()
    for step in done:  # a damaged commit record: an error naming it now, not a traceback mid-run
        sync.committed(step)
    start = max(done) + 1 if done else 0
    changed = check_flags(run_dir, old, new, overrides, flags, start)
    out = Resume(new, start, start, changed=changed)
    if unrecorded:
        out.notes.append(unrecorded)
    if strays := sync.strays():
        out.notes.append(
            f"{sync.root}: ignored {len(strays)} file(s) that are not commit records: "
            + ", ".join(shown(n, 80, one_line=True) for n in strays[:5])
        )
    if metrics.torn_tail:
        out.notes.append(f"{metrics.path}: last line torn ({metrics.torn_tail} bytes), skipped")
    if start >= new.train.steps:
        if changed:
            out.notes.append(f"not applied (nothing runs): {', '.join(changed)}")
        return out
    if before_write is not None:
        before_write(run_dir)
    attempt = len(metrics.resumes) + 2  # attempt 1 is the run's start
    aside = run_dir / "superseded" / f"attempt-{attempt}"
    moved = _set_aside(run_dir, sync, start, old, aside)
    if changed:
        write_yaml_atomic(run_dir / "config.yaml", new.model_dump(mode="json"))
    if changed or unrecorded:
        record_config(run_dir)
    if changed:
        out.notes.append(
            "applied: "
            + ", ".join(f"{k} {json.dumps(a)} -> {json.dumps(b)}" for k, (a, b) in changed.items())
        )
    torn = seal_torn_tail(run_dir)
    record: dict[str, Any] = {"from_step": start, "attempt": attempt, "time": time.time(), "pid": os.getpid()}
    if changed:
        record["changed"] = changed
    if moved:
        record["superseded"] = {"dir": str(aside.relative_to(run_dir)), "paths": moved}
        out.notes.append(f"set aside from the interrupted attempt: {', '.join(moved)} -> {aside}")
    if torn:
        record["torn_last_line_bytes"] = torn
    append_record(run_dir, {"resume": record})
    return out


def _check_reuse_pool(run_dir: Path) -> None:
    ReusePool(run_dir / "reuse_pool.json")  # a damaged one is a UserError naming it


def _set_aside(run_dir: Path, sync: SyncDir, start: int, old: RunConfig, aside: Path) -> list[str]:
    """Move what the steps about to run would overwrite (or a finished run's results) under ``aside``."""
    paths = [p for p in sync.root.glob("ready-*-*.json") if _step_of(p.stem) >= start]
    paths.append(sync.root / "STOP.json")
    for d in sorted((run_dir / "trajectories").glob("step-*")):
        if d.name.split("-", 1)[1].isdigit() and int(d.name.split("-", 1)[1]) >= start:
            paths.append(d)
    fdir = failures_path(run_dir, 0).parent
    paths += [p for p in sorted(fdir.glob("step-*.jsonl")) if _step_of(p.stem) >= start]
    pool = run_dir / "reuse_pool.json"
    if pool.is_file() and any(
        e["step"] >= start or any(int(k) >= start for k in e["rates"]) for e in ReusePool(pool).entries
    ):
        paths.append(pool)
    if start >= old.train.steps:  # a finished run being extended: its summary and final weights
        paths += [run_dir / "summary.json", run_dir / "policies"]
    moved = []
    for p in paths:
        if not p.exists():
            continue
        rel = p.relative_to(run_dir)
        dest = aside / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if p.name == "reuse_pool.json":  # the orchestrator rewinds and saves it; a copy is enough
            dest.write_bytes(p.read_bytes())
        else:
            os.replace(p, dest)
        moved.append(str(rel))
    return moved


def _step_of(stem: str) -> int:
    tail = stem.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1
