"""The prepared CUDA check: the real trainer job on one GPU, in minutes, with the figures that show it learns.

``scripts/gpu_check.sh`` (or ``python -m training.gpu_check``) builds a random-initialised Qwen3 of the GPU
config's policy shape (training.model_shapes, no download), writes a run directory whose config is the GPU
config's trainer settings on one rank -- ``accelerate launch`` with FSDP2, fp32 master weights, bf16 compute,
GRPO with its reference model, the config's sequence lengths -- and starts the solver's trainer job with the
command ``sesa train`` uses. It then plays the orchestrator: it takes the published weights of step 0, commits
one step of full-length rollouts, waits for the weights after the step's updates and stops the job (so no
checkpoint is written). It prints and writes as JSON (OUT/gpu_check.json): tokens/s, MFU against the card's
dense bf16 peak, the rank's peak memory (torch.cuda.max_memory_allocated, as the rank reports it with its
update) beside the memory plan's prediction, TRL's loss and grad_norm, and the L2 norm of the weight change.
It exits 1 when a figure says the update did not happen (weights unchanged, grad_norm not finite, no FSDP).

``--cpu`` runs the same path with a 2-layer model and short sequences on CPU (accelerate runs FSDP on GPU
device types only, so the CPU rank runs without it): CI runs it (tests/training/test_gpu_check.py).
docs/GPU-CHECK.md says how to run it through the device tool and what one GPU cannot check.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn

from tools.errors import UserError

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = ROOT / "configs" / "qwen3-4b-8xa100.yaml"
ROLE = "solver"
EXAMPLES = """examples:
  bash scripts/gpu_check.sh --bundle        here, where pip reaches PyPI: .gpu-check-bundle/ (~8 MiB)
  bash scripts/gpu_check.sh --out "$OUT"    on the GPU (device tool: carry .gpu-check-bundle), ~5 minutes
  bash scripts/gpu_check.sh --cpu           the tiny CPU mode CI runs, ~35 s"""


class CheckFailed(RuntimeError):
    """The trainer job failed or stalled: the message names its log and ends with its last lines."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # one line, as the check's other user errors, instead of the usage block
        self.exit(2, f"gpu_check: {message} (--help lists the options)\n")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = _Parser(
        prog="gpu_check",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "-c", "--config", type=Path, default=DEFAULT_CONFIG, help="the GPU config whose trainer is checked"
    )
    ap.add_argument(
        "--model",
        help="a Qwen3 of training.model_shapes (default: the config's policy, or on a GPU too small for its "
        "planned rank the largest Qwen3 that fits)",
    )
    ap.add_argument("--cpu", action="store_true", help="the tiny CPU mode (2 layers, short sequences)")
    ap.add_argument(
        "--questions",
        type=int,
        default=2,
        help="solver groups in the step (x group_size rollouts; default 2)",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=ROOT / "benchmarks" / "out" / "gpu-check",
        help="folder for gpu_check.json and trainer.log (default benchmarks/out/gpu-check, git-ignored)",
    )
    ap.add_argument("--workdir", type=Path, help="the run directory's parent (default: a temporary folder)")
    ap.add_argument(
        "--tokenizer", help="tokenizer folder (default: the bundle's, else the embedded SmolLM2's)"
    )
    ap.add_argument(
        "--peak-tflops", type=float, help="the card's dense bf16 peak, where it is not in the table"
    )
    ap.add_argument(
        "--timeout-s",
        type=float,
        default=360.0,
        help="longest wait for the trainer's two publishes (default 360)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the run directory (model, weights, logs)")
    ap.add_argument(
        "--bundle",
        type=Path,
        metavar="DIR",
        help="instead of checking: download the wheels and tokenizer a GPU image without registry access needs",
    )
    args = ap.parse_args(argv)
    if args.questions < 1:
        ap.error("--questions must be at least 1")
    if args.cpu and args.model:
        ap.error("--model names a GPU model; the CPU mode trains its own 2-layer one")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        if args.bundle is not None:
            from training.gpu_check_parts import bundle

            made = bundle(args.bundle)
            print(f"bundle: {made['dir']}, {made['mib']:.1f} MiB: {', '.join(made['pins'])} and tokenizer/")
            return
        result = run(args)
    except UserError as exc:
        print(f"gpu_check: {exc}", file=sys.stderr)
        sys.exit(2)
    except CheckFailed as exc:
        print(f"gpu_check: FAILED: {exc}", file=sys.stderr)
        sys.exit(1)
    print(summary(result))
    sys.exit(0 if result["ok"] else 1)


@dataclass
class Target:
    """What the check trains: the model's name and shape, the sequence lengths, and the card it runs on."""

    name: str
    shape: Any
    prompt: int
    completion: int
    card: str
    capacity_gib: float | None


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import yaml

    from sesa_graph.config import load_config
    from sesa_graph.fsutil import dump_yaml
    from tools.ports import free_ports
    from training import gpu_check_parts as parts

    device = "cpu" if args.cpu else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError(
            "no CUDA device is visible here: run it on a GPU machine, or pass --cpu for the CPU mode"
        )
    if not args.config.is_file():
        raise UserError(f"no config at {args.config}")
    base = yaml.safe_load(args.config.read_text())
    if not isinstance(base, dict) or not isinstance(base.get("train"), dict):
        raise UserError(f"{args.config} has no train: section to check")
    tokenizer = args.tokenizer or _default_tokenizer()
    args.out.mkdir(parents=True, exist_ok=True)
    parent = args.workdir or Path(tempfile.mkdtemp(prefix="sesa-gpu-check-"))
    run_dir, model_dir = parent / "gpu-check", parent / "model"
    t0 = time.monotonic()
    try:
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        raw = parts.check_config(base, model_dir, device, args.questions, free_ports(2))
        (run_dir / "config.yaml").write_text(dump_yaml(raw))
        cfg = load_config(run_dir / "config.yaml")
        target = _target(args, base, cfg)
        vocab = min(target.shape.vocab_size, parts.build_model(model_dir, target.shape, tokenizer, device))
        built = time.monotonic()
        job = _drive(
            run_dir, cfg, parts.step_rows(cfg, ROLE, target.prompt, target.completion, vocab), args.timeout_s
        )
        job["wall_s"]["config_and_model"] = round(built - t0, 1)
        change = parts.weight_change(job["before"], job["after"], device)
    finally:
        if (log := run_dir / "logs" / f"{ROLE}-trainer.log").exists():
            shutil.copy(log, args.out / "trainer.log")
        if not args.keep:
            shutil.rmtree(parent if args.workdir is None else run_dir, ignore_errors=True)
            shutil.rmtree(model_dir, ignore_errors=True)
    result = _report(args, cfg, target, job, change)
    result["wall_s"]["total"] = round(time.monotonic() - t0, 1)
    result["problems"] = problems(result)
    result["ok"] = not result["problems"]
    (args.out / "gpu_check.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    return result


def _target(args: argparse.Namespace, base: dict, cfg: Any) -> Target:
    """The tiny CPU model, or the config's policy on this GPU (a smaller Qwen3 where its rank cannot fit)."""
    import torch

    from training import gpu_check_parts as parts
    from training.memory_plan import GIB
    from training.model_shapes import SHAPES

    if args.cpu:
        return Target(
            "tiny Qwen3 (2 layers)", parts.TINY, parts.TINY_PROMPT, parts.TINY_COMPLETION, "cpu", None
        )
    if not torch.cuda.is_available():
        raise UserError(
            "no CUDA device is visible here: run it on a GPU machine, or pass --cpu for the CPU mode"
        )
    policy = base.get("solver_policy") or {}
    wanted = args.model or policy.get("train_model") or policy.get("model")
    if wanted not in SHAPES:
        raise UserError(f"model {wanted!r} is not in training.model_shapes.SHAPES ({', '.join(SHAPES)})")
    capacity = torch.cuda.get_device_properties(0).total_memory / GIB
    rows_per_update = cfg.train.questions_per_step * cfg.solver.group_size // cfg.train.updates_per_step
    name = wanted if args.model else parts.pick_model(wanted, cfg.train, rows_per_update, capacity)
    completion = cfg.train.max_completion_length
    return Target(
        name, SHAPES[name], parts.PROMPT_TOKENS, completion, torch.cuda.get_device_name(0), capacity
    )


def _report(args: argparse.Namespace, cfg: Any, target: Target, job: dict, change: dict) -> dict[str, Any]:
    from training import gpu_check_parts as parts

    update, t = job["update"], cfg.train
    rows = t.questions_per_step * cfg.solver.group_size
    flops = parts.flops_per_step(target.shape, cfg, target.prompt, target.completion, rows)
    peak = args.peak_tflops * 1e12 if args.peak_tflops else parts.peak_bf16(target.card)
    took = update.get("update_s")
    tokens = rows * (target.prompt + target.completion)
    memory = parts.plan_memory(target.shape, t, not args.cpu, rows // t.updates_per_step)
    measured = update.get("host_peak_rss_gib" if args.cpu else "cuda_peak_allocated_gib")
    # the host's resident set holds the process the plan's overhead line guesses; torch's allocator does not
    against = memory["plan_gib"] if args.cpu else memory["plan_allocated_gib"]
    memory.update(
        measured_gib=measured,
        measured_is="host peak RSS (ru_maxrss)" if args.cpu else "torch.cuda.max_memory_allocated",
        measured_over_plan=measured / against if measured else None,
        cuda_peak_reserved_gib=update.get("cuda_peak_reserved_gib"),
        host_peak_rss_gib=update.get("host_peak_rss_gib"),
        capacity_gib=target.capacity_gib,
    )
    bundled = os.environ.get("SESA_GPU_CHECK_BUNDLE")
    shape = target.shape
    return {
        "mode": "cpu" if args.cpu else "cuda",
        "card": target.card,
        "versions": parts.versions(),
        "unmet_requirements": parts.unmet_requirements(Path(bundled)) if bundled else [],
        "config": str(args.config),
        "model": {"name": target.name, "params": shape.params, "shape": asdict(shape), "random_init": True},
        "batch": {
            "rollouts": rows,
            "prompt_tokens": target.prompt,
            "completion_tokens": target.completion,
            "updates": t.updates_per_step,
            "micro_batch": t.micro_batch_size,
        },
        "launch": {**job["launch"], "param_dtype": t.param_dtype, "sharding": t.sharding},
        "tokens": tokens,
        "update_s": took,
        "tokens_per_s": tokens / took if took else None,
        "model_flops": flops,
        "peak_bf16_flops": peak,
        "mfu": flops["per_step"] / took / peak if took and peak else None,
        "memory": memory,
        "learning": {k: update.get(k) for k in ("loss", "grad_norm", "kl", "entropy", "learning_rate")}
        | {"updates_logged": job["logged"]}
        | change,
        "wall_s": job["wall_s"],
    }


def _default_tokenizer() -> str:
    bundled = os.environ.get("SESA_GPU_CHECK_BUNDLE")
    if bundled and (Path(bundled) / "tokenizer" / "tokenizer.json").is_file():
        return str(Path(bundled) / "tokenizer")
    from sesa_graph.embedded import resolve_policy_model

    try:
        return resolve_policy_model("embedded")
    except FileNotFoundError as exc:
        raise UserError(f"no tokenizer: pass --tokenizer, or make a bundle with --bundle ({exc})") from None


def _drive(run_dir: Path, cfg: Any, rows: list[Any], timeout_s: float) -> dict[str, Any]:
    """The orchestrator's side for one step: start the job, keep the weights of step 0, commit the rows, wait
    for the weights after the step's updates, stop the job (before it would write a checkpoint)."""
    from training.coordinator import Coordinator
    from training.store import TrajectoryStore
    from training.sync import SyncDir
    from training.trainer_jobs import JOB_ENV_DEFAULTS, process_start_time, trainer_command

    text = (run_dir / "config.yaml").read_text()
    coord = Coordinator(cfg.cluster, text, {"run": str(run_dir)})
    cmd = trainer_command(cfg, run_dir, ROLE, coord.address)
    env = {
        **JOB_ENV_DEFAULTS,
        **os.environ,
        "TOKENIZERS_PARALLELISM": "false",
        "TRL_EXPERIMENTAL_SILENCE": "1",
    }
    env.update(
        SESA_ORCHESTRATOR_PID=str(os.getpid()), SESA_ORCHESTRATOR_START=process_start_time(os.getpid()) or ""
    )
    (run_dir / "logs").mkdir(exist_ok=True)
    log = run_dir / "logs" / f"{ROLE}-trainer.log"
    t0 = time.monotonic()
    with open(log, "a") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + timeout_s
        first = _wait_ready(coord, proc, 0, deadline, log)
        started = time.monotonic()
        before = run_dir / "before"
        before.mkdir()
        for f in Path(first["weights"]["path"]).iterdir():
            os.link(f, before / f.name)  # the trainer replaces the folder with step 1's: keep these files
        store = TrajectoryStore(run_dir)
        store.write(0, ROLE, rows)
        SyncDir(run_dir).commit(0, {"step": 0})
        coord.commit(0, {ROLE: store.path(0, ROLE).read_bytes()}, {"step": 0})
        committed = time.monotonic()
        second = _wait_ready(coord, proc, 1, deadline, log)
        done = time.monotonic()
    finally:
        _stop(proc)
        coord.close()
    autocast, distributed = _launch_facts(log)
    return {
        "logged": _logged_updates(log),
        "before": before,
        "after": Path(second["weights"]["path"]),
        "update": second.get("update") or {},
        "launch": {"command": cmd, "autocast": autocast, "distributed_type": distributed},
        "wall_s": {
            "start_to_step0_weights": round(started - t0, 1),
            "commit_to_step1_weights": round(done - committed, 1),
        },
    }


def _wait_ready(coord: Any, proc: subprocess.Popen, step: int, deadline: float, log: Path) -> dict[str, Any]:
    from training.trainer_jobs import tail

    while (msg := coord.ready(ROLE, step)) is None:
        trouble = coord.trainer_trouble((ROLE,))
        if proc.poll() is not None or trouble:
            raise CheckFailed(
                f"the trainer job stopped before publishing step {step}'s weights (exit {proc.returncode}): "
                f"{trouble or ''} see {log}\n{tail(log, 30)}"
            )
        if time.monotonic() > deadline:
            raise CheckFailed(f"no step {step} weights within --timeout-s; see {log}\n{tail(log, 30)}")
        time.sleep(0.2)
    return msg


def _stop(proc: subprocess.Popen) -> None:
    """The job's whole process group (launcher and rank): SIGTERM, then SIGKILL after 20 s."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # a rank the launcher left behind
    except ProcessLookupError:
        pass


def _launch_facts(log: Path) -> tuple[str | None, str | None]:
    """The autocast and distributed type the rank logged (training.trainer: "autocast: bf16; distributed: FSDP")."""
    import re

    found = re.search(r"autocast: (\S+); distributed: (\S+)", log.read_text(errors="replace"))
    return (found.group(1), found.group(2)) if found else (None, None)


def _logged_updates(log: Path) -> list[dict[str, float]]:
    """TRL's numbers of every update, as transformers prints them to the job's log (one dict a line; the ready
    message carries only the last update's)."""
    import ast

    keys = ("loss", "grad_norm", "learning_rate", "kl", "entropy")
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{'loss'"):
            try:
                logged = ast.literal_eval(line)
            except (ValueError, SyntaxError):
                continue
            out.append({k: float(logged[k]) for k in keys if k in logged})
    return out


def problems(result: dict[str, Any]) -> list[str]:
    """What says the update did not happen as the GPU config asks."""
    learn, out = result["learning"], []
    norms = [u.get("grad_norm") for u in learn["updates_logged"]] or [learn.get("grad_norm")]
    if not all(isinstance(g, float) and math.isfinite(g) and g > 0 for g in norms):
        out.append(f"grad_norm {norms} is not a finite positive number every update")
    if not learn["weight_change_l2"] > 0:
        out.append("the published weights did not change over the step's updates")
    if learn["tensors_unchanged_count"]:
        out.append(
            f"{learn['tensors_unchanged_count']} tensors did not change, e.g. {learn['tensors_unchanged'][0]}"
        )
    if not result["tokens_per_s"]:
        out.append("the rank reported no update time")
    if result["memory"]["measured_gib"] is None:
        out.append("the rank reported no peak memory")
    fsdp = result["launch"]["sharding"] == "fsdp2"
    if result["mode"] == "cuda" and fsdp and result["launch"]["distributed_type"] != "FSDP":
        out.append(f"the rank ran under {result['launch']['distributed_type']}, not FSDP")
    return out


def summary(r: dict[str, Any]) -> str:
    m, learn, model, batch, launch = r["memory"], r["learning"], r["model"], r["batch"], r["launch"]

    def num(x: Any, spec: str) -> str:
        return "n/a" if x is None else format(x, spec)

    peak = f" of {r['peak_bf16_flops'] / 1e12:.0f} TFLOP/s" if r["peak_bf16_flops"] else " (no peak known)"
    overhead = m["plan_gib"] - m["plan_allocated_gib"]
    lines = [
        f"gpu_check on {r['card']}: {model['name']} ({model['params'] / 1e6:,.0f}M params), "
        + f"{batch['rollouts']} rollouts of {batch['prompt_tokens']}+{batch['completion_tokens']} tokens, "
        + f"{launch['distributed_type']}, autocast {launch['autocast']}",
        f"  update {num(r['update_s'], '.2f')} s: {num(r['tokens_per_s'], ',.0f')} tokens/s, "
        + f"MFU {num(r['mfu'], '.1%')}{peak}",
        f"  peak memory {num(m['measured_gib'], '.2f')} GiB ({m['measured_is']}); plan "
        + f"{m['plan_allocated_gib']:.2f} GiB allocated + {overhead:.1f} overhead",
        f"  loss {num(learn['loss'], '.4g')}, grad_norm {num(learn['grad_norm'], '.4g')}, weight change L2 "
        + f"{learn['weight_change_l2']:.4g} ({num(learn['relative_change'], '.3g')} of the weights' norm, "
        + f"{learn['changed_fraction']:.1%} of values moved)",
        "  OK" if r["ok"] else "  PROBLEMS: " + "; ".join(r["problems"]),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
