"""The memory plan: what each process of a run needs on each GPU, checked before anything starts.

`sesa plan -c CONFIG` prints it; :func:`check_memory_plan` refuses a config that cannot fit with one message
naming the GPU and the shortfall. Every number is an ESTIMATE from the models' shapes and the config; no GPU
run of this project has measured one. It catches layouts that miss by a wide margin (two full-size trainers
and three servers on one GPU), not the last GiB: the constants below are the assumptions, each with its why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tools.errors import UserError
from training.model_shapes import Shape, model_shape

if TYPE_CHECKING:
    from sesa_graph.config import RunConfig
    from sesa_graph.model_config import PolicyConfig
    from sesa_graph.train_config import TrainConfig

GIB = 2**30
PARTS = ("weights", "grads", "optimizer", "reference", "activations", "kv cache", "overhead")
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# The prompt a trainer scores before the completion: the system prompt (~130 tokens), at most
# memory.render_max_chars of skills and a question of at most 400 characters: well under 1024 tokens.
PROMPT_TOKENS = 1024
# A trainer rank's CUDA context with torch's kernels (~0.5-1 GiB), NCCL buffers and the caching allocator's
# fragmentation: a guess, not a measurement.
TRAINER_OVERHEAD_GIB = 2.0
# A vLLM process's CUDA context exists before vLLM takes its memory snapshot, so it sits outside
# gpu_memory_utilization; CUDA graphs (enforce_eager false) are profiled inside it (vLLM >= 0.21).
VLLM_CONTEXT_GIB, VLLM_GRAPHS_GIB = 1.0, 1.0
# vLLM's profile pass, inside its fraction: its default tokens per pass for an OpenAI server on an H100/H200
# (2048 on an A100: 8192 is the larger bound), and the sampler's fp32 logits and probabilities for its
# default 1024 sequences.
VLLM_PASS_TOKENS, VLLM_MAX_SEQS = 8192, 1024
# TRL 1.16's GRPOTrainer never materializes the logits: its fused LM head projects 4096 tokens x 32768 vocab
# entries at a time and accumulates the head's gradient in fp32 (trl/kernels/chunked_logprob.py). The
# brief's bf16 logits + fp32 log-softmax copy would be 6 B x tokens x vocab; that path is gone in 1.16.
HEAD_TOKENS, HEAD_VOCAB = 4096, 32768
# Python, torch, transformers and TRL in a CPU process (the tiny-cpu trainer peaked at 4.7 GiB with ~2 GiB of
# model states). Host lines are rough and never refused.
HOST_PROCESS_GIB = 2.0


@dataclass
class Process:
    name: str
    model: str
    parts: dict[str, float]  # GiB by PARTS key
    detail: str = ""  # the assumptions behind the numbers

    @property
    def total(self) -> float:
        return sum(self.parts.values())


@dataclass
class DevicePlan:
    device: str  # "GPU 0" (refused when over), or "host" (rough, never refused)
    capacity_gib: float | None
    processes: list[Process] = field(default_factory=list)
    # "" on one machine; with cluster.trainers external "orchestrator" or "trainer node N" (its --node-rank),
    # since every node numbers its GPUs from 0
    node: str = ""

    @property
    def label(self) -> str:
        """The device as errors name it: "GPU 3", or "trainer node 0 GPU 3" when the run spans nodes."""
        return f"{self.node} {self.device}" if self.node else self.device

    @property
    def total(self) -> float:
        return sum(p.total for p in self.processes)

    @property
    def headroom(self) -> float | None:
        return None if self.capacity_gib is None else self.capacity_gib - self.total

    @property
    def fits(self) -> bool:
        return self.device == "host" or self.capacity_gib is None or self.total <= self.capacity_gib


@dataclass
class MemoryPlan:
    devices: list[DevicePlan]  # node by node (the orchestrator's first): the GPUs by id, then the host
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # servers that cannot start, whatever the totals

    @property
    def nodes(self) -> list[str]:
        """The nodes in plan order; [""] on one machine."""
        return list(dict.fromkeys(d.node for d in self.devices))

    @property
    def gpus(self) -> list[DevicePlan]:
        return [d for d in self.devices if d.device != "host"]

    @property
    def fits(self) -> bool:
        return all(d.fits for d in self.devices) and not self.problems


# training.trainer passes accelerate's sync_each_batch to FSDP2 jobs (reduce-scatter every pass)
FSDP_SYNC_EACH_PASS = True


def optimizer_bytes(optim: str, param_bytes: int) -> int:
    """State bytes per parameter: Adam-family 2 states of the master dtype (1 byte each in 8-bit ones), Lion
    1, plain SGD (no momentum: transformers' default) and Adafactor (factored) ~0; others assumed Adam-like."""
    o = optim.lower()
    if "8bit" in o:
        return 2
    if o.startswith("sgd") or "adafactor" in o:
        return 0
    return param_bytes if "lion" in o else 2 * param_bytes


def trainer_rank(
    shape: Shape, t: TrainConfig, ranks: int, on_gpu: bool, batch: int = 1
) -> tuple[dict[str, float], str]:
    """One trainer rank, in GiB by part, and how they were counted; ``batch``: the rollouts of one of its
    optimizer steps (more than train.micro_batch_size: the rank accumulates over passes)."""
    p, pb = shape.params, DTYPE_BYTES[t.param_dtype]
    cb = 2 if t.compute_dtype == "bfloat16" or (t.compute_dtype == "auto" and on_gpu) else 4
    shards = ranks if t.sharding == "fsdp2" and on_gpu else 1  # accelerate runs FSDP on GPUs only
    if (
        shards > 1
    ):  # FSDP2 keeps the root (embeddings, lm_head) gathered, plus a layer and the prefetched next
        copy = (p - (shape.num_hidden_layers - 2) * shape.layer_params) * cb
        how = "gathered root + 2 layers"
    else:  # autocast caches a compute-dtype cast of every weight through the forward
        copy, how = (p * cb if cb < pb else 0), "autocast copy"
    ddp = p * pb if ranks > 1 and shards == 1 else 0  # DDP's gradient buckets: a second copy of the grads
    # the trainer builds the reference in bf16 when it computes in bf16 (model_init_kwargs), else in the
    # policy's dtype, as TRL does by default; whole on every rank: TRL wraps it in FSDP root-only
    # (trl/models/utils.py prepare_fsdp), which gathers it all for each forward
    ref = p * (min(pb, cb)) if t.beta > 0 else 0
    # FSDP2 accumulating over passes under no_sync would keep the unsharded gradients in the reduce dtype between
    # passes (torch/distributed/fsdp/_fully_shard/_fsdp_param.py); the trainer reduce-scatters every pass instead
    # (training.trainer: sync_each_batch), so only a pass's own unsharded gradient is transient, in `work` below
    unsharded = p * cb if shards > 1 and batch > t.micro_batch_size and not FSDP_SYNC_EACH_PASS else 0
    b, c = t.micro_batch_size, t.max_completion_length
    s = PROMPT_TOKENS + c
    if t.gradient_checkpointing:  # each layer's input kept; one layer recomputed, x2 for its gradients
        kept = shape.num_hidden_layers * b * s * shape.hidden_size * cb
        work = 2 * b * s * shape.layer_activations() * cb
    else:
        kept = shape.num_hidden_layers * b * s * shape.layer_activations() * cb
        work = b * s * shape.layer_activations() * cb
    # the head's tile, its fp32 weight gradient and the fp32 gradient of the hidden states it scores
    head = (
        min(b * c, HEAD_TOKENS) * min(shape.vocab_size, HEAD_VOCAB) * cb
        + (shape.embed_params + b * c * shape.hidden_size) * 4
    )
    # torch's foreach Adam step allocates a master-dtype temporary per parameter (sqrt of exp_avg_sq) after the
    # backward, when the activations and the compute copy are freed: only what exceeds them adds to the peak
    states = p * optimizer_bytes(t.optim, pb) / shards
    step = max(0, (p * pb / shards if states else 0) - copy - kept - work - head)
    parts = {
        "weights": (p * pb / shards + copy) / GIB,
        "grads": (p * pb / shards + ddp + unsharded) / GIB,
        "optimizer": (states + step) / GIB,
        **({"reference": ref / GIB} if ref else {}),
        "activations": (kept + work + head) / GIB,
        "overhead": TRAINER_OVERHEAD_GIB if on_gpu else HOST_PROCESS_GIB,
    }
    detail = (
        f"{p / 1e9:.2f}B params: {t.param_dtype} weights, grads, {t.optim} state"
        + (f" / {shards} ranks (fsdp2)" if shards > 1 else "")
        + (f", {how} {copy / GIB:.1f}" if copy else "")
        + (f", optimizer step temporary beyond the activations {step / GIB:.1f}" if step else "")
        + (f"; reference {ref / GIB:.1f}" if ref else "; no reference (beta 0)")
        + f"; {b} x {s} tokens ({PROMPT_TOKENS} prompt est. + {c}): "
        + ("kept hidden states" if t.gradient_checkpointing else "all layers")
        + f" {kept / GIB:.1f} + a layer {work / GIB:.1f} + fused LM head {head / GIB:.1f}"
    )
    return parts, detail


def server(
    shape: Shape, p: PolicyConfig, cap: float | None, n_gpus: int
) -> tuple[dict[str, float], str, str]:
    """A model server's parts, detail and problem (''): vLLM on a GPU reserves gpu_memory_utilization x the
    GPU (weights, its profile pass, CUDA graphs; the KV cache gets the rest) plus its context outside."""
    db = DTYPE_BYTES[p.dtype]
    w, per_token = shape.params * db / n_gpus / GIB, shape.kv_bytes_per_token(db) / n_gpus  # TP splits both
    if cap is None or p.backend != "vllm":  # vLLM-cpu's KV space, or an in-process model's kv_cache_mb
        kv = p.kv_cache_gib if p.backend == "vllm" else p.kv_cache_mb / 1024
        rest = HOST_PROCESS_GIB if cap is None else VLLM_CONTEXT_GIB
        return {"weights": w, "kv cache": kv, "overhead": rest}, f"{kv * GIB / per_token:,.0f} KV tokens", ""
    util = p.gpu_memory_utilization or 0.9  # vLLM's default
    pass_ = VLLM_PASS_TOKENS * (4 * shape.hidden_size + 3 * shape.intermediate_size) * db / n_gpus
    act = (pass_ + VLLM_MAX_SEQS * shape.vocab_size * 4 * 2) / GIB
    graphs = 0.0 if p.enforce_eager else VLLM_GRAPHS_GIB
    kv = util * cap - w - act - graphs
    tokens = max(kv, 0) * GIB / per_token
    detail = f"{util:.2f} x {cap:.0f} GiB; KV {per_token / 1024:.0f} KiB/token: {tokens:,.0f} tokens"
    problem = ""
    if p.max_model_len:
        detail += f" = {tokens / p.max_model_len:.1f} x max_model_len {p.max_model_len}"
        if tokens < p.max_model_len:
            problem = (
                f"its KV cache ({max(kv, 0):.1f} GiB after {w:.1f} GiB of weights) holds {tokens:,.0f} tokens, "
                f"less than one max_model_len sequence ({p.max_model_len}): vLLM refuses to start"
            )
    parts = {"weights": w, "activations": act, "kv cache": max(kv, 0), "overhead": graphs + VLLM_CONTEXT_GIB}
    return parts, detail, problem


def parallel_size(args: list[str], flag: str, short: str) -> int:
    """A vLLM server's --tensor-parallel-size (-tp) or --data-parallel-size (-dp) in its arguments, else 1."""
    for i, a in enumerate(args):
        value = a.split("=", 1)[1] if a.startswith(f"{flag}=") else None
        if a in (flag, short) and i + 1 < len(args):
            value = args[i + 1]
        if value is not None:
            return int(value) if value.isdigit() else 1  # vLLM itself refuses a malformed one
    return 1


def server_layout(p: PolicyConfig, where: list[str], name: str, key: str) -> tuple[list[list[str]], int, str]:
    """Each replica's devices (the role's GPUs split evenly, as the servers' start splits them), the tensor
    parallel size (each GPU holds 1/tp of the weights and KV cache; a data-parallel engine a whole copy) and a
    note when the GPUs do not match replicas x tensor x data parallel."""
    reps = p.replicas if p.backend == "vllm" else 1
    tp = parallel_size(p.server_args, "--tensor-parallel-size", "-tp") if p.backend == "vllm" else 1
    dp = parallel_size(p.server_args, "--data-parallel-size", "-dp") if p.backend == "vllm" else 1
    if where == ["host"] or len(where) % reps:  # vLLM-cpu, or GPUs the start refuses to split
        return [where] * reps, tp, ""
    k = len(where) // reps
    shares = [where[r * k : (r + 1) * k] for r in range(reps)]
    note = ""
    if k != tp * dp:  # vLLM uses the first tp x dp of its GPUs; the plan still puts an engine on each
        per = f"{reps} replicas of {k} GPUs" if reps > 1 else f"{k} GPUs"
        note = (
            f"{name}: {key} gives {per} but its server_args give tensor parallel {tp} x data parallel {dp}: "
            f"vLLM would not use them as planned; e.g. add [--tensor-parallel-size, '{max(1, k // dp)}']"
        )
    return shares, tp, note


def gpu_capacity_gib(cfg: RunConfig, gpu_gib: float | None = None) -> float:
    """Each GPU's memory: the argument, else train.gpu_memory_gib, else the first visible CUDA device's
    (a machine's GPUs are taken to be alike)."""
    if gpu_gib or cfg.train.gpu_memory_gib:
        return float(gpu_gib or cfg.train.gpu_memory_gib)  # type: ignore[arg-type]
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_properties(0).total_memory / GIB
    except ImportError:
        pass
    raise UserError(
        "the memory plan needs each GPU's memory and no GPU is visible here: set train.gpu_memory_gib in the "
        "config or pass --gpu-gib (e.g. 80 for an A100-80GB)"
    )


def plan(cfg: RunConfig, gpu_gib: float | None = None) -> MemoryPlan:
    """Every process of ``cfg`` on its device: the policies' servers (train.vllm_gpus), the fixed models the
    run serves (models.NAME.cuda_visible_devices) and each trainer rank (train.trainer_gpus).

    One machine unless cluster.trainers is external: then the servers are on the orchestrator node and each
    of cluster.trainer_nodes trainer nodes runs an equal share of each job's ranks on the GPUs of
    train.trainer_gpus (the same indices on every trainer node), numbered as the launchers number them
    (node rank x ranks per node + local rank)."""
    policies = {"solver": cfg.solver_policy, "proposer": cfg.proposer_policy}
    from sesa_graph.policy.factory import needed_models

    # a model no role calls is never started (an opt-in one, e.g. tiny-cpu's qwen, included)
    needed = set(needed_models(cfg))
    served = {f"models.{n}": ep.serve for n, ep in cfg.models.items() if ep.serve is not None and n in needed}
    on_gpu = any(p.device.startswith("cuda") for p in [*policies.values(), *served.values()])
    external = cfg.cluster.trainers == "external"
    layout = _Layout(gpu_capacity_gib(cfg, gpu_gib) if on_gpu else None)
    _place_servers(cfg, layout, policies, served, home="orchestrator" if external else "")
    _place_trainers(cfg, layout, policies, external)

    def order(d: DevicePlan) -> tuple:
        node = int(d.node.rsplit(" ", 1)[1]) + 1 if d.node.startswith("trainer node") else 0
        return node, d.device == "host", int(d.device[4:]) if d.device[4:].isdigit() else 0

    ordered = sorted(layout.devices.values(), key=order)
    notes = layout.notes
    if not on_gpu:
        notes.append("no process of this config is on a CUDA device, so there is no GPU plan")
    else:
        notes.append(
            "vLLM starts only if a GPU's free memory at its start is at least its gpu_memory_utilization share: "
            "the shares of the servers on a GPU plus its trainers must stay under its memory (the totals)"
        )
    if external:
        notes += cluster_notes(cfg, on_gpu)
    for d in ordered:
        if d.capacity_gib and d.device != "host" and 0 <= (d.headroom or 0) < 0.05 * d.capacity_gib:
            notes.append(f"{d.label}: under 5% headroom, and no GPU run has measured these estimates")
    return MemoryPlan(ordered, notes, layout.problems)


class _Layout:
    """The plan as it is built: the processes on each (node, device), with the notes and problems so far."""

    def __init__(self, cap: float | None) -> None:
        self.cap = cap
        self.devices: dict[tuple[str, str], DevicePlan] = {}
        self.notes: list[str] = []
        self.problems: list[str] = []

    def put(self, node: str, where: str, proc: Process) -> None:
        key = (node, where)
        d = self.devices.setdefault(key, DevicePlan(where, None if where == "host" else self.cap, node=node))
        d.processes.append(proc)

    def place(self, spec: str | None, device: str, what: str, key: str, count: int = 1) -> list[str]:
        """The devices ``count`` processes on ``device`` take: the GPUs ``spec`` lists, else from the
        device's index on (noted), or the host."""
        if not device.startswith("cuda"):
            return ["host"] * count
        ids = [g.strip() for g in (spec or "").split(",") if g.strip()]
        if not ids:  # the process sees every GPU and takes its device's index (cuda = cuda:0)
            first = int(device.split(":", 1)[1]) if ":" in device else 0
            ids = [str(first + r) for r in range(count)]
            self.notes.append(f"{what}: no {key}, so assumed on GPU {', '.join(ids)} (device {device!r})")
        return [f"GPU {i}" for i in ids]


def _place_servers(cfg: RunConfig, layout: _Layout, policies: dict, served: dict, home: str) -> None:
    """The policies' servers (train.vllm_gpus) and the fixed models' (models.NAME.cuda_visible_devices),
    all on ``home``, the node `sesa train` runs on; an endpoint run outside sesa is only noted."""
    visible = {f"models.{n}": ep.cuda_visible_devices for n, ep in cfg.models.items()}
    servers = [
        (role, p, cfg.train.vllm_gpus.get(role), f"train.vllm_gpus.{role}") for role, p in policies.items()
    ]
    servers += [(name, p, visible[name], f"{name}.cuda_visible_devices") for name, p in served.items()]
    cap = layout.cap
    for who, p, spec, key in servers:
        if p.backend == "openai":
            layout.notes.append(f"{who}: an endpoint run outside sesa ({p.base_url}); not in this plan")
            continue
        name = f"{who} vllm server" if p.backend == "vllm" else f"{who} in-process"
        where = layout.place(spec if p.backend == "vllm" else None, p.device, name, key)
        shape = model_shape(p.model, embedded=where == ["host"])
        shares, tp, note = server_layout(p, where, name, key)
        layout.notes += [note] if note else []
        parts, detail, problem = server(shape, p, None if where == ["host"] else cap, tp)
        detail += f"; tensor parallel over {tp}" if tp > 1 else ""
        for r, share in enumerate(shares):
            label = f"{name} replica {r + 1}/{len(shares)}" if len(shares) > 1 else name
            for w in share:
                layout.put(home, w, Process(label, p.model, parts, detail))
        if problem:
            layout.problems.append(f"{(home + ' ') if home else ''}{name} on {', '.join(where)}: {problem}")


def _place_trainers(cfg: RunConfig, layout: _Layout, policies: dict, external: bool) -> None:
    """Each trainer rank (train.trainer_gpus): on this machine, or an equal share on each trainer node."""
    nodes = cfg.cluster.trainer_nodes if external else 1
    for role, p in policies.items():
        model, ranks = (p.model if p.backend == "local" else p.train_model or p.model), cfg.train.ranks(role)
        per_node = max(1, ranks // nodes)  # check_train_layout refuses ranks that nodes do not divide
        spec, key = cfg.train.trainer_gpus.get(role), f"train.trainer_gpus.{role}"
        what = f"{role} trainer" + (" on each trainer node" if external else "")
        where = layout.place(spec, p.device, what, key, per_node)
        rollouts = (
            cfg.train.questions_per_step * cfg.solver.group_size
            if role == "solver"
            else cfg.train.targets_per_step
        )
        parts, detail = trainer_rank(  # FSDP2 shards over all the job's ranks, whichever node they are on
            model_shape(model, embedded=where[0] == "host"),
            cfg.train,
            ranks,
            where[0] != "host",
            batch=rollouts // ranks // cfg.train.updates_per_step,
        )
        for n in range(nodes):
            for i in range(per_node):
                proc = Process(f"{role} trainer rank {n * per_node + i}/{ranks}", model, parts, detail)
                layout.put(f"trainer node {n}" if external else "", where[i % len(where)], proc)


def cluster_notes(cfg: RunConfig, on_gpu: bool) -> list[str]:
    """What a multi-node plan assumes, and what crosses the network each step beyond the small signals."""
    c, t = cfg.cluster, cfg.train
    ranks = {role: t.ranks(role) for role in ("solver", "proposer")}
    share = ", ".join(f"{r // c.trainer_nodes} {role} rank(s)" for role, r in ranks.items())
    notes = [
        (
            f"cluster.trainers external: the servers and fixed models are on the orchestrator node (`sesa train`); "
            f"each of the {c.trainer_nodes} trainer node(s) (`sesa trainers --node-rank N`) runs {share}"
            + (" on the GPUs of train.trainer_gpus, the same indices on every trainer node" if on_gpu else "")
        )
    ]
    if t.sharding == "fsdp2" and c.trainer_nodes > 1 and on_gpu:
        notes.append("fsdp2 shards each job's states over all its ranks, across the trainer nodes")
    sizes, sent = {}, {}
    for role, p in (("solver", cfg.solver_policy), ("proposer", cfg.proposer_policy)):
        model = p.model if p.backend == "local" else p.train_model or p.model
        # published in the rollout policy's dtype when narrower (training.step_feed.publish_state)
        sent[role] = min(DTYPE_BYTES[t.param_dtype], DTYPE_BYTES[p.dtype])
        sizes[role] = model_shape(model, embedded=not on_gpu).params * sent[role] / GIB
    each, total = " + ".join(f"{role} {gib:.1f}" for role, gib in sizes.items()), sum(sizes.values())
    transport = c.weight_transport(t.use_vllm)
    how = {
        "store": "each job's rank 0 writes them on its node and sends them through the coordinator store, which "
        f"holds them in the orchestrator node's memory until it has read them (up to {total:.1f} GiB at once)",
        "file": "each job's rank 0 writes them into the run directory, which the orchestrator node must see "
        "(a shared filesystem)",
        "nccl": "TRL broadcasts them from each job's rank 0 into the vLLM servers over NCCL (untested)",
    }[transport]
    dtypes = "/".join(sorted({"bf16" if b == 2 else "fp32" for b in sent.values()}))
    notes.append(f"weights ({transport}), {dtypes} copies of {each} GiB: every step {how}")
    if on_gpu and t.sharding == "fsdp2":  # accelerate's FSDP2 get_state_dict gathers with cpu_offload
        notes.append(
            f"trainer node 0: each job's rank 0 gathers its full state into host memory to publish it "
            f"({total * DTYPE_BYTES[t.param_dtype] / max(sent.values()):.1f} GiB of {t.param_dtype} for both jobs, "
            "not in the GPU totals)"
        )
    return notes


FIXES = (
    "fixes: move processes to other GPUs (train.trainer_gpus, train.vllm_gpus, models.NAME.cuda_visible_devices), "
    "shard a trainer over several GPUs (train.sharding: fsdp2), lower a server's gpu_memory_utilization, "
    "train.micro_batch_size 1 with train.gradient_checkpointing, or smaller policies; "
    "`sesa plan -c CONFIG` prints the whole plan"
)


def check_memory_plan(cfg: RunConfig, gpu_gib: float | None = None) -> MemoryPlan:
    """The plan if it fits, else a UserError naming each GPU that is over, what is on it, its total against its
    memory and the shortfall, and each server that cannot start, with the usual fixes."""
    mp = plan(cfg, gpu_gib)
    if mp.fits:
        return mp
    msgs = [
        f"{d.label} needs {d.total:.1f} GiB of its {d.capacity_gib:.1f} GiB, short by {-(d.headroom or 0):.1f} GiB "
        f"({', '.join(f'{p.name} {p.model} {p.total:.1f}' for p in d.processes)})"
        for d in mp.gpus
        if not d.fits
    ]
    raise UserError(f"{cfg.name} cannot fit its GPUs: {'; '.join(msgs + mp.problems)}; {FIXES}")
