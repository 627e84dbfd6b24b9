#!/usr/bin/env bash
# Start vLLM with the simulator LLM on an internal port, wait until it answers, then run the FastAPI
# simulator in front of it (llm backend). The container stops when either process stops.
set -euo pipefail
: "${TOOLCANARY_RUN:?TOOLCANARY_RUN is not set}"
python3 -m vllm.entrypoints.openai.api_server --model "${SIMULATOR_MODEL:-Qwen/Qwen3-8B}" \
  --served-model-name simulator --host 127.0.0.1 --port 8200 \
  --tensor-parallel-size "${SIMULATOR_TP:-4}" --enable-auto-tool-choice --tool-call-parser hermes &
vllm_pid=$!
trap 'kill "$vllm_pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 240); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8200/health', timeout=5)" 2>/dev/null && break
  kill -0 "$vllm_pid" || { echo "vLLM exited before it became healthy" >&2; exit 1; }
  sleep 5
done
exec python3 -m toolcanary.simulator serve --host 0.0.0.0 --port 8300 --backend llm \
  --run "$TOOLCANARY_RUN" --upstream http://127.0.0.1:8200/v1
