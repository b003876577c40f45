"""Format warm-up: supervised fine-tuning (TRL ``SFTTrainer``) of a small policy on synthetic, grounded
rollouts in the exact tag format of the graphs, so that it follows the protocol before GRPO starts.

What it is: ``training.questions.synth`` writes solver and proposer trajectories from the embedded corpus and
BM25 (every search verified to retrieve its source article); they are tokenized turn by turn like a real
rollout, and the loss covers only the policy's own tokens (prompt and injected ``<information>`` text are
masked). The result is saved to ``$SESA_HOME/models/<name>-warm`` (``smollm2-135m-warm`` for the embedded
model, which ``resolve_policy_model("embedded-warm")`` loads) with a ``.complete`` marker and a
``warmup.json`` summary, written atomically (temporary directory + rename) under a file lock, and reused
when present.

    sesa warmup                                   # the embedded SmolLM2-135M-Instruct -> embedded-warm
    sesa warmup --model HuggingFaceTB/SmolLM2-360M-Instruct --examples 96
    sesa warmup --force                           # rebuild
    sesa warmup --force --compute-dtype float32   # rebuild with float32 compute (default auto: bf16 autocast
                                                  # where the CPU has bf16 matrix units)

Defaults are sized for a shared 2-core CPU; see ``DEFAULT_EXAMPLES``. Weights and optimizer state are float32;
the forward and backward passes run under bf16 autocast when the resolved compute dtype is bfloat16 (``auto``: a
CPU with bf16 matrix units, or a GPU with bf16), and TRL's fused LM head scores only the trained positions
(:func:`trained_positions_only`). Measured with ``benchmarks/precision_speed.py`` (12 steps of this warm-up, 2
threads of an otherwise idle 2-core AVX512-BF16 CPU): 15.7 s/step before (float32, every position scored), 12.1
with trained positions only, 6.4 in bf16 with trained positions only -- 2.5x; the warm-up's 18 steps take about
2 minutes instead of 5. bf16 alone gave 1.6x (9.9 s/step). Losses of bf16 and float32 differ by at most 0.018
over the 12 steps (mean loss 1.21). The pieces -- :func:`build_data`, :func:`sft_config_kwargs`,
:func:`build_trainer` -- are what the benchmark reuses.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from sesa_graph.corpus.heldout import SPLIT_VERSION
from sesa_graph.embedded import EMBEDDED, resolve_policy_model
from sesa_graph.precision import resolve_compute_dtype
from sesa_graph.warm_model import COMPLETE, SUMMARY, is_complete, is_current, warm_dir

log = logging.getLogger(__name__)

DEFAULT_EXAMPLES = 56
DEFAULT_EPOCHS = 1.0
DEFAULT_LR = 2e-4
DEFAULT_GRAD_ACCUM = 4
# The embedded policy is also the default distiller; without examples of the skill JSON it never writes a
# parseable skill, so no consolidation of the CPU default could ever admit one.
DEFAULT_DISTILLER_EXAMPLES = 16


def auto_threads() -> int:
    """Torch CPU threads: the cores not already busy (1-minute load average), at least 1. On a shared
    machine oversubscribed threads make each step several times slower than one thread."""
    cores = os.cpu_count() or 1
    try:
        busy = os.getloadavg()[0]
    except OSError:
        busy = 0.0
    return max(1, min(cores, round(cores - busy)))


def run_warmup(
    model: str = EMBEDDED,
    examples: int = DEFAULT_EXAMPLES,
    epochs: float = DEFAULT_EPOCHS,
    out: str | Path | None = None,
    *,
    force: bool = False,
    seed: int = 0,
    learning_rate: float = DEFAULT_LR,
    grad_accum: int = DEFAULT_GRAD_ACCUM,
    max_steps: int = -1,
    threads: int | None = None,
    device: str = "cpu",
    mix: dict[str, float] | None = None,
    distiller_examples: int = DEFAULT_DISTILLER_EXAMPLES,
    compute_dtype: str = "auto",
    echo: Callable[[str], None] = log.info,
) -> Path:
    """Warm up ``model`` and return the directory of the warmed copy (reused when already complete).

    ``model``: ``"embedded"`` or any HF id / local directory of a small causal LM with a chat template.
    ``examples``: number of synthetic rollouts; ``epochs``: passes over them; ``max_steps`` > 0 caps the
    optimizer steps (tests). ``out`` overrides ``warm_dir(model)``. ``threads``: torch CPU threads
    (default :func:`auto_threads`). ``compute_dtype``: 'auto' | 'bfloat16' | 'float32', the dtype of the
    forward/backward passes (bf16 autocast; the weights and optimizer state stay float32); 'auto' is bfloat16
    on a CPU with bf16 matrix units (:func:`sesa_graph.precision.resolve_compute_dtype`). The one used is in
    ``warmup.json``; a warm model built with the other one is still reused (it is current).
    """
    if examples < 1:
        raise ValueError(f"examples must be >= 1, got {examples}")
    if epochs <= 0:
        raise ValueError(f"epochs must be > 0, got {epochs}")
    if compute_dtype not in ("auto", "bfloat16", "float32"):
        raise ValueError(f"compute_dtype must be auto, bfloat16 or float32, got {compute_dtype!r}")
    target = Path(out) if out is not None else warm_dir(model)
    if is_current(target) and not force:
        echo(f"reusing {target} (built before; --force rebuilds)")
        return target
    if is_complete(target) and not force:
        echo(
            f"rebuilding {target}: it was built before held-out split {SPLIT_VERSION}, so it has seen probe articles"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if is_current(target) and not force:  # another process built it while we waited
            echo(f"reusing {target} (built by another process)")
            return target
        tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            summary = _train(
                model,
                tmp,
                examples=examples,
                epochs=epochs,
                seed=seed,
                learning_rate=learning_rate,
                grad_accum=grad_accum,
                max_steps=max_steps,
                threads=threads,
                device=device,
                mix=mix,
                distiller_examples=distiller_examples,
                compute_dtype=compute_dtype,
                echo=echo,
            )
            (tmp / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
            (tmp / COMPLETE).write_text(f"{summary['base_model']}\n")
            old = target.with_name(f"{target.name}.old-{os.getpid()}")
            if target.exists():
                target.rename(old)
            tmp.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    echo(f"warmed model in {target}")
    return target


@dataclass
class WarmupData:
    """The tokenized synthetic examples of one warm-up (what :func:`build_data` returns)."""

    model: str  # as named: "embedded", an HF id or a directory
    base: str  # where it loads from
    tokenizer: Any
    eot: int  # the end-of-turn token id
    rows: list[Any]  # the WarmupExample records
    encoded: list[dict[str, list[int]]]  # input_ids and completion_mask of each
    seconds: float

    @property
    def kinds(self) -> Counter:
        return Counter(ex.kind for ex in self.rows)

    @property
    def tokens(self) -> int:
        return sum(len(e["input_ids"]) for e in self.encoded)

    @property
    def trained_tokens(self) -> int:
        return sum(sum(e["completion_mask"]) for e in self.encoded)


def build_data(
    model: str,
    examples: int,
    *,
    seed: int = 0,
    mix: dict[str, float] | None = None,
    distiller_examples: int = 0,
) -> WarmupData:
    """The warm-up's synthetic, grounded examples of ``model``, tokenized with its tokenizer."""
    from transformers import AutoTokenizer

    from tools.backends import make_backend
    from tools.config import SearchConfig
    from training.questions.synth import Synthesizer
    from training.warmup.tokens import encode_example, end_of_turn_id

    t0 = time.perf_counter()
    base = resolve_policy_model(model)
    tokenizer = AutoTokenizer.from_pretrained(base)
    if getattr(tokenizer, "chat_template", None) is None:
        raise ValueError(
            f"{model} has no chat template; the rollout format needs one (use an instruct model)"
        )
    eot = end_of_turn_id(tokenizer)
    synth = Synthesizer(make_backend(SearchConfig()), seed=seed)
    rows = synth.generate(examples, mix)
    if distiller_examples:
        from training.warmup.distiller_data import distiller_examples as make_distiller_examples

        rows += make_distiller_examples(distiller_examples, seed=seed)
    encoded = [encode_example(ex, tokenizer, eot) for ex in rows]
    return WarmupData(model, str(base), tokenizer, eot, rows, encoded, time.perf_counter() - t0)


def sft_config_kwargs(
    output_dir: str | Path,
    *,
    compute_dtype: str,
    max_length: int,
    epochs: float = DEFAULT_EPOCHS,
    max_steps: int = -1,
    seed: int = 0,
    learning_rate: float = DEFAULT_LR,
    grad_accum: int = DEFAULT_GRAD_ACCUM,
    device: str = "cpu",
) -> dict[str, Any]:
    """The arguments of the warm-up's TRL ``SFTConfig`` (a function, so they can be checked without a trainer).

    ``compute_dtype`` is the resolved one ('bfloat16' or 'float32', see
    :func:`sesa_graph.precision.resolve_compute_dtype`): 'bfloat16' turns on accelerate's bf16 autocast
    (``bf16=True``) around the forward pass -- on CPU as on a GPU -- while the weights, gradients and
    optimizer state stay float32 (the model is loaded in float32 and never cast).
    """
    if compute_dtype not in ("bfloat16", "float32"):
        raise ValueError(f"compute_dtype must be resolved to bfloat16 or float32, got {compute_dtype!r}")
    return {
        "output_dir": str(output_dir),
        "num_train_epochs": epochs,
        "max_steps": max_steps,
        "per_device_train_batch_size": 1,  # no padding: on CPU every pad token is paid for
        "gradient_accumulation_steps": grad_accum,
        "learning_rate": learning_rate,
        "lr_scheduler_type": "cosine",
        "warmup_steps": 0,
        "weight_decay": 0.0,
        "max_grad_norm": 1.0,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "use_cpu": device == "cpu",
        "bf16": compute_dtype == "bfloat16",
        "gradient_checkpointing": False,
        "completion_only_loss": True,  # labels = input_ids where completion_mask == 1, else -100
        "max_length": max_length,
        "dataloader_num_workers": 0,
        "seed": seed,
        "disable_tqdm": True,
    }


@contextmanager
def trained_positions_only() -> Iterator[bool]:
    """Within it, TRL's fused LM head (``trl.trainer.utils.add_fused_lm_head``) scores only the positions with a
    label, as it already does on CUDA/XPU; yields whether it could (False: a TRL whose code differs, left as is).

    Off Triton devices TRL projects every position onto the vocabulary (a fixed tile shape keeps compiled
    devices from recompiling) and masks the result. The warm-up trains on about 16% of its tokens (the policy's
    own; the prompt and injected documents are masked), so on CPU most of the LM head's projection, its
    softmax and its backward (TRL accumulates the head's gradient in float32 even under bf16 autocast) went to
    positions whose loss is zero. The values on the trained positions are the same (float32 losses agree to
    1e-6); on 2 cores a float32 step took 23% less time (15.7 -> 12.1 s), a bf16 step 36% less (9.9 -> 6.4 s).
    """
    import inspect

    import trl.trainer.utils as trl_utils

    original = getattr(trl_utils, "_use_triton", None)
    try:
        known = original is not None and "compact = _use_triton(" in inspect.getsource(trl_utils)
    except (OSError, TypeError):
        known = False
    if not known:
        yield False
        return
    trl_utils._use_triton = lambda device: True  # only decides `compact` in that module
    try:
        yield True
    finally:
        trl_utils._use_triton = original


@dataclass
class WarmupTrainer:
    """The warm-up's ``SFTTrainer`` and what :meth:`save` puts back into the trained model."""

    trainer: Any
    special_ids: dict[str, Any]  # bos/eos/pad ids of the base model's config
    generation_config: Any
    score_trained_only: bool = True  # see trained_positions_only

    def train(self) -> Any:
        """``trainer.train()``, scoring only the trained positions (:func:`trained_positions_only`) unless
        ``score_trained_only`` is off."""
        if not self.score_trained_only:
            return self.trainer.train()
        with trained_positions_only():
            return self.trainer.train()

    def save(self, dest: Path) -> None:
        """The trained model (float32 safetensors) with the base model's special-token ids, and the tokenizer."""
        model = self.trainer.model
        for key, value in self.special_ids.items():
            setattr(model.config, key, value)
        model.generation_config = self.generation_config
        model.save_pretrained(dest, safe_serialization=True)
        self.trainer.processing_class.save_pretrained(dest)


def build_trainer(
    data: WarmupData,
    output_dir: str | Path,
    *,
    compute_dtype: str,
    epochs: float = DEFAULT_EPOCHS,
    max_steps: int = -1,
    seed: int = 0,
    learning_rate: float = DEFAULT_LR,
    grad_accum: int = DEFAULT_GRAD_ACCUM,
    device: str = "cpu",
    callbacks: list[Any] | None = None,
    score_trained_only: bool = True,
) -> WarmupTrainer:
    """The warm-up's ``SFTTrainer`` over ``data``: the base model loaded in float32 (master weights), compute in
    ``compute_dtype`` (resolved: 'bfloat16' or 'float32'). Call ``.train()``, then ``.save(dest)``."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import SFTConfig, SFTTrainer

    tokenizer = data.tokenizer
    lm = AutoModelForCausalLM.from_pretrained(data.base, dtype=torch.float32)
    # The trainer aligns the model's special-token ids with the tokenizer's; keep the base model's own ids
    # (the converted SmolLM2 tokenizer names <|im_start|> as EOS, the model's generation config <|im_end|>).
    special_ids = {k: getattr(lm.config, k, None) for k in ("bos_token_id", "eos_token_id", "pad_token_id")}
    generation_config = copy.deepcopy(lm.generation_config)
    if tokenizer.pad_token is None:  # keep the model's own pad token when it has one
        pad_id = getattr(lm.config, "pad_token_id", None)
        tokenizer.pad_token = (
            tokenizer.convert_ids_to_tokens(pad_id) if pad_id is not None else tokenizer.eos_token
        )
    args = SFTConfig(
        **sft_config_kwargs(
            output_dir,
            compute_dtype=compute_dtype,
            max_length=max(len(e["input_ids"]) for e in data.encoded),
            epochs=epochs,
            max_steps=max_steps,
            seed=seed,
            learning_rate=learning_rate,
            grad_accum=grad_accum,
            device=device,
        )
    )
    trainer = SFTTrainer(
        model=lm,
        args=args,
        train_dataset=Dataset.from_list(data.encoded),
        processing_class=tokenizer,
        callbacks=callbacks,
    )
    return WarmupTrainer(trainer, special_ids, generation_config, score_trained_only)


def _train(
    model: str,
    dest: Path,
    *,
    examples: int,
    epochs: float,
    seed: int,
    learning_rate: float,
    grad_accum: int,
    max_steps: int,
    threads: int | None,
    device: str,
    mix: dict[str, float] | None,
    echo: Callable[[str], None],
    distiller_examples: int = 0,
    compute_dtype: str = "auto",
) -> dict[str, Any]:
    import torch

    t0 = time.perf_counter()
    threads = threads or auto_threads()
    torch.set_num_threads(threads)
    dtype = resolve_compute_dtype(compute_dtype, device)
    echo(
        f"base model {model} ({resolve_policy_model(model)}); {examples} examples x {epochs} epochs, lr "
        f"{learning_rate}, {threads} CPU thread(s), device {device}, {dtype} compute (float32 weights)"
    )
    data = build_data(model, examples, seed=seed, mix=mix, distiller_examples=distiller_examples)
    rows, kinds = data.rows, data.kinds
    t_data = time.perf_counter() - t0
    echo(
        f"{len(rows)} grounded examples ({dict(sorted(kinds.items()))}), {data.tokens} tokens, "
        f"{data.trained_tokens} trained, in {t_data:.1f}s"
    )

    trainer, result, t_train = _fit(
        data,
        dest,
        echo,
        compute_dtype=dtype,
        epochs=epochs,
        max_steps=max_steps,
        seed=seed,
        learning_rate=learning_rate,
        grad_accum=grad_accum,
        device=device,
    )
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    accs = [h["mean_token_accuracy"] for h in trainer.state.log_history if "mean_token_accuracy" in h]
    (dest / "warmup_examples.jsonl").write_text(
        "".join(json.dumps(ex.to_record(), ensure_ascii=False) + "\n" for ex in rows)
    )
    return {
        "base_model": model,
        "base_path": data.base,
        "examples": len(rows),
        "heldout_split": SPLIT_VERSION,  # examples leave these articles out; a new split needs a new warm-up
        "examples_by_kind": dict(sorted(kinds.items())),
        "epochs": epochs,
        "steps": trainer.state.global_step,
        "learning_rate": learning_rate,
        "grad_accum": grad_accum,
        "compute_dtype": dtype,  # of the forward/backward passes (autocast); the weights are float32
        "tokens": data.tokens,
        "trained_tokens": data.trained_tokens,
        "train_loss": float(result.training_loss),
        "first_loss": losses[0] if losses else None,
        "final_loss": losses[-1] if losses else None,
        "final_token_accuracy": accs[-1] if accs else None,
        "seconds": round(time.perf_counter() - t0, 1),
        "train_seconds": round(t_train, 1),
        "data_seconds": round(t_data, 1),
        "threads": threads,
        "seed": seed,
        "end_of_turn_token": data.tokenizer.convert_ids_to_tokens(data.eot),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def _fit(data: Any, dest: Path, echo: Callable[[str], None], **options: Any) -> tuple[Any, Any, float]:
    """Train on ``data`` (``options``: :func:`build_trainer`'s), say the steps and loss, save the warmed
    model into ``dest``; the trainer, its result and the seconds the training itself took."""
    warm = build_trainer(data, dest / "_trainer", **options)
    trainer = warm.trainer
    t1 = time.perf_counter()
    result = warm.train()
    t_train = time.perf_counter() - t1
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    echo(
        f"trained {trainer.state.global_step} steps in {t_train:.0f}s; loss {losses[0] if losses else float('nan'):.3f}"
        f" -> {losses[-1] if losses else float('nan'):.3f}"
    )
    warm.save(dest)
    shutil.rmtree(dest / "_trainer", ignore_errors=True)
    return trainer, result, t_train


def read_summary(path: str | Path) -> dict[str, Any]:
    """The ``warmup.json`` of a warmed model directory."""
    return json.loads((Path(path) / SUMMARY).read_text())
