#!/usr/bin/env bash
# Builds llama-cpp-python (pinned, from its source distribution: PyPI has no wheel of it) for this CPU and
# installs it into .venv; the fixed models of the embedded default (judge, distiller, RAG reader) are served
# by its OpenAI-compatible server. The built wheel is kept in $SESA_HOME/wheels under a name that carries the
# CPU's flags, so a second set-up (or a new clone on the same machine) installs it in a second.
#
# Why not llama.cpp's native build: GGML_NATIVE compiles for -march=native, which on CPUs with AMX turns on
# ggml's AMX path, and that path crashed with SIGSEGV at the first decode on a Sapphire Rapids machine
# (2026-12). So the build is never native on x86-64: each instruction set is switched on from the flags
# the kernel reports in /proc/cpuinfo, and AMX is always off. Other architectures (ARM) build native.
#
#   bash scripts/llama_cpp_build.sh        exit 0: installed (built or from the cache); else a one-line reason
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=0.3.36
VPY=.venv/bin/python
if $VPY -c "import importlib.metadata as m, sys; sys.exit(m.version('llama_cpp_python') != '$VERSION')" 2>/dev/null; then
  exit 0
fi
cmake_args=()
if [ "$(uname -m)" = x86_64 ]; then
  flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
  has() { case "$flags" in *" $1 "*) echo ON ;; *) echo OFF ;; esac; }
  cmake_args=(-DGGML_NATIVE=OFF -DGGML_AVX="$(has avx)" -DGGML_AVX2="$(has avx2)" -DGGML_FMA="$(has fma)"
    -DGGML_F16C="$(has f16c)" -DGGML_AVX512="$(has avx512f)" -DGGML_AVX512_VNNI="$(has avx512_vnni)"
    -DGGML_AVX512_BF16="$(has avx512_bf16)" -DGGML_AVX_VNNI="$(has avx_vnni)"
    -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
else
  cmake_args=(-DGGML_NATIVE=ON)
fi
cmake_args+=(-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF)
key=$(printf '%s ' "$VERSION" "$($VPY -c 'import sys; print(sys.version_info[:2])')" "${cmake_args[@]}" | sha256sum | cut -c1-12)
cache="${SESA_HOME:-$HOME/.cache/sesa}/wheels/llama-cpp-$key"
if ! ls "$cache"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  for tool in cmake gcc g++; do
    command -v $tool >/dev/null 2>&1 || { echo "[setup] cannot build llama-cpp-python: '$tool' is not installed (Debian: apt-get install build-essential cmake)" >&2; exit 3; }
  done
  echo "[setup] building llama-cpp-python $VERSION from source for this CPU (about 5 minutes on 2 cores, once; log: $cache.log)"
  mkdir -p "$cache.tmp"
  if ! CMAKE_ARGS="${cmake_args[*]}" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
      $VPY -m pip wheel -q --no-deps --no-binary llama-cpp-python -w "$cache.tmp" "llama-cpp-python==$VERSION" >"$cache.log" 2>&1; then
    rm -rf "$cache.tmp"
    echo "[setup] the llama-cpp-python build failed: last lines of $cache.log follow" >&2
    tail -5 "$cache.log" >&2
    exit 4
  fi
  rm -rf "$cache" && mv "$cache.tmp" "$cache"
fi
# its own dependencies (numpy, jinja2, diskcache, typing-extensions) plus the server's, already pinned by the stack
$VPY -m pip install -q "$cache"/llama_cpp_python-*.whl "llama-cpp-python[server]==$VERSION"
