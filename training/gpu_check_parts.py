"""The pieces of the prepared CUDA check (``training.gpu_check``) that need no trainer: the random model and
its config, the run config, the step's rows, the FLOP count, the weight-change figures and the wheel bundle
for a GPU machine without registry access."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from tools.errors import UserError
from training.memory_plan import PROMPT_TOKENS, trainer_rank
from training.model_shapes import SHAPES, Shape
from training.trainer import grpo_config_kwargs, micro_batches

# Qwen3's config.json fields that training.model_shapes.SHAPES does not hold, the same in Qwen3-0.6B to -8B
# (huggingface.co/Qwen/Qwen3-4B/blob/main/config.json: rope_theta 1000000, rms_norm_eps 1e-06,
# max_position_embeddings 40960, no attention bias); the widths come from SHAPES, read from the same files
QWEN3_REST = {"rope_theta": 1_000_000.0, "rms_norm_eps": 1e-6, "max_position_embeddings": 40960}
# CPU mode: 2 layers as the trainer harness's tiny policy, the embedded tokenizer's 49,152 ids
TINY = Shape(49152, 64, 128, 2, 2, 1, 32, True)
TINY_PROMPT, TINY_COMPLETION = 32, 64
# Dense bf16 tensor-core peaks from NVIDIA's data sheets (without sparsity), matched on the device name
PEAK_BF16 = (
    ("H100 PCIe", 756e12),
    ("H100 NVL", 835e12),
    ("H100", 989e12),
    ("H200", 989e12),
    ("A100", 312e12),
)
# What the check's Python needs beyond the GPU image (Python 3.12, torch, transformers, accelerate, peft, pandas,
# pyarrow, fsspec, xxhash, pyyaml, filelock, safetensors, ...): read from the imports of a CPU check run
BUNDLE = (
    "trl",
    "datasets",
    "dill",
    "multiprocess",
    "pydantic",
    "pydantic-core",
    "annotated-types",
    "typing-inspection",
)
# Installed only over an older copy in the image: pydantic needs typing-extensions >= 4.16, and a copy on
# PYTHONPATH would shadow a newer one the image's packages may need
IF_OLDER = ("typing-extensions",)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")


def qwen3_config(shape: Shape, tokenizer: Any) -> Any:
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=shape.vocab_size,
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=shape.num_key_value_heads,
        head_dim=shape.head_dim,
        tie_word_embeddings=shape.tie_word_embeddings,
        rms_norm_eps=QWEN3_REST["rms_norm_eps"],
        max_position_embeddings=QWEN3_REST["max_position_embeddings"],
        rope_parameters={"rope_type": "default", "rope_theta": QWEN3_REST["rope_theta"]},
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def build_model(dest: Path, shape: Shape, tokenizer_dir: str, device: str) -> int:
    """A seeded random Qwen3 of ``shape`` with the tokenizer beside it, initialised on ``device`` (4 billion
    random draws are the GPU's work, not the host's) and saved in bf16 there: the trainer loads it in its fp32
    master dtype anyway, and half the bytes are written and read. Returns the tokenizer's size."""
    import torch
    from transformers import AutoTokenizer, Qwen3ForCausalLM
    from transformers.utils import logging

    logging.disable_progress_bar()
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    with torch.device(device):
        model = Qwen3ForCausalLM._from_config(qwen3_config(shape, tok), dtype=dtype)
    model.save_pretrained(dest)
    tok.save_pretrained(dest)
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    return len(tok)


def pick_model(name: str, t: Any, rows_per_update: int, capacity_gib: float) -> str:
    """``name``, or when the memory plan puts its one rank over 95% of this GPU the largest Qwen3 of the table
    that fits (an 80 GB card cannot hold a 4B rank with its reference: the H200 config's 1.7B is what fits)."""
    wanted = SHAPES[name]
    smaller = sorted(
        (n for n, s in SHAPES.items() if n.startswith("Qwen/Qwen3-") and s.params <= wanted.params),
        key=lambda n: -SHAPES[n].params,
    )
    for n in [name, *smaller]:
        if sum(trainer_rank(SHAPES[n], t, 1, True, rows_per_update)[0].values()) <= 0.95 * capacity_gib:
            return n
    raise UserError(f"no Qwen3 of training.model_shapes fits one rank on a {capacity_gib:.0f} GiB GPU")


def check_config(base: dict, model_dir: Path, device: str, questions: int, ports: list[int]) -> dict:
    """The GPU config's trainer settings (launcher, sharding, precision, GRPO, sequence length) on one rank,
    with the policy swapped for ``model_dir`` and the batch shrunk to ``questions`` solver groups. The
    warm-up is dropped so both updates move the weights; the policy's dtype is float32, so the published
    weights are the fp32 masters (a change of ~1e-6 a weight vanishes when rounded to bf16)."""
    t = copy.deepcopy(base["train"])
    for key in (
        "target_pool",
        "vllm_gpus",
        "trainer_gpus",
        "rendezvous_ports",
        "trainer_ranks",
        "gpu_memory_gib",
    ):
        t.pop(key, None)
    t.update(
        steps=2,  # the check stops the job once step 1's weights are out: no checkpoint is written
        questions_per_step=questions,
        targets_per_step=2,
        warmup_steps=0,
        save_every=1000,
        report_to="none",
        use_vllm=False,
        trainer_ranks={"solver": 1, "proposer": 1},
        rendezvous_ports={"solver": ports[0], "proposer": ports[1]},
    )
    if device == "cpu":
        t.update(max_completion_length=TINY_COMPLETION, trainer_threads=2)
    policy = {"model": str(model_dir), "backend": "local", "device": device, "dtype": "float32"}
    group = base.get("solver", {}).get("group_size", 5)
    rows = questions * group
    updates = t.get("updates_per_step", 1)
    if rows % updates:
        raise UserError(f"--questions {questions}: {rows} rollouts do not split into {updates} updates")
    # the plan counts train.micro_batch_size a pass; the trainer passes the largest divisor not above it
    t["micro_batch_size"] = micro_batches(rows // updates, t.get("micro_batch_size", 2))[0]
    return {
        "name": "gpu-check",
        "seed": 0,
        "solver_policy": policy,
        "proposer_policy": dict(policy),
        "solver": {"group_size": group, "temperature": base.get("solver", {}).get("temperature", 1.0)},
        "train": t,
    }


def step_rows(cfg: Any, role: str, prompt_len: int, completion_len: int, vocab: int) -> list[Any]:
    """One step's rollouts of full length: random ids below ``vocab``, a block of injected (masked) tokens,
    and rewards that differ within each group, so every group has advantages and a gradient."""
    import random

    from sesa_graph.trajectory import Trajectory
    from training.trainer import batch_shape

    batch, group = batch_shape(cfg, role)
    rng = random.Random(0)
    rows = []
    for i in range(batch):
        completion = [rng.randrange(100, vocab) for _ in range(completion_len)]
        mask = [1] * completion_len
        lo = completion_len // 3
        mask[lo : lo + max(1, completion_len // 10)] = [0] * max(1, completion_len // 10)
        rows.append(
            Trajectory(
                role=role,
                question_id=f"q{i // group}",
                group_id=f"g{i // group}",
                sample=i % group,
                prompt_ids=[rng.randrange(100, vocab) for _ in range(prompt_len)],
                completion_ids=completion,
                env_mask=mask,
                logprobs=[-1.0 if m else 0.0 for m in mask],
                status="max_tokens",
                reward=float((i + i // group) % 2),
            )
        )
    return rows


def flops_per_step(shape: Shape, cfg: Any, prompt_len: int, completion_len: int, rows: int) -> dict[str, Any]:
    """Model FLOPs of one step's batch (no recomputation: gradient checkpointing's second forward is not
    useful work, as MFU is usually counted). A forward is 2 FLOPs a weight a token for the layers, the LM head
    over the completion positions only (TRL's fused head), and causal attention's QK and AV products; the
    training pass counts 3 forwards (backward twice), TRL's old-log-prob pass (several updates a batch) and
    the reference's (beta > 0) one each, as the trainer's GRPOConfig makes TRL run them."""
    kw = grpo_config_kwargs(cfg, "solver", Path("/nonexistent"), 1, cfg.train.compute_dtype)
    old = kw["gradient_accumulation_steps"] % kw["steps_per_generation"] != 0
    passes = 3 + int(old) + int(cfg.train.beta > 0)
    s = prompt_len + completion_len
    q_dim = shape.num_attention_heads * shape.head_dim
    layers = 2 * shape.num_hidden_layers * shape.layer_params * s
    head = 2 * shape.hidden_size * shape.vocab_size * completion_len
    attention = 2 * shape.num_hidden_layers * q_dim * s * s
    forward = rows * (layers + head + attention)
    return {
        "per_step": forward * passes,
        "forward_passes": passes,
        "old_logprob_pass": old,
        "reference_pass": cfg.train.beta > 0,
        "share": {
            "layers": layers / (layers + head + attention),
            "attention": attention / (layers + head + attention),
        },
    }


def peak_bf16(device_name: str) -> float | None:
    return next((peak for key, peak in PEAK_BF16 if key in device_name), None)


def weight_change(before: Path, after: Path, device: str) -> dict[str, Any]:
    """L2 norms of the published weights and of their change between two versions, tensor by tensor (in
    float64 sums, on ``device``), the share of values that moved and the tensors that did not move at all."""
    from safetensors import safe_open

    sq_w = sq_d = 0.0
    moved = total = 0
    largest = 0.0
    still: list[str] = []
    files = sorted(p.name for p in before.glob("*.safetensors"))
    for name in files:
        with (
            safe_open(before / name, "pt", device=device) as a,
            safe_open(after / name, "pt", device=device) as b,
        ):
            for key in a.keys():  # noqa: SIM118 - safe_open is no mapping
                w0, w1 = a.get_tensor(key).double(), b.get_tensor(key).double()
                d = w1 - w0
                sq_w += float(w0.square().sum())
                sq_d += float(d.square().sum())
                n = int((d != 0).sum())
                moved, total = moved + n, total + d.numel()
                largest = max(largest, float(d.abs().max()))
                if n == 0:
                    still.append(key)
    l2_w, l2_d = math.sqrt(sq_w), math.sqrt(sq_d)
    return {
        "weights_l2": l2_w,
        "weight_change_l2": l2_d,
        "relative_change": l2_d / l2_w if l2_w else None,
        "changed_fraction": moved / total if total else 0.0,
        "max_abs_change": largest,
        "tensors_unchanged": still[:10],
        "tensors_unchanged_count": len(still),
        "values": total,
    }


def plan_memory(shape: Shape, t: Any, on_gpu: bool, rows_per_update: int) -> dict[str, Any]:
    parts, detail = trainer_rank(shape, t, 1, on_gpu, rows_per_update)
    total = sum(parts.values())
    return {
        "plan_gib": total,
        # torch's allocator never sees the CUDA context and fragmentation the plan's overhead line guesses
        "plan_allocated_gib": total - parts.get("overhead", 0.0),
        "plan_parts_gib": {k: round(v, 3) for k, v in parts.items()},
        "plan_detail": detail,
        "plan_prompt_tokens": PROMPT_TOKENS,
    }


def bundle(dest: Path) -> dict[str, Any]:
    """The wheels a GPU image without them needs (:data:`BUNDLE`, at the versions installed here, which this
    checkout's tests ran on) for Python 3.12 on x86-64 Linux, :data:`IF_OLDER` in ``newer/`` (installed only
    over an older copy), and the embedded tokenizer; its size in MiB."""
    from sesa_graph.embedded import resolve_policy_model

    pins = {}
    for names, where in ((BUNDLE, dest), (IF_OLDER, dest / "newer")):
        where.mkdir(parents=True, exist_ok=True)
        for old in where.glob("*.whl"):
            old.unlink()
        pins[where.name] = [f"{name}=={metadata.version(name)}" for name in names]
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
        cmd += ["--python-version", "3.12", "--implementation", "cp", "-d", str(where)]
        cmd += [arg for p in PLATFORMS for arg in ("--platform", p)]
        done = subprocess.run([*cmd, *pins[where.name]], check=False, capture_output=True, text=True)
        if done.returncode != 0:
            raise UserError(f"pip download failed: {(done.stderr or done.stdout).strip().splitlines()[-1]}")
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(resolve_policy_model("embedded")).save_pretrained(dest / "tokenizer")
    (dest / "MANIFEST.json").write_text(json.dumps({"python": "3.12", **pins}, indent=1) + "\n")
    size = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())
    return {"dir": str(dest), "pins": [*pins[dest.name], *pins["newer"]], "mib": round(size / 2**20, 2)}


def unmet_requirements(bundle_dir: Path) -> list[str]:
    """The bundled wheels' requirements that the installed distributions do not meet (they were installed
    without their dependencies, against the image's versions): a warning each, since most still work."""
    import zipfile

    from packaging.requirements import Requirement

    out = []
    for wheel in sorted(bundle_dir.glob("*.whl")):
        with zipfile.ZipFile(wheel) as z:
            meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            lines = z.read(meta).decode().splitlines()
        for line in lines:
            if not line.startswith("Requires-Dist:"):
                continue
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            try:
                have = metadata.version(req.name)
            except metadata.PackageNotFoundError:
                have = None
            if have is None or not req.specifier.contains(have, prereleases=True):
                out.append(
                    f"{wheel.name.split('-')[0]} wants {req.name}{req.specifier}, found {have or 'none'}"
                )
    return out


def versions() -> dict[str, str | None]:
    """The versions the check ran on (the image's and the bundle's)."""
    import torch

    out: dict[str, str | None] = {"cuda": torch.version.cuda}
    for name in (
        "torch",
        "transformers",
        "accelerate",
        "trl",
        "datasets",
        "peft",
        "pyarrow",
        "pandas",
        "pydantic",
    ):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out
