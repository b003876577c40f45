#!/usr/bin/env bash
# GPU launcher: starts one `vllm serve` per policy (TRL server mode, NCCL weight transfer), waits until
# each is healthy, then runs `sesa train` (which starts the two accelerate trainers and the orchestrator).
# Every process is stopped when this script exits, on success or failure.
#   bash scripts/launch_gpu.sh configs/qwen3-4b-8xa100.yaml
# Needs: pip install -e '.[gpu]' (vllm 0.31.0), a retrieval server for search (sesa search serve ...).
set -euo pipefail
CONFIG=${1:?usage: launch_gpu.sh CONFIG.yaml}
cd "$(dirname "$0")/.."
PY=.venv/bin/python
read -r SOLVER_MODEL SOLVER_URL PROPOSER_MODEL PROPOSER_URL SOLVER_GPU PROPOSER_GPU < <($PY - "$CONFIG" <<'PYEOF'
import sys
from sesa_graph.config import load_config
c = load_config(sys.argv[1])
gpu = {"solver": "0", "proposer": "1", **c.train.vllm_gpus}
print(c.solver_policy.model, c.solver_policy.base_url, c.proposer_policy.model, c.proposer_policy.base_url,
      gpu["solver"], gpu["proposer"])
PYEOF
)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done; wait || true; }
trap cleanup EXIT INT TERM
serve() {  # model url gpus log
  local port=${2##*:}; port=${port%%/*}
  CUDA_VISIBLE_DEVICES=$3 VLLM_SERVER_DEV_MODE=1 setsid .venv/bin/vllm serve "$1" --port "$port" \
    --weight-transfer-config '{"backend":"nccl"}' --logprobs-mode processed_logprobs --max-logprobs -1 \
    --gpu-memory-utilization "${VLLM_MEM:-0.85}" >"$4" 2>&1 &
  PIDS+=($!)
}
mkdir -p runs/logs
serve "$SOLVER_MODEL" "$SOLVER_URL" "$SOLVER_GPU" runs/logs/vllm-solver.log
serve "$PROPOSER_MODEL" "$PROPOSER_URL" "$PROPOSER_GPU" runs/logs/vllm-proposer.log
for url in "$SOLVER_URL" "$PROPOSER_URL"; do
  base=${url%/v1}
  for i in $(seq 1 600); do
    curl -sf "$base/health" >/dev/null && break
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null || { echo "vllm serve died; see runs/logs/"; tail -20 runs/logs/vllm-*.log; exit 1; }; done
    sleep 2
  done
  curl -sf "$base/health" >/dev/null || { echo "vllm at $base not healthy after 20 min"; exit 1; }
  echo "vllm at $base is healthy"
done
.venv/bin/sesa train -c "$CONFIG"
