#!/usr/bin/env bash
# The prepared CUDA check (training/gpu_check.py, docs/GPU-CHECK.md): the real trainer job on one GPU, its
# tokens/s, MFU, peak memory against the plan, and the weight change of one step's updates.
#   bash scripts/gpu_check.sh --bundle [DIR]  where pip reaches PyPI: the wheels and tokenizer a GPU image
#                                             lacks, into DIR (default .gpu-check-bundle, git-ignored)
#   bash scripts/gpu_check.sh [ARGS]          on the GPU: installs the bundle offline if trl or datasets is
#                                             missing, then runs the check (--cpu: the tiny CPU mode; --help)
# SESA_GPU_CHECK_BUNDLE names another bundle folder; PYTHON another interpreter than .venv's or python3.
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=${SESA_GPU_CHECK_BUNDLE:-.gpu-check-bundle}
if [ -n "${PYTHON:-}" ]; then py=$PYTHON; elif [ -x .venv/bin/python ]; then py=.venv/bin/python; else py=python3; fi
if [ "${1:-}" = "--bundle" ]; then
    exec "$py" -m training.gpu_check --bundle "${2:-$bundle}"
fi
if ! "$py" -c "import trl, datasets, pydantic" 2>/dev/null; then
    if ! ls "$bundle"/*.whl >/dev/null 2>&1; then
        echo "gpu_check: trl, datasets or pydantic is missing and $bundle holds no wheels: run" \
            "'bash scripts/gpu_check.sh --bundle' where pip reaches PyPI and carry $bundle here" >&2
        exit 2
    fi
    # a venv made from the image's Python (itself a venv) would not see the image's torch: the wheels go into
    # a folder of their own on PYTHONPATH instead, without their dependencies (the image's versions stay)
    site=${TMPDIR:-/tmp}/sesa-gpu-check-site
    # newer/: only over an older copy (a copy on PYTHONPATH would shadow the image's newer one)
    newer=$("$py" -c '
import sys, importlib.metadata as md
from packaging.version import Version
for whl in sys.argv[1:]:
    name, version = whl.rsplit("/", 1)[-1].split("-")[:2]
    try:
        older = Version(md.version(name)) < Version(version)
    except md.PackageNotFoundError:
        older = True
    if older:
        print(whl)' "$bundle"/newer/*.whl)
    # shellcheck disable=SC2086 # one wheel path a line, none with spaces (pip's own names)
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
        "$bundle"/*.whl $newer
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
# the repository on the path for the launcher's ranks too, without installing its dependencies
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" SESA_GPU_CHECK_BUNDLE="$bundle"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec "$py" -m training.gpu_check "$@"
