"""Where the format-warmed copy of a policy model lives (``$SESA_HOME/models/<name>-warm``) and whether the
copy there is finished and built under today's held-out split: what the warm-up (``training.warmup.sft``)
writes, and what ``sesa train`` and a probe eval check before they use it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from sesa_graph.corpus.heldout import SPLIT_VERSION
from sesa_graph.embedded import EMBEDDED
from tools.assets import sesa_home

EMBEDDED_WARM_DIRNAME = "smollm2-135m-warm"  # what resolve_policy_model("embedded-warm") reads
COMPLETE = ".complete"
SUMMARY = "warmup.json"


def warm_dir(model: str = EMBEDDED) -> Path:
    """Where the warmed copy of ``model`` lives: ``$SESA_HOME/models/<name>-warm``.

    ``"embedded"`` -> ``smollm2-135m-warm``; ``"HuggingFaceTB/SmolLM2-360M-Instruct"`` ->
    ``smollm2-360m-instruct-warm``; a local directory ``/x/my-model/`` -> ``my-model-warm``.
    """
    if model == EMBEDDED:
        return sesa_home() / "models" / EMBEDDED_WARM_DIRNAME
    if model == "embedded-warm":
        raise ValueError("'embedded-warm' is already warmed; warm up 'embedded' (or name a base model)")
    name = Path(model.rstrip("/\\")).name or model
    name = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-.") or "model"
    return sesa_home() / "models" / f"{name}-warm"


def is_complete(path: Path) -> bool:
    return (path / COMPLETE).exists()


def is_current(path: Path) -> bool:
    """Complete and built with today's held-out split: an older warm model has seen the probe set's articles."""
    try:
        return (
            is_complete(path)
            and json.loads((path / SUMMARY).read_text()).get("heldout_split") == SPLIT_VERSION
        )
    except (OSError, ValueError):
        return False
