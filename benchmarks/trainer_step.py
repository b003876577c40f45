"""One role's real trainer job, alone on the machine, fed a finished run's own trajectory shards step by step:
the wall time of each update (the shard committed -> the next step's weights published) and of the job's
start and end, optionally with py-spy sampling the rank the whole time.

The job is started as ``sesa train`` starts it (``training.trainer_jobs.trainer_command``: launcher, threads,
environment) from the finished run's recorded config, with the orchestrator's side of the barrier played
here: a coordinator, each step's shard and commit. So the figures are the default run's updates without the
rollouts, the other trainer, the probes and the fixed models beside them.

    .venv/bin/python benchmarks/trainer_step.py runs/tiny-cpu --role solver
    .venv/bin/python benchmarks/trainer_step.py runs/tiny-cpu --role solver --py-spy /path/to/py-spy --svg prof.svg
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from train_run import tree_memory  # this folder's PSS sampler (the script's directory is on the path)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, help="A finished run's directory (its config.yaml and trajectories/).")
    ap.add_argument("--role", choices=["solver", "proposer"], default="solver")
    ap.add_argument("--steps", type=int, default=None, help="How many of its steps to feed (default: all).")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="train.KEY=VALUE",
        help="Override one of the recorded config's train settings (YAML value), e.g. train.micro_batch_size=2.",
    )
    ap.add_argument("--py-spy", default=None, help="A py-spy binary: record the job's processes.")
    ap.add_argument("--svg", type=Path, default=Path("trainer-step.svg"), help="py-spy's flame graph.")
    a = ap.parse_args()

    from sesa_graph.config import load_config
    from sesa_graph.fsutil import dump_yaml
    from training.coordinator import Coordinator
    from training.sync import SyncDir
    from training.trainer_jobs import trainer_command

    shards = sorted((a.run / "trajectories").glob(f"step-*/{a.role}.parquet"))
    if not shards:
        sys.exit(f"{a.run}/trajectories holds no {a.role}.parquet shards")
    shards = shards[: a.steps] if a.steps else shards
    raw = yaml.safe_load((a.run / "config.yaml").read_text())
    raw["name"] = "trainer-step-bench"
    raw.setdefault("train", {}).update(steps=len(shards), probe_every=0)
    for item in a.set:
        key, _, value = item.partition("=")
        if not key.startswith("train.") or not value:
            sys.exit(f"--set {item!r}: give train.KEY=VALUE")
        raw["train"][key.removeprefix("train.")] = yaml.safe_load(value)
    tmp = Path(tempfile.mkdtemp(prefix="trainer-step-"))
    run = tmp / raw["name"]
    run.mkdir()
    (run / "config.yaml").write_text(dump_yaml(raw))
    cfg = load_config(run / "config.yaml")
    coord = Coordinator(cfg.cluster, (run / "config.yaml").read_text(), {"run": str(run)})
    (run / "logs").mkdir()
    log = open(run / "logs" / f"{a.role}-trainer.log", "w")  # noqa: SIM115 - the child keeps it
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")
    t0 = time.perf_counter()
    job = subprocess.Popen(
        trainer_command(cfg, run, a.role, coord.address),
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=ROOT,
        start_new_session=True,
    )
    spy = None
    if a.py_spy:
        spy = subprocess.Popen(
            [a.py_spy, "record", "-p", str(job.pid), "--subprocesses", "-r", "50", "-o", str(a.svg)],
            stdout=subprocess.DEVNULL,
        )

    peak = [0]

    def wait_ready(step: int) -> float:
        t = time.perf_counter()
        while coord.ready(a.role, step) is None:
            if job.poll() is not None:
                sys.exit(f"the trainer exited {job.returncode}: {run}/logs/{a.role}-trainer.log")
            peak[0] = max(peak[0], sum(tree_memory(job.pid).values()))
            time.sleep(0.5)
        return time.perf_counter() - t

    try:
        print(f"start-up (weights of step 0 published): {wait_ready(0):.1f} s")
        for step, shard in enumerate(shards):
            SyncDir(run).commit(step, {"step": step})
            coord.commit(step, {a.role: shard.read_bytes()}, {"step": step})
            t = time.perf_counter()
            if step + 1 < len(shards):
                wait_ready(step + 1)
                print(f"update on step {step} ({shard.parent.name}): {time.perf_counter() - t:.1f} s")
        while coord.done(a.role) is None and job.poll() is None:
            time.sleep(0.1)
        print(f"the last update and the final save: {time.perf_counter() - t:.1f} s")
        job.wait(120)
        print(f"peak PSS of the job's processes (sampled every 0.5 s): {peak[0] / 2**20:.2f} GiB")
        print(f"all: {time.perf_counter() - t0:.1f} s; log {run}/logs/{a.role}-trainer.log")
    finally:
        if job.poll() is None:
            job.kill()
        if spy is not None:
            spy.wait(60)
        coord.close()
        shutil.rmtree(run / "checkpoints", ignore_errors=True)


if __name__ == "__main__":
    main()
