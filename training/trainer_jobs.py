"""The two trainer jobs: one launcher job per role (torchrun or ``accelerate launch``; a plain process when one
rank needs no launcher), each with this node's share of its ranks and its own rendezvous port, pointed at the
orchestrator's coordinator, stopped on every exit. ``sesa train`` starts them on its own machine
(``cluster.trainers: local``, 127.0.0.1); ``sesa trainers`` starts one node's share elsewhere (``Node``).

Jobs that ``sesa train`` starts learn who started it from ``SESA_ORCHESTRATOR_PID``/``_START`` (the pid and its
kernel start time, so a reused pid is not taken for the orchestrator): their ranks stop by themselves within
about a second of ``sesa train`` dying, whatever the launcher (``training.ranks``). Every job also gets SIGTERM
when the process that started it dies, and its rank 0 watches the orchestrator's heartbeat."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from sesa_graph.config import RunConfig
from sesa_graph.owner_lock import is_process, process_cmdline, process_start_time
from sesa_graph.precision import resolve_compute_dtype
from sesa_graph.process import die_with_parent
from training.tracking import TRACKER_PROJECT

ROLES = ("proposer", "solver")
ROOT = Path(__file__).resolve().parent.parent
PIDS = "trainer_pids.json"


@dataclass(frozen=True)
class Node:
    """This machine's place among the trainer nodes (one machine: node 0 of 1 on 127.0.0.1)."""

    rank: int = 0
    count: int = 1
    main_address: str = "127.0.0.1"


# the accelerate config every job launched by `accelerate launch` uses instead of the user's default one
ACCELERATE_CONFIG = Path(__file__).with_name("accelerate_job.yaml")
# A job's environment unless the user's sets them. On GPUs the caching allocator grows segments instead of
# fragmenting on variable-length batches (PyTorch's own advice for them), and a failed or stuck NCCL collective
# raises in the rank instead of hanging it (the run's watchdogs then name it); neither acts on CPU jobs.
JOB_ENV_DEFAULTS = {
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    # transformers' wandb callback takes its project from here (trackio's from GRPOConfig.project)
    "WANDB_PROJECT": TRACKER_PROJECT,
}


def launcher_command(cfg: RunConfig, role: str, node: Node = Node()) -> list[str]:
    """The command that starts ``role``'s trainer job on ``node``, before the trainer's own arguments.

    torchrun and ``accelerate launch --multi_gpu`` both run torch.distributed's elastic agent (static
    rendezvous at the main address and the role's port); on a CPU the ranks talk over gloo (the trainer picks
    the backend), so CI runs the GPU configs' launcher as it is.
    """
    t = cfg.train
    ranks, port = t.ranks(role), t.rendezvous_ports[role]
    per_node = ranks // node.count
    # the rendezvous waits this long for the other nodes (torch's own default: 600 s); a node that never comes
    # then fails the job, which `sesa trainers` reports to the orchestrator
    wait = [f"timeout={int(t.join_timeout_s)}"] if node.count > 1 else []
    if not t.trainer_launcher:
        return [sys.executable]
    name = t.trainer_launcher[0]
    # the launcher installed beside this interpreter (the venv's), not whatever PATH finds first
    beside = Path(sys.executable).parent / name
    exe = str(beside) if beside.is_file() else name
    rest = t.trainer_launcher[1:]
    if name == "torchrun":
        return [
            exe,
            "--nnodes",
            str(node.count),
            "--node-rank",
            str(node.rank),
            "--nproc-per-node",
            str(per_node),
            "--master-addr",
            node.main_address,
            "--master-port",
            str(port),
            *(["--rdzv-conf", *wait] if wait else []),
            *rest,
        ]
    # accelerate launch: --multi_gpu is its torch.distributed launcher (which also runs CPU ranks); the
    # trainer's own bf16 flag decides the precision, so the launcher is told the same instead of a default
    extra = [a for a in rest[1:] if a != "--multi_gpu"]
    pcfg = cfg.solver_policy if role == "solver" else cfg.proposer_policy
    bf16 = resolve_compute_dtype(t.compute_dtype, pcfg.device) == "bfloat16"
    # accelerate refuses --multi_gpu for one process and its plain launcher starts no torch.distributed, under
    # which transformers refuses FSDP: one fsdp2 GPU rank needs accelerate's FSDP launcher
    one_fsdp = ranks == 1 and t.sharding == "fsdp2" and pcfg.device.startswith("cuda")
    return [
        exe,
        *t.trainer_launcher[1:2],
        "--config_file",
        str(ACCELERATE_CONFIG),
        *(["--multi_gpu"] if ranks > 1 else ["--use_fsdp", "--fsdp_version", "2"] if one_fsdp else []),
        "--num_processes",
        str(ranks),
        "--num_machines",
        str(node.count),
        "--machine_rank",
        str(node.rank),
        "--main_process_ip",
        node.main_address,
        "--main_process_port",
        str(port),
        "--mixed_precision",
        "bf16" if bf16 else "no",
        "--dynamo_backend",
        "no",
        *(["--rdzv_conf", *wait] if wait else []),
        *extra,
    ]


def trainer_command(
    cfg: RunConfig, workdir: Path, role: str, coordinator: str, node: Node = Node()
) -> list[str]:
    """The whole command of ``role``'s trainer job; a launcher named without a path runs from this Python's
    environment (the venv's torchrun/accelerate)."""
    cmd = launcher_command(cfg, role, node)
    local = Path(sys.executable).parent / cmd[0]
    if "/" not in cmd[0] and local.exists():
        cmd = [str(local), *cmd[1:]]
    return [
        *cmd,
        "-m",
        "training.trainer",
        str(workdir.resolve()),
        "--role",
        role,
        "--coordinator",
        coordinator,
        "--connect-timeout-s",
        str(cfg.cluster.connect_timeout_s),
    ]


class TrainerProcesses:
    """Both roles' trainer jobs: start, watch (a dead job is named with its failed rank's log), stop."""

    def __init__(
        self, run_dir: Path, cfg: RunConfig, coordinator: str, node: Node = Node(), local: bool = True
    ) -> None:
        """``run_dir``: the jobs' working folder (local trainers: the run directory); ``local``: started by
        ``sesa train`` itself, whose death its ranks then notice by pid too."""
        self.run_dir = run_dir
        self.cfg = cfg
        self.coordinator, self.node, self.local = coordinator, node, local
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}

    def start(self) -> None:
        (self.run_dir / "logs").mkdir(exist_ok=True)
        me = os.getpid()
        env = {
            **JOB_ENV_DEFAULTS,
            **os.environ,
            "TOKENIZERS_PARALLELISM": "false",
            "TRL_EXPERIMENTAL_SILENCE": "1",
        }
        if self.local:
            env.update(SESA_ORCHESTRATOR_PID=str(me), SESA_ORCHESTRATOR_START=process_start_time(me) or "")
        gpus = self.cfg.train.trainer_gpus
        for role in ROLES:
            log = self.run_dir / "logs" / f"{role}-trainer.log"
            self.logs[role] = log
            cmd = trainer_command(self.cfg, self.run_dir, role, self.coordinator, self.node)
            role_env = dict(env, CUDA_VISIBLE_DEVICES=gpus[role]) if role in gpus else env
            self.procs[role] = subprocess.Popen(
                cmd,
                stdout=open(log, "a"),  # noqa: SIM115 - the child keeps it
                stderr=subprocess.STDOUT,
                env=role_env,
                start_new_session=True,
                cwd=ROOT,
                preexec_fn=die_with_parent,  # noqa: PLW1509 - it only calls prctl, takes no locks
            )
        (self.run_dir / "sync").mkdir(exist_ok=True)
        # pid, kernel start time and command line: a later owner of the run kills only these very processes
        record = {
            r: {"pid": p.pid, "start": process_start_time(p.pid), "cmd": process_cmdline(p.pid)}
            for r, p in self.procs.items()
        }
        (self.run_dir / "sync" / PIDS).write_text(json.dumps(record))

    def failed(self) -> tuple[str, str] | None:
        """(role, message) of a trainer job that exited with an error: its failed rank and that rank's log."""
        for role, p in self.procs.items():
            rc = p.poll()
            if rc is not None and rc != 0:
                return role, failure_message(role, rc, self.logs[role])
        return None

    def dead(self) -> str | None:
        """A message naming a trainer job that exited with an error, its failed rank and that rank's log."""
        failed = self.failed()
        return failed[1] if failed else None

    def tail(self, role: str, n: int = 25) -> str:
        return tail(self.logs[role], n)

    def wait(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for role, p in self.procs.items():
            while p.poll() is None:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the {role} trainer did not finish its last step in {timeout_s:.0f}s")
                if (msg := self.dead()) is not None:
                    raise RuntimeError(msg)
                time.sleep(0.5)
            if p.returncode != 0:
                raise RuntimeError(self.dead() or f"the {role} trainer failed")

    def stop(self) -> None:
        """SIGTERM each job's process group (launcher and ranks), SIGKILL what is left after 20 s."""
        for p in self.procs.values():
            if p.poll() is None:
                _signal_group(p.pid, signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                _signal_group(p.pid, signal.SIGKILL)
                p.wait()
            _signal_group(p.pid, signal.SIGKILL)  # a rank the launcher left behind


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def tail(path: Path, n: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def rank_log(log: Path, rank: int) -> Path:
    """Where rank ``rank`` of a job logging to ``log`` writes: rank 0 the job's log, the others their own."""
    return log if rank == 0 else log.with_name(f"{log.stem}.rank{rank}{log.suffix}")


_FAILED_RANK = re.compile(r"Root Cause.*?rank\s*:\s*(\d+)", re.DOTALL)


def failure_message(role: str, rc: int, log: Path) -> str:
    """The job's exit named with the rank the launcher reports as the first failure, and that rank's log."""
    text = tail(log, 200)
    found = _FAILED_RANK.search(text)
    hint = trainer_oom_hint(rc, text)
    if found is None:
        return f"the {role} trainer exited with code {rc}{hint}; last lines of {log}:\n{tail(log)}"
    rank = int(found.group(1))
    own = rank_log(log, rank)
    return (
        f"the {role} trainer's rank {rank} failed (the job exited with code {rc}){hint}; last lines of "
        f"{own}:\n{tail(own)}\n(the launcher's report: {log})"
    )


def trainer_oom_hint(rc: int, log_text: str) -> str:
    """The out-of-memory hint for a trainer job killed by SIGKILL, naming what shrinks a trainer."""
    from tools.exits import oom_hint

    return oom_hint(
        rc,
        log_text,
        "train.micro_batch_size or train.max_completion_length (a trainer's memory grows with both)",
    )


def live_trainer_processes(run_dir: Path) -> list[int]:
    """Pids of the live (not zombie) processes whose command line runs a trainer of ``run_dir``: launchers
    and ranks alike."""
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if "training.trainer" in cmd and str(run_dir) in cmd and state != "Z":
                out.append(int(proc.name))
    return out


def kill_stale_trainers(run_dir: Path, say=print) -> None:
    """Trainer jobs of a killed run may still be finishing a step; they must not write beside the new ones.
    Only for the run's owner (its lock held, so no live ``sesa train`` has them): a job is killed -- its
    process group, launcher and ranks -- only when its pid still names the process recorded (same kernel
    start time) and that process runs a trainer of this run; anything else is left alone."""
    pids = run_dir / "sync" / PIDS
    if not pids.exists():
        return
    try:
        found = json.loads(pids.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        found = f"not valid JSON ({exc})"
    if not isinstance(found, dict):
        say(f"{pids} is damaged ({found}), skipped: check that no trainer of this run is still running")
        return
    for role, rec in found.items():
        pid, start = (rec.get("pid"), rec.get("start")) if isinstance(rec, dict) else (rec, None)
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
            continue
        cmd = process_cmdline(pid)
        if cmd is None or "training.trainer" not in cmd or str(run_dir.resolve()) not in cmd:
            continue  # gone, or a reused pid that runs something else
        if start is not None and not is_process(pid, start):
            continue
        _signal_group(pid, signal.SIGKILL)
        say(f"stopped the {role} trainer job {pid} (and its ranks) left over from the interrupted run")
