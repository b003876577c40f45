"""``sesa train``: start both GRPO trainer processes and the orchestrator, show progress, clean up.

Everything lands in ``runs/<name>/``: ``config.yaml``, ``metrics.jsonl``, ``trajectories/``, ``bank/``
(skills, counters, queue, snapshots), ``checkpoints/<role>/`` (TRL: optimizer, scheduler, RNG),
``policies/<role>/`` (final weights), ``logs/`` and ``summary.json``. ``--resume runs/NAME`` continues
from the first step that was not committed. The trainer processes are always stopped on exit.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from sesa_graph.config import RunConfig
from sesa_graph.fsutil import write_yaml_atomic
from sesa_graph.owner_lock import OwnerLock
from sesa_graph.policy.gpu_share import trainers_share_server_gpus
from tools.errors import ServiceError, UserError
from training.config_record import record_config
from training.coordinator import Coordinator
from training.metrics_log import append_record, read_metrics
from training.run_owner import lock_run, new_run_dir
from training.sync import SyncDir
from training.trainer_jobs import ROLES, TrainerProcesses, kill_stale_trainers

# soft_wrap: a batch log (stdout not a terminal) would otherwise get every long line cut at 80 columns
console = Console(soft_wrap=True)


class TrainingStopped(ServiceError, RuntimeError):
    """A run stopped because one of its parts failed; what is committed stays, ``--resume`` continues."""

    def __init__(self, run_dir: Path, cause: str) -> None:
        super().__init__(
            f"{cause}\n\nthe run stopped; committed steps are kept. Continue it with: "
            f"sesa train --resume {run_dir}\n(full traceback: {run_dir / 'logs' / 'train-error.log'})"
        )
        self.run_dir = run_dir


def _log_traceback(run_dir: Path, exc: BaseException) -> None:
    import traceback

    (run_dir / "logs").mkdir(exist_ok=True)
    with open(run_dir / "logs" / "train-error.log", "a") as f:
        f.write(time.strftime("%Y-%m-%d %H:%M:%S ") + "".join(traceback.format_exception(exc)) + "\n")


def prepare_run(
    cfg: RunConfig | None,
    runs_dir: Path,
    resume: Path | None,
    overrides: dict[str, Any] | None = None,
    flags: dict[str, str] | None = None,
) -> tuple[RunConfig, Path, int, OwnerLock]:
    """The run directory (absolute), its config, the first step to run and the run's owner lock, taken
    before anything is written or stopped (``training.run_owner``). A resume applies or refuses ``overrides``
    (``flags`` names the flag each came from) and loses nothing (``training.resume``)."""
    if resume is not None:
        from training.resume import check_run_dir, prepare_resume

        run_dir = check_run_dir(resume)
        lock = lock_run(run_dir)
        try:
            r = prepare_resume(run_dir, overrides, flags, before_write=stop_stale_processes)
        except BaseException:
            lock.release()
            raise
        for note in r.notes:
            console.print(note, markup=False, highlight=False, soft_wrap=True)
        return r.cfg, run_dir, r.start, lock
    assert cfg is not None
    run_dir, lock = new_run_dir(runs_dir, cfg.name)
    try:
        write_yaml_atomic(run_dir / "config.yaml", cfg.model_dump(mode="json"))
        record_config(run_dir)
    except BaseException:
        lock.release()
        raise
    return cfg, run_dir, 0, lock


def stop_stale_processes(run_dir: Path) -> None:
    kill_stale_trainers(run_dir, say=lambda msg: console.print(msg, markup=False, soft_wrap=True))
    kill_stale_servers(run_dir)


def kill_stale_servers(run_dir: Path) -> None:
    """Policy servers of a killed run get SIGTERM when it dies; one still up (or stuck) is killed here."""
    from sesa_graph.policy.vllm_server import owned_processes

    for pid in owned_processes(str(run_dir.resolve())):
        try:
            os.kill(pid, signal.SIGKILL)
            console.print(f"stopped policy server process {pid} left over from the interrupted run")
        except ProcessLookupError:
            pass


def ensure_models(cfg: RunConfig) -> None:
    """Build the format-warmed embedded policy first if the config asks for it and it is missing; say loudly
    which role falls back because its fetched model is not on this machine (the orchestrator applies it)."""
    from sesa_graph.fixed_models import with_fallbacks
    from sesa_graph.warm_model import is_complete, is_current, warm_dir

    for note in with_fallbacks(cfg)[1]:
        console.print(f"WARNING: {note}", style="bold red", markup=False, highlight=False)

    for pcfg in (cfg.solver_policy, cfg.proposer_policy):
        if pcfg.backend in ("local", "vllm") and pcfg.model == "embedded-warm":
            path = warm_dir("embedded")
            if is_current(path):
                continue
            why = (
                "was built before the probe set's held-out split, so it has seen those articles"
                if is_complete(path)
                else "is not built yet"
            )
            console.print(
                f"[bold]The format-warmed embedded policy {why}: running `sesa warmup` first (about 2-5 minutes "
                "on 2 cores, once, cached in $SESA_HOME).[/]"
            )
            run_warmup_process()
            return


def run_warmup_process() -> None:
    """``sesa warmup`` in a child process: the SFT's peak (several GB that glibc's allocator keeps once
    freed) must not stay in the orchestrator, which then starts the run beside it (a first run in-process
    was OOM-killed at its first consolidation). Its output goes to this terminal or log as it comes."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "sesa_cli.main", "warmup"]
    code = subprocess.run(cmd, stdin=subprocess.DEVNULL, check=False).returncode
    if code != 0:
        raise ServiceError(
            f"the format warm-up (`{' '.join(cmd[2:])}`, in its own process) exited with status {code}"
            f"{' (killed by signal ' + str(-code) + ')' if code < 0 else ''}; its output is above. Run "
            "`sesa warmup` alone to retry it, then `sesa train` again"
        )


SETTINGS_FILE = "settings.txt"


def train(
    cfg: RunConfig | None,
    runs_dir: Path = Path("runs"),
    resume: Path | None = None,
    overrides: dict[str, Any] | None = None,
    flags: dict[str, str] | None = None,
    settings: str | None = None,
) -> Path:
    """Run (or, with ``resume``, continue) a run; ``overrides``/``flags``: the settings given with a
    resume, applied or refused by :func:`training.resume.prepare_resume`; ``settings``: the resolved
    settings table, kept as the new run's ``settings.txt``. The run's owner lock is held from before its
    first write until this returns or raises."""
    from training.tracking import check_tracker

    if cfg is not None:  # before the run directory exists
        check_tracker(cfg.train.report_to)
        check_gpu_plan(cfg)
        check_cpu_memory(cfg)
    cfg, run_dir, start, lock = prepare_run(cfg, runs_dir, resume, overrides, flags)
    if settings is not None and resume is None:
        (run_dir / SETTINGS_FILE).write_text(settings)
        console.print(
            f"settings: {run_dir / SETTINGS_FILE} (each value and where it comes from)",
            markup=False,
            soft_wrap=True,
        )
    try:
        return _run(cfg, run_dir, start, resume is not None)
    finally:
        lock.release()


def _run(cfg: RunConfig, run_dir: Path, start: int, resumed: bool) -> Path:
    """:func:`_run_attempt`, recorded as an attempt of the run (``training.run_life``): an earlier attempt
    that died without a word is named first."""
    from training import run_life

    if note := run_life.diagnose(run_dir, start):
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    run_life.begin(run_dir, start)
    try:
        out = _run_attempt(cfg, run_dir, start, resumed)
    except KeyboardInterrupt:
        run_life.end(run_dir, "interrupted")
        raise
    except BaseException as exc:
        run_life.end(
            run_dir, "stopped", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        )
        raise
    run_life.end(run_dir, "finished")
    return out


def _run_attempt(cfg: RunConfig, run_dir: Path, start: int, resumed: bool) -> Path:
    """The owned run from ``start``: trainers, orchestrator, progress, clean-up and the summary."""
    from training.orchestrator import Orchestrator

    if _nothing_to_run(cfg, run_dir, start, resumed):
        return run_dir
    ensure_models(cfg)
    console.print(
        f"run [bold]{run_dir}[/] - steps {start}..{cfg.train.steps - 1} - config {run_dir / 'config.yaml'}"
    )
    t0 = time.time()
    rows = read_metrics(run_dir).rows  # per step the latest attempt's record
    # `kill <pid>` (SIGTERM) would otherwise end this process without the cleanup below and leave both
    # trainers running; treat it like Ctrl-C.
    previous = (
        signal.signal(signal.SIGTERM, _terminate)
        if threading.current_thread() is threading.main_thread()
        else None
    )
    coord = Coordinator(
        cfg.cluster, (run_dir / "config.yaml").read_text(), {"run": str(run_dir), "name": cfg.name}
    )
    local = cfg.cluster.trainers == "local"
    trainers = TrainerProcesses(run_dir, cfg, coord.address) if local else None
    orch = None
    phases: dict[str, float] = {}
    # on a GPU that a vLLM server sizes its KV cache on, the trainers load only once the servers are up
    late = trainers is not None and trainers_share_server_gpus(cfg)
    try:
        if trainers is not None and not late:
            trainers.start()
        elif trainers is None:
            console.print(
                f"coordinator at {coord.address}: start the trainer jobs on each of the "
                f"{cfg.cluster.trainer_nodes} trainer node(s) with\n  sesa trainers --coordinator {coord.address} "
                "--node-rank N --workdir DIR",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        alive = trainers.dead if trainers is not None else (lambda: None)
        orch = Orchestrator(cfg, run_dir, coord, resume=resumed)
        if late:
            trainers.start()
        phases["policies_ready_s"] = round(time.time() - t0, 1)
        console.print(
            f"policies ready after {time.time() - t0:.0f}s "
            f"(solver: {_engine(cfg.solver_policy)}, proposer: {_engine(cfg.proposer_policy)})"
        )
        show_steps(orch, start, alive, rows, cfg.train.steps, t0, judge=cfg.judge, run_dir=run_dir)
        console.print("waiting for the trainers' last optimizer step ...")
        t_last = time.time()
        finals = coord.wait_done(cfg.train.steps, cfg.train.wait_timeout_s, alive, orch.replay)
        take_final_policies(coord, run_dir, finals)
        if trainers is not None:
            trainers.wait(cfg.train.wait_timeout_s)
        phases["last_update_s"] = round(time.time() - t_last, 1)
        SyncDir(run_dir).clear_weights()
    except BaseException as exc:
        cause = _stop_trainers(exc, run_dir, coord, trainers)
        if isinstance(exc, (KeyboardInterrupt, SystemExit, UserError)):
            raise
        _log_traceback(run_dir, exc)
        raise TrainingStopped(run_dir, cause) from exc
    finally:
        if orch is not None:
            orch.close()
        if trainers is not None:
            trainers.stop()
        coord.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    summary = write_summary(
        run_dir, cfg, rows, time.time() - t0, phase_split(rows[-(cfg.train.steps - start) :], phases)
    )
    summary["network_bytes"] = dict(coord.bytes_sent)  # what crossed the coordinator, by kind
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    console.print_json(json.dumps(summary))
    from training.run_disk import describe

    console.print(
        f"{run_dir} keeps {describe(run_dir)} on disk; checkpoints/ is only for extending the run (--resume "
        f"--steps N): `sesa runs --prune {run_dir.name}` removes it once you will not",
        markup=False,
        soft_wrap=True,
    )
    return run_dir


def _nothing_to_run(cfg: RunConfig, run_dir: Path, start: int, resumed: bool) -> bool:
    """The checks before anything starts (tracker, GPU plan, target pool); True when every step and the
    trainers' last update are done already."""
    from sesa_graph.corpus.targets import check_pool
    from training.tracking import check_tracker

    check_tracker(cfg.train.report_to)
    check_gpu_plan(cfg)
    check_pool(cfg.train.target_pool)  # a missing or bad pool file stops here, before servers and trainers
    if resumed and start < cfg.train.steps:  # a new run was checked before its directory was made
        check_cpu_memory(cfg)
    if start >= cfg.train.steps:
        if all((run_dir / "policies" / r / ".complete").exists() for r in ROLES):
            console.print(f"{run_dir}: all {cfg.train.steps} steps are committed; nothing to resume")
            return True
        console.print(
            f"{run_dir}: all {cfg.train.steps} steps are committed, but not the trainers' last update: running it"
        )
    return False


def _stop_trainers(exc: BaseException, run_dir: Path, coord: Any, trainers: Any) -> str:
    """After ``exc`` stopped the run: tell the trainers (sync dir and coordinator) and stop local ones; the
    cause to report is a trainer that died first, when there is one (the error then is only its echo)."""
    dead = trainers.dead() if trainers is not None else None  # before stopping them: not the cause
    dead = dead or coord.trainer_trouble()
    reason = f"{type(exc).__name__}: {exc}"
    SyncDir(run_dir).stop(reason)
    coord.stop(reason)
    if trainers is not None:
        trainers.stop()
    return str(exc) if dead is None or dead in str(exc) else dead


def show_steps(
    orch: Any,
    start: int,
    alive: Any,
    rows: list[dict[str, Any]],
    steps: int,
    t0: float,
    judge: Any = None,
    run_dir: Path | None = None,
) -> None:
    """Run the steps, each committed one shown as it comes: a live table on a terminal, else one flushed
    line a step (``training.progress``); with ``judge``, its verdicts watched (``training.judge_watch``)."""
    from rich.live import Live

    from training.judge_watch import JudgeWatch
    from training.progress import emit, step_line, step_table

    watch = JudgeWatch(judge) if judge is not None else None

    def check_judge(s: Any) -> None:
        """``judge``'s verdicts watched (``training.judge_watch``); its warning also goes into ``run_dir``."""
        if watch is not None and (warning := watch.update(s.metrics)) is not None:
            console.print(warning, markup=False, highlight=False, soft_wrap=True)
            if run_dir is not None:
                append_record(run_dir, {"judge_warning": warning, "after_step": s.step})

    if not console.is_terminal:

        def print_line(s: Any) -> None:
            rows.append(s.metrics)
            emit(step_line(s.metrics, steps, time.time() - t0))
            check_judge(s)

        orch.run(start, alive, print_line)
        return
    with Live(step_table(rows), console=console, refresh_per_second=2, transient=False) as live:

        def on_step(s: Any) -> None:
            rows.append(s.metrics)
            live.update(step_table(rows))
            check_judge(s)

        orch.run(start, alive, on_step)


def take_final_policies(coord: Coordinator, run_dir: Path, finals: dict[str, dict[str, Any]]) -> None:
    """Final weights sent through the coordinator go to ``policies/<role>`` of the run directory, beside
    everything else of the run; written on a trainer node they stay there (its path is in the summary)."""
    from sesa_graph.weights_wire import drop, fetch_dir

    for role, msg in finals.items():
        w = msg["policy"]
        if w["kind"] == "store":
            dest = run_dir / "policies" / role
            fetch_dir(coord.store, w["prefix"], dest)
            drop(coord.store, w["prefix"])
            (dest / "VERSION").unlink(missing_ok=True)
            coord.bytes_sent[f"final/{role}"] = w["bytes"]


def check_gpu_plan(cfg: RunConfig) -> None:
    """Refuse, before anything starts, a config whose processes cannot fit their GPUs (``sesa plan``)."""
    from training.memory_plan import check_memory_plan

    if any(p.device.startswith("cuda") for p in (cfg.solver_policy, cfg.proposer_policy)):
        check_memory_plan(cfg)


def check_cpu_memory(cfg: RunConfig) -> None:
    """Refuse, before anything starts, a CPU run that cannot fit the memory this machine has free
    (``training.host_memory``); say what it will take otherwise."""
    from training.host_memory import available_gib, check_host_memory, on_this_cpu

    if not (cfg.train.memory_check and on_this_cpu(cfg)):
        return
    have, source = available_gib()
    need = check_host_memory(cfg, (have, source))
    console.print(f"memory: this run should peak near {need:.1f} GiB; {have:.1f} GiB free ({source})")


def _engine(pcfg: Any) -> str:
    return {"vllm": "vLLM server", "local": "in-process transformers"}.get(
        pcfg.backend, f"endpoint {pcfg.base_url}"
    )


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"stopped by signal {signum}")


def phase_split(rows: list[dict[str, Any]], phases: dict[str, float]) -> dict[str, float]:
    """Where this invocation's wall time went. The wait before its first step is start-up (trainers load and
    publish); later waits are the trainers' GRPO updates, as is the wait for the last one."""
    waits = [m.get("wait_trainers_s", 0.0) for m in rows]
    return {
        "startup_s": round(phases.get("policies_ready_s", 0.0) + (waits[0] if waits else 0.0), 1),
        "rollouts_s": round(sum(m.get("seconds", 0.0) for m in rows), 1),
        "grpo_updates_s": round(sum(waits[1:]) + phases.get("last_update_s", 0.0), 1),
        "weight_sync_s": round(sum(sum((m.get("weight_sync_s") or {}).values()) for m in rows), 2),
        # the learning curve's evals (train.probe_every): they run while the trainers update, so the wait
        # that follows one is shorter and grpo_updates_s leaves them out
        "probe_evals_s": round(sum((m.get("probe") or {}).get("seconds", 0.0) for m in rows), 1),
    }


def write_summary(
    run_dir: Path,
    cfg: RunConfig,
    rows: list[dict[str, Any]],
    seconds: float,
    phases: dict[str, float] | None = None,
) -> dict[str, Any]:
    rates = [p for m in rows for p in (m.get("solver_success_rates") or [])]
    final = read_metrics(run_dir).final_consolidation if rows else None
    summary = {
        "run": str(run_dir),
        "steps": len(rows),
        "wall_s": round(seconds, 1),
        "phases": phases or {},
        "engines": {"solver": cfg.solver_policy.backend, "proposer": cfg.proposer_policy.backend},
        "peak_rss_mib_orchestrator": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "peak_rss_mib_children": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024),
        "valid_rate": _avg([m["valid_rate"] for m in rows]),
        "proposer_reward_mean": _avg(
            [m["proposer_reward_mean"] for m in rows if m.get("proposer_reward_mean") is not None]
        ),
        "solver_reward_mean": _avg(
            [m["solver_reward_mean"] for m in rows if m.get("solver_reward_mean") is not None]
        ),
        "frontier_group_share": _avg([1.0 if 0 < p < 1 else 0.0 for p in rates]),
        # the solver groups the trainer learned from that had reward variance (nonzero GRPO advantage)
        "batch_frontier_groups": sum(m.get("batch_frontier_groups", 0) for m in rows),
        "batch_groups": len(rows) * cfg.train.questions_per_step,
        # a consolidation still running after the last step is committed at the end (Orchestrator.finish):
        # it is the run's too, and the bank's final size is after it
        "consolidations": [m["consolidation"] for m in rows if m.get("consolidation")]
        + ([{**final, "after_last_step": True}] if final else []),
        "final_bank_size": _bank_size(run_dir) if final else (rows[-1].get("bank_size") if rows else None),
        "policies": {r: str(run_dir / "policies" / r) for r in ROLES},
        "memory_mode": cfg.memory.mode,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def _bank_size(run_dir: Path) -> int | None:
    """Skills in the run's bank as its files say (None without a readable bank)."""
    from sesa_graph.memory.snapshot import live_skills

    try:
        return len(live_skills(run_dir / "bank"))
    except (OSError, ValueError):
        return None


def _avg(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None
