#!/usr/bin/env bash
# GRPO for Qwen3-4B on 4 GPUs against the ToolCanary simulator: the recipe is trustee_qwen3_4b.yaml,
# this script only adds the wiring. It writes the placeholder rows once, checks the recipe without a
# GPU (verl's main_ppo up to the start of Ray, then the checks its workers would fail late), publishes
# the base model as step 0 (once; verl's own saves begin at step 10), and then starts verl. With
# NNODES > 1 it first starts this node as the Ray head and waits for the other nodes (README.md in this
# folder, "Multi-node on Ray").
# Deviations from TRUSTEE's run.sh, with reasons: README.md in this folder.
# Usage: recipes/trustee-qwen3-4b/train.sh [--check] [extra Hydra overrides ...]
#   --check   stop before verl starts: seed rows, recipe check and step 0 only (no Ray, no GPU)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
check_only=false
if [ "${1:-}" = "--check" ]; then check_only=true; shift; fi

# ---- wiring (read by the agent loop, the curriculum manager, the callback and the recipe) ----
export TOOLCANARY_TRAIN_RUN="${TOOLCANARY_TRAIN_RUN:-trustee-qwen3-4b}"
export TOOLCANARY_CHECKPOINTS_DIR="${TOOLCANARY_CHECKPOINTS_DIR:-/volumes/checkpoints}"
export TOOLCANARY_RESULTS_DIR="${TOOLCANARY_RESULTS_DIR:-/volumes/results}"
export TOOLCANARY_RUNS_DIR="${TOOLCANARY_RUNS_DIR:-/volumes/runs}"
export TOOLCANARY_TRAIN_SIMULATOR_URL="${TOOLCANARY_TRAIN_SIMULATOR_URL:-http://simulator:8300}"
# TRUSTEE's agent loop, prompts and curriculum draw, from a TRUSTEE checkout (README.md, "Get TRUSTEE").
export TOOLCANARY_TRAIN_MODE="${TOOLCANARY_TRAIN_MODE:-trustee}"
export TOOLCANARY_TRAIN_TRUSTEE_DIR="${TOOLCANARY_TRAIN_TRUSTEE_DIR:-${TRUSTEE_DIR:-/trustee}}"
export TENSORBOARD_DIR="${TENSORBOARD_DIR:-$TOOLCANARY_RESULTS_DIR/$TOOLCANARY_TRAIN_RUN/tensorboard}"
DATA="$TOOLCANARY_RUNS_DIR/$TOOLCANARY_TRAIN_RUN/data"

# Every Ray worker, on any node, gets the same wiring as concrete values (secrets stay in the
# environment: verl prints its whole config). Hydra quoting: a value must not contain a single quote.
wiring=()
for name in $(compgen -e | grep -E '^(TOOLCANARY_|TENSORBOARD_DIR$)' | grep -v -E 'TOKEN|SECRET|KEY' | sort); do
  wiring+=("++ray_kwargs.ray_init.runtime_env.env_vars.$name='${!name}'")
done
# Several nodes: verl's main_ppo joins the Ray cluster this node heads (started below) instead of starting a
# Ray of its own, which would see this node's GPUs only.
nodes=${NNODES:-1}
cluster=()
if [ "$nodes" -gt 1 ]; then cluster=("++ray_kwargs.ray_init.address=auto"); fi
args=(--config-path "$HERE" --config-name trustee_qwen3_4b
      "actor_rollout_ref.rollout.agent.agent_loop_config_path=$HERE/agent_loops.yaml" "${wiring[@]}" "${cluster[@]}"
      "$@")

# ---- placeholder training rows (16 tasks per step x 200 steps) and the held-out validation tasks ----
[ -f "$DATA/train.parquet" ] || python3 -m toolcanary.train seed-data --out "$DATA" --rows 3200 \
  --run "$TOOLCANARY_TRAIN_RUN"

python3 -m toolcanary.train check-recipe -- "${args[@]}"
# Step 0 is the model every delta is measured from: published before the first step, as every save is after.
python3 -m toolcanary.train publish-base -- "${args[@]}"
$check_only && exit 0

# ---- several nodes: this node is the Ray head, and verl starts once every node has joined ----
# Ray gets this container's GPUs alone (the trainer's reservation) and exactly GPUS_PER_NODE of them (the
# recipe's default, 4); the dashboard and its job API, which run whatever they are sent, stay on the loopback;
# RAY_HEAD_ADDRESS, when set, is the address this node advertises (the one the workers join); no usage report
# to Ray's developers. verl refuses to start with fewer GPUs than NNODES x GPUS_PER_NODE, hence the wait.
if [ "$nodes" -gt 1 ]; then
  ray start --head --port="${RAY_PORT:-6379}" --num-gpus="${GPUS_PER_NODE:-4}" --dashboard-host=127.0.0.1 \
    --disable-usage-stats ${RAY_HEAD_ADDRESS:+"--node-ip-address=$RAY_HEAD_ADDRESS"}
  python3 -m toolcanary.train wait-for-nodes --nodes "$nodes" --gpus-per-node "${GPUS_PER_NODE:-4}"
fi
exec python3 -m verl.trainer.main_ppo "${args[@]}"
