"""The `cluster:` section of a run config: where a run's processes live when it leaves one machine.

One run is one orchestrator (`sesa train`: rollouts, the skill bank, the policy servers it starts) and two
trainer jobs (one per role). The orchestrator hosts a small key-value store (``torch.distributed.TCPStore``,
the coordinator) that carries every step's signals, trajectory shards and heartbeats; each trainer job's
rank 0 is its only client. Trainer jobs either start as children of `sesa train` (``trainers: local``, one
machine) or are started on other nodes by the user or a scheduler with ``sesa trainers`` (``external``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sesa_graph.model_config import Strict
from tools.ports import is_loopback


class ClusterConfig(Strict):
    """Processes across machines. The defaults are one machine: trainers started by `sesa train`, every
    socket on 127.0.0.1."""

    trainers: Literal["local", "external"] = Field(
        "local",
        description="'local': `sesa train` starts both trainer jobs on this machine. 'external': it starts none "
        "and waits for jobs started elsewhere with `sesa trainers --coordinator HOST:PORT` (one command per "
        "trainer node, e.g. from a Slurm script).",
    )
    trainer_nodes: int = Field(
        1,
        ge=1,
        description="Nodes each trainer job spans (launcher --nnodes). train.trainer_ranks gives a job's "
        "ranks over all of them, an equal share on each node. More than 1 needs trainers: external.",
    )
    coordinator_host: str = Field(
        "127.0.0.1",
        description="Interface the orchestrator's coordinator store binds, and the address trainer nodes "
        "connect to. Anything but loopback needs allow_remote: the store has no authentication, so name a "
        "private cluster interface, never a public one.",
    )
    coordinator_port: int | None = Field(
        None,
        ge=1024,
        le=65535,
        description="The coordinator store's port. None: a free port, which only local trainers can learn; "
        "trainers: external needs a fixed one.",
    )
    main_address: str | None = Field(
        None,
        description="The trainer jobs' rendezvous host (the first trainer node): the launchers' --master-addr. "
        "None: $MASTER_ADDR, else 127.0.0.1. Ports: train.rendezvous_ports.",
    )
    allow_remote: bool = Field(
        False,
        description="Opt in to binding or connecting anywhere but loopback (coordinator_host, main_address). "
        "Off, a non-loopback address is refused at load.",
    )
    weights: Literal["auto", "file", "store", "nccl"] = Field(
        "auto",
        description="How each step's trained weights reach the rollout policies. 'file': rank 0 writes "
        "safetensors into the run directory, which the orchestrator's node must see (one machine or a shared "
        "filesystem). 'store': rank 0 sends them through the coordinator, and the orchestrator writes them on "
        "its own disk for its servers -- no shared filesystem. 'nccl': TRL's NCCL transfer into vLLM server "
        "mode (train.use_vllm; GPUs only, untested). 'auto': file with local trainers, store with external.",
    )
    heartbeat_s: float = Field(
        1.0, gt=0, description="How often the orchestrator and each trainer job's rank 0 beat."
    )
    node_timeout_s: float = Field(
        30.0,
        gt=0,
        description="A trainer job, a trainer rank or the orchestrator whose heartbeat stops for this long is "
        "lost: the run stops with an error naming it (`sesa train --resume` continues). A killed process is "
        "noticed sooner, when its connections close.",
    )
    connect_timeout_s: float = Field(
        120.0,
        gt=0,
        description="How long a trainer job tries to reach the coordinator before it gives up with an error "
        "naming the address.",
    )

    @model_validator(mode="after")
    def _reachable(self) -> ClusterConfig:
        if self.trainer_nodes > 1 and self.trainers == "local":
            raise ValueError(
                f"cluster.trainer_nodes is {self.trainer_nodes} with cluster.trainers 'local': `sesa train` "
                "starts trainers on its own machine only; set cluster.trainers: external and run "
                "`sesa trainers` on each trainer node"
            )
        if self.trainers == "external" and self.coordinator_port is None:
            raise ValueError(
                "cluster.trainers 'external' needs cluster.coordinator_port: the trainer nodes must know where "
                "to connect (e.g. 29530)"
            )
        if not self.allow_remote:
            for key, host in (
                ("coordinator_host", self.coordinator_host),
                ("main_address", self.main_address),
            ):
                if host is not None and not is_loopback(host):
                    raise ValueError(
                        f"cluster.{key} is {host!r}, not a loopback address: set cluster.allow_remote: true to "
                        "bind or connect there (a private cluster interface; the coordinator store has no "
                        "authentication)"
                    )
        return self

    def weight_transport(self, use_vllm: bool = False) -> str:
        """The resolved ``weights`` setting (``use_vllm``: train.use_vllm, TRL's own NCCL path)."""
        if self.weights != "auto":
            return self.weights
        if use_vllm:
            return "nccl"
        return "file" if self.trainers == "local" else "store"
