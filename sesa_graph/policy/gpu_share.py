"""Which processes of a run share a GPU, so that their start-ups can be taken one at a time.

vLLM sizes its KV cache from the device's free memory measured before and after its profiling run, and
asserts when free memory grows meanwhile (vllm-project/vllm #55827, #56830): a second server or a trainer
loading on the same GPU during that window makes the first mis-size its cache or fail. Processes on different
GPUs, and CPU processes, start side by side.
"""

from __future__ import annotations

from typing import Any

ALL = frozenset({"*"})  # every GPU the process can see: CUDA_VISIBLE_DEVICES unset and a bare 'cuda' device


def gpus_of(device: str, visible: str | None) -> frozenset[str] | None:
    """The GPUs a process on ``device`` with CUDA_VISIBLE_DEVICES ``visible`` uses; None on the CPU."""
    if not device.startswith("cuda"):
        return None
    if visible is not None and visible.strip():
        return frozenset(g.strip() for g in visible.split(",") if g.strip())
    _, _, index = device.partition(":")
    return frozenset({index}) if index else ALL


def share_a_gpu(a: frozenset[str] | None, b: frozenset[str] | None) -> bool:
    if a is None or b is None:
        return False
    return a is ALL or b is ALL or bool(a & b)


def trainers_share_server_gpus(cfg: Any) -> bool:
    """A run config (``RunConfig``) whose trainers would load on a GPU that one of its vLLM servers (a
    policy's or a fixed model's) sizes itself on: its trainers then start once the servers are healthy."""
    t = cfg.train
    policies = {"solver": cfg.solver_policy, "proposer": cfg.proposer_policy}
    servers = [
        gpus_of(p.device, t.vllm_gpus.get(role)) for role, p in policies.items() if p.backend == "vllm"
    ] + [
        gpus_of(m.serve.device, m.cuda_visible_devices)
        for m in cfg.models.values()
        if m.serve is not None and m.serve.backend == "vllm"
    ]
    trainers = [gpus_of(p.device, t.trainer_gpus.get(role)) for role, p in policies.items()]
    return any(share_a_gpu(a, b) for a in trainers for b in servers)
