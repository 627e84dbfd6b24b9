#!/usr/bin/env bash
# The simulator container's entry point: start vLLM with the simulator LLM on an internal port, wait until it
# is healthy, then run the FastAPI simulator (llm backend) in front of it, and supervise both.
#
# - The simulator's settings are checked before vLLM starts (in mode trustee, the TRUSTEE checkout): refused
#   settings end the container with status 2 at once.
# - The simulator never starts in front of a vLLM that did not become healthy: when vLLM exits first, or is
#   not healthy after SIMULATOR_VLLM_WAIT_S seconds, the script stops it and exits non-zero.
# - Once both run, the first to exit ends the container: the other is stopped and the script exits with the
#   first one's status (1 if that was 0: neither may stop on its own).
# - SIGTERM or SIGINT (docker stop) is passed to both; the script exits 143 / 130 once they are gone.
#
# Environment (compose.yaml sets the first ones; the rest have defaults that only tests change):
#   TOOLCANARY_RUN           run id (required)
#   SIMULATOR_MODEL          model vLLM serves (default Qwen/Qwen3-8B), under the name "simulator"
#   SIMULATOR_TP             tensor parallelism of vLLM (default 4)
#   SIMULATOR_MAX_MODEL_LEN  vLLM's --max-model-len (default 131072, TRUSTEE's; empty: the flag is left out)
#   SIMULATOR_HF_OVERRIDES   vLLM's --hf-overrides, one JSON object (default TRUSTEE's YaRN, factor 4 over 32768
#                            positions; empty: the flag is left out)
#   SIMULATOR_VLLM_PORT      vLLM's port on 127.0.0.1 (default 8200)
#   SIMULATOR_VLLM_WAIT_S    how long vLLM may take to become healthy, in seconds (default 1200, the
#                            compose health check's start_period)
#   SIMULATOR_VLLM_POLL_S    seconds between two health probes of vLLM (default 5)
#   SIMULATOR_STOP_GRACE_S   seconds a process gets between SIGTERM and SIGKILL (default 30)
#   TOOLCANARY_SIMULATOR_HOST, TOOLCANARY_SIMULATOR_PORT   where the simulator listens (default 0.0.0.0:8300)
#
# Usage: images/simulator/start-simulator.sh [-h|--help]
# Example (outside a container; vLLM must be importable):
#   TOOLCANARY_RUN=r1 SIMULATOR_TP=1 SIMULATOR_MODEL=Qwen/Qwen3-0.6B SIMULATOR_MAX_MODEL_LEN= \
#     SIMULATOR_HF_OVERRIDES= images/simulator/start-simulator.sh
set -euo pipefail
case "${1:-}" in
  -h|--help) sed -n '2,31s/^# \{0,1\}//p' "$0"; exit 0 ;;
  "") ;;
  *) echo "start-simulator: unexpected argument '$1' (it takes none; configure it through the environment, see --help)" >&2
     exit 2 ;;
esac
: "${TOOLCANARY_RUN:?TOOLCANARY_RUN is not set: set it to the run id (compose.yaml sets it from RUN in .env)}"
vllm_port="${SIMULATOR_VLLM_PORT:-8200}"
wait_s="${SIMULATOR_VLLM_WAIT_S:-1200}"
poll_s="${SIMULATOR_VLLM_POLL_S:-5}"
grace_s="${SIMULATOR_STOP_GRACE_S:-30}"
for setting in vllm_port wait_s grace_s; do
  [[ "${!setting}" =~ ^[0-9]+$ ]] || { echo "start-simulator: $setting must be a whole number, got '${!setting}'" >&2; exit 2; }
done

log() { echo "start-simulator: $*" >&2; }
vllm_pid="" sim_pid=""
simulator_args=(--host "${TOOLCANARY_SIMULATOR_HOST:-0.0.0.0}" --port "${TOOLCANARY_SIMULATOR_PORT:-8300}"
                --backend llm --run "$TOOLCANARY_RUN" --upstream "http://127.0.0.1:${vllm_port}/v1")

# The simulator's settings first (in mode trustee, the TRUSTEE checkout): a wrong one must stop the container
# before vLLM spends minutes loading the model, not after.
python3 -m toolcanary.simulator serve --check "${simulator_args[@]}" >&2 || {
  status=$?; log "the simulator's settings were refused (above); vLLM was not started"; exit "$status"; }

# SIGTERM first, SIGKILL after the grace period; never waits forever.
stop() {
  local pid="$1" name="$2" deadline
  kill -0 "$pid" 2>/dev/null || return 0
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + grace_s))
  while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name did not stop within ${grace_s} s of SIGTERM: sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}
stop_all() {
  [ -z "$sim_pid" ] || stop "$sim_pid" "the simulator"
  [ -z "$vllm_pid" ] || stop "$vllm_pid" "vLLM"
}
on_signal() {
  # Ignore further signals until both are stopped (a second SIGTERM must not orphan vLLM).
  trap '' TERM INT
  log "received SIG$1: stopping vLLM and the simulator"
  stop_all
  exit "$2"
}
trap 'on_signal TERM 143' TERM
trap 'on_signal INT 130' INT
# Whatever ends the script (set -e included) must not leave a process behind.
trap 'stop_all' EXIT

# TRUSTEE's serving (its scripts/serve_env.sh): Qwen3-8B stretched by YaRN from its 32768 native positions to a
# 131072-token context, so that a long episode's history still fits every role's prompt. Unset takes these
# defaults; an empty variable leaves its flag out, and vLLM uses the model's own length and RoPE.
# vLLM parses --hf-overrides as one JSON object and sets each dict value on the model's config whole. The key is
# rope_parameters, transformers 5's name (its rope_scaling is an alias that sets the same attribute); the value
# carries no rope_theta, which vLLM's Qwen3 then fills in with 1000000, Qwen3's own.
default_hf_overrides='{"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}'
max_model_len="${SIMULATOR_MAX_MODEL_LEN-131072}"
hf_overrides="${SIMULATOR_HF_OVERRIDES-$default_hf_overrides}"
vllm_args=(--model "${SIMULATOR_MODEL:-Qwen/Qwen3-8B}" --served-model-name simulator --host 127.0.0.1
           --port "$vllm_port" --tensor-parallel-size "${SIMULATOR_TP:-4}" --enable-auto-tool-choice
           --tool-call-parser hermes)
# vLLM checks --max-model-len against the model's max_position_embeddings (40960 for Qwen3-8B) without scaling it
# by a YaRN factor, so a longer context needs VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, as TRUSTEE sets it.
[ -z "$max_model_len" ] || { vllm_args+=(--max-model-len "$max_model_len"); export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; }
[ -z "$hf_overrides" ] || vllm_args+=(--hf-overrides "$hf_overrides")
python3 -m vllm.entrypoints.openai.api_server "${vllm_args[@]}" &
vllm_pid=$!
log "vLLM started (pid $vllm_pid); waiting up to ${wait_s} s for http://127.0.0.1:${vllm_port}/health"

healthy() {
  python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)" \
    "http://127.0.0.1:${vllm_port}/health" 2>/dev/null
}
deadline=$((SECONDS + wait_s))
until healthy; do
  if ! kill -0 "$vllm_pid" 2>/dev/null; then
    status=0; wait "$vllm_pid" || status=$?
    vllm_pid=""
    log "vLLM exited with status $status before it became healthy; the simulator was not started"
    exit $(( status == 0 ? 1 : status ))
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    log "vLLM did not become healthy within ${wait_s} s (SIMULATOR_VLLM_WAIT_S); the simulator was not started." \
        "See vLLM's log above; raise SIMULATOR_VLLM_WAIT_S if the model is still downloading or loading"
    exit 1
  fi
  # In the background, so that a signal is handled at once rather than after the sleep.
  sleep "$poll_s" & wait $! || true
done
log "vLLM is healthy; starting the simulator"

python3 -m toolcanary.simulator serve "${simulator_args[@]}" &
sim_pid=$!

# Poll rather than `wait -n`: it behaves the same on every bash, and a signal still interrupts the short wait.
while kill -0 "$vllm_pid" 2>/dev/null && kill -0 "$sim_pid" 2>/dev/null; do
  sleep 1 & wait $! || true
done
if ! kill -0 "$vllm_pid" 2>/dev/null; then
  gone="$vllm_pid" gone_name="vLLM" other="$sim_pid" other_name="the simulator"; vllm_pid=""
else
  gone="$sim_pid" gone_name="the simulator" other="$vllm_pid" other_name="vLLM"; sim_pid=""
fi
status=0; wait "$gone" 2>/dev/null || status=$?
log "$gone_name exited with status $status; stopping $other_name so the container ends"
stop "$other" "$other_name"
exit $(( status == 0 ? 1 : status ))
