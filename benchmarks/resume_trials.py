"""Kill `sesa train` with SIGKILL at a random moment, resume it, and check the final state.

    .venv/bin/python benchmarks/resume_trials.py [--trials 3] [--config configs/tiny-cpu.yaml]

Each trial: start a run, wait until step 0 is committed plus a random delay, kill -9 the whole
orchestrator process group, resume with `sesa train --resume`, and check that every step is committed
exactly once, every step's shards exist, both trainers reached the last step (checkpoints), both final
policies were written and no trainer process is left.
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
    return subprocess.Popen([sys.executable, "-m", "sesa_graph.cli", "train", *args], cwd=ROOT, env=env,
                            start_new_session=True, stdout=kw.get("stdout"), stderr=subprocess.STDOUT)


def trainers_alive(run_dir: Path) -> list[int]:
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "training.trainer" in cmd and str(run_dir) in cmd:
                out.append(int(proc.name))
    return out


def check(run_dir: Path, steps: int) -> dict:
    from training.store import TrajectoryStore
    from training.sync import SyncDir

    committed = SyncDir(run_dir).committed_steps()
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    step_lines = [m["step"] for m in lines if "step" in m]
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
    pool = run_dir / "reuse_pool.json"
    entries = json.loads(pool.read_text()) if pool.exists() else []
    questions = [e["question"] for e in entries]
    if len(set(questions)) != len(questions):
        problems.append("a question is twice in the reuse pool")
    late = [e for e in entries if e.get("step", -1) >= steps or any(int(k) >= steps for k in e.get("rates", {}))]
    if late:
        problems.append(f"{len(late)} reuse pool entries from steps that never ran")
    return {"committed": committed, "problems": problems}


def trial(runs_dir: Path, config: Path, name: str, steps: int, max_delay_s: float, seed: int, log) -> dict:
    run_dir = runs_dir / name
    p = _train(["-c", str(config), "--runs-dir", str(runs_dir), "--name", name, "--steps", str(steps)], stdout=log)
    t0 = time.time()
    while not (run_dir / "sync" / "committed-0.json").exists():
        if p.poll() is not None:
            raise RuntimeError(f"run ended (rc {p.returncode}) before step 0 was committed")
        if time.time() - t0 > 3600:
            raise TimeoutError("step 0 never committed")
        time.sleep(0.5)
    delay = random.Random(seed).uniform(0, max_delay_s)
    time.sleep(delay)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    killed_at = json.loads((run_dir / "sync" / "committed-0.json").read_text()) and sorted(
        int(f.stem.split("-")[1]) for f in (run_dir / "sync").glob("committed-*.json"))
    r = _train(["--resume", str(run_dir)], stdout=log)
    rc = r.wait(timeout=3600)
    if rc != 0:
        raise RuntimeError(f"resume exited {rc}")
    time.sleep(1)
    return {"delay_s": round(delay, 1), "committed_before_kill": killed_at, **check(run_dir, steps)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "tiny-cpu.yaml")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--runs-dir", type=Path, default=ROOT / "runs" / "resume-trials")
    ap.add_argument("--max-delay", type=float, default=60.0)
    args = ap.parse_args()
    args.runs_dir.mkdir(parents=True, exist_ok=True)
    with open(args.runs_dir / "trials.log", "a") as log:
        for i in range(args.trials):
            res = trial(args.runs_dir, args.config, f"trial-{int(time.time())}-{i}", args.steps, args.max_delay, i, log)
            print(json.dumps(res))


if __name__ == "__main__":
    main()
