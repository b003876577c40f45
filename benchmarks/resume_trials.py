"""Kill a part of `sesa train` with SIGKILL at a random moment, resume it, and check the final state.

    .venv/bin/python benchmarks/resume_trials.py [--trials 3] [--config configs/tiny-cpu.yaml]
                                                 [--victims orchestrator,server,trainer]

Each trial: start a run; for each victim in turn, wait until one more step is committed plus a random
delay and kill -9 it -- ``orchestrator``: the whole `sesa train` process group; ``server``: one policy's
vLLM server (its process group: API server, engine, worker); ``trainer``: one GRPO trainer -- and, for a
server or trainer, check that `sesa train` stops with an error naming it; then `sesa train --resume`.
At the end: every step committed exactly once, every step's shards exist, both trainers reached the last
step (checkpoints), both final policies were written, and no trainer or server process is left.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _train(args: list[str], **kw) -> subprocess.Popen:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return subprocess.Popen(
        [sys.executable, "-m", "sesa_cli.main", "train", *args],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=kw.get("stdout"),
        stderr=subprocess.STDOUT,
    )


def trainers_alive(run_dir: Path) -> list[int]:
    from training.trainer_jobs import live_trainer_processes

    return live_trainer_processes(run_dir)


def check(run_dir: Path, steps: int) -> dict:
    from training.store import TrajectoryStore
    from training.sync import SyncDir

    committed = SyncDir(run_dir).committed_steps()
    from training.metrics_log import read_metrics

    step_lines = read_metrics(run_dir).steps  # per step the latest attempt's record (resumes append)
    store = TrajectoryStore(run_dir)
    problems = []
    if committed != list(range(steps)):
        problems.append(f"committed steps {committed}")
    if sorted(step_lines) != list(range(steps)):
        problems.append(f"metrics steps {step_lines}")
    for s in range(steps):
        for role in ("proposer", "solver"):
            if not store.exists(s, role):
                problems.append(f"missing {role} shard of step {s}")
    for role in ("proposer", "solver"):
        if not (run_dir / "checkpoints" / role / f"checkpoint-{steps}").exists():
            problems.append(f"{role} trainer did not reach step {steps}")
        if not (run_dir / "policies" / role / ".complete").exists():
            problems.append(f"{role} final policy missing")
    if trainers_alive(run_dir):
        problems.append("trainer processes left behind")
    from sesa_graph.policy.vllm_server import owned_processes

    if left := owned_processes(str(run_dir.resolve())):
        problems.append(f"policy server processes left behind: {left}")
    pool = run_dir / "reuse_pool.json"
    entries = json.loads(pool.read_text()) if pool.exists() else []
    questions = [e["question"] for e in entries]
    if len(set(questions)) != len(questions):
        problems.append("a question is twice in the reuse pool")
    late = [
        e for e in entries if e.get("step", -1) >= steps or any(int(k) >= steps for k in e.get("rates", {}))
    ]
    if late:
        problems.append(f"{len(late)} reuse pool entries from steps that never ran")
    return {"committed": committed, "problems": problems}


def _kill(victim: str, p: subprocess.Popen, run_dir: Path, rng: random.Random) -> str:
    if victim == "orchestrator":
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        return "orchestrator"
    pids = json.loads((run_dir / "sync" / f"{victim}_pids.json").read_text())
    role = rng.choice(sorted(pids))
    if victim == "server":
        os.killpg(pids[role], signal.SIGKILL)  # its own session: API server, engine core and worker
    else:
        os.kill(pids[role], signal.SIGKILL)
    rc = p.wait(timeout=900)
    if rc == 0:
        raise RuntimeError(f"`sesa train` exited 0 after its {role} {victim} was killed")
    return f"{role} {victim} (train exited {rc})"


def trial(
    runs_dir: Path,
    config: Path,
    name: str,
    steps: int,
    max_delay_s: float,
    seed: int,
    log,
    victims: tuple[str, ...] = ("orchestrator",),
) -> dict:
    run_dir = runs_dir / name
    rng = random.Random(seed)
    kills = []
    for i, victim in enumerate(victims):
        args = (
            ["-c", str(config), "--runs-dir", str(runs_dir), "--name", name, "--steps", str(steps)]
            if i == 0
            else ["--resume", str(run_dir)]
        )
        p = _train(args, stdout=log)
        t0 = time.time()
        while not (run_dir / "sync" / f"committed-{i}.json").exists():
            if p.poll() is not None:
                raise RuntimeError(f"run ended (rc {p.returncode}) before step {i} was committed")
            if time.time() - t0 > 3600:
                raise TimeoutError(f"step {i} never committed")
            time.sleep(0.5)
        delay = rng.uniform(0, max_delay_s)
        time.sleep(delay)
        committed = sorted(int(f.stem.split("-")[1]) for f in (run_dir / "sync").glob("committed-*.json"))
        kills.append(
            {"victim": _kill(victim, p, run_dir, rng), "delay_s": round(delay, 1), "committed": committed}
        )
    r = _train(["--resume", str(run_dir)], stdout=log)
    rc = r.wait(timeout=3600)
    if rc != 0:
        raise RuntimeError(f"resume exited {rc}")
    time.sleep(1)
    return {"kills": kills, **check(run_dir, steps)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "tiny-cpu.yaml")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--runs-dir", type=Path, default=ROOT / "runs" / "resume-trials")
    ap.add_argument("--max-delay", type=float, default=60.0)
    ap.add_argument(
        "--victims",
        default="orchestrator",
        help="comma-separated, killed in this order, one per committed step: orchestrator | server | trainer",
    )
    args = ap.parse_args()
    victims = tuple(v.strip() for v in args.victims.split(","))
    if bad := [v for v in victims if v not in ("orchestrator", "server", "trainer")]:
        ap.error(f"--victims: unknown {bad}; choose orchestrator, server, trainer")
    args.runs_dir.mkdir(parents=True, exist_ok=True)
    with open(args.runs_dir / "trials.log", "a") as log:
        for i in range(args.trials):
            res = trial(
                args.runs_dir,
                args.config,
                f"trial-{int(time.time())}-{i}",
                args.steps,
                args.max_delay,
                i,
                log,
                victims,
            )
            print(json.dumps(res))


if __name__ == "__main__":
    main()
