#!/usr/bin/env bash
# GRPO for Qwen3-4B on 4 GPUs against the ToolCanary simulator (which serves Qwen3-8B on the other 4).
# Deviations from TRUSTEE's run.sh, with reasons: README.md in this folder. Not run here (no GPU).
# Usage: recipes/trustee-qwen3-4b/train.sh [extra verl overrides ...]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"

# ---- run identity and volumes (read by the agent loop, the curriculum manager and the callback) ----
export TOOLCANARY_TRAIN_RUN="${TOOLCANARY_TRAIN_RUN:-trustee-qwen3-4b}"
export TOOLCANARY_CHECKPOINTS_DIR="${TOOLCANARY_CHECKPOINTS_DIR:-/volumes/checkpoints}"
export TOOLCANARY_RESULTS_DIR="${TOOLCANARY_RESULTS_DIR:-/volumes/results}"
export TOOLCANARY_RUNS_DIR="${TOOLCANARY_RUNS_DIR:-/volumes/runs}"
export TOOLCANARY_TRAIN_SIMULATOR_URL="${TOOLCANARY_TRAIN_SIMULATOR_URL:-http://simulator:8300}"
MODEL="${MODEL:-Qwen/Qwen3-4B}"
NNODES="${NNODES:-1}"
GPUS_PER_NODE="${GPUS_PER_NODE:-4}"
DATA="${TOOLCANARY_RUNS_DIR}/${TOOLCANARY_TRAIN_RUN}/data"
VERL_CKPT="${TOOLCANARY_RUNS_DIR}/${TOOLCANARY_TRAIN_RUN}/verl"

# ---- placeholder rows: 16 tasks per step x 200 steps (the simulator writes the tasks) ----
[ -f "$DATA/train.parquet" ] || python -m toolcanary.train seed-data --out "$DATA" --rows 3200

python3 -m verl.trainer.main_ppo \
  algorithm.adv_estimator=grpo \
  algorithm.norm_adv_by_std_in_grpo=True \
  algorithm.use_kl_in_reward=False \
  data.train_files="$DATA/train.parquet" \
  data.val_files="$DATA/val.parquet" \
  data.train_batch_size=16 \
  data.max_prompt_length=8192 \
  data.max_response_length=16384 \
  data.filter_overlong_prompts=False \
  data.return_raw_chat=True \
  data.shuffle=False \
  actor_rollout_ref.model.path="$MODEL" \
  actor_rollout_ref.model.use_remove_padding=True \
  actor_rollout_ref.model.enable_gradient_checkpointing=True \
  actor_rollout_ref.actor.strategy=fsdp2 \
  actor_rollout_ref.actor.optim.lr=1e-6 \
  actor_rollout_ref.actor.ppo_mini_batch_size=4 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 \
  actor_rollout_ref.actor.use_kl_loss=True \
  actor_rollout_ref.actor.kl_loss_coef=0.001 \
  actor_rollout_ref.actor.kl_loss_type=low_var_kl \
  actor_rollout_ref.actor.entropy_coeff=0 \
  actor_rollout_ref.actor.clip_ratio=0.2 \
  actor_rollout_ref.actor.fsdp_config.param_offload=True \
  actor_rollout_ref.actor.fsdp_config.optimizer_offload=True \
  actor_rollout_ref.actor.checkpoint.save_contents='[model,optimizer,extra,hf_model]' \
  actor_rollout_ref.ref.fsdp_config.param_offload=True \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.mode=async \
  actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
  actor_rollout_ref.rollout.enforce_eager=True \
  actor_rollout_ref.rollout.free_cache_engine=True \
  actor_rollout_ref.rollout.n=8 \
  actor_rollout_ref.rollout.temperature=1.0 \
  actor_rollout_ref.rollout.top_p=1.0 \
  actor_rollout_ref.rollout.prompt_length=8192 \
  actor_rollout_ref.rollout.response_length=16384 \
  actor_rollout_ref.rollout.multi_turn.enable=True \
  actor_rollout_ref.rollout.multi_turn.format=hermes \
  actor_rollout_ref.rollout.multi_turn.max_parallel_calls=3 \
  actor_rollout_ref.rollout.agent.num_workers=8 \
  actor_rollout_ref.rollout.agent.agent_loop_config_path="$HERE/agent_loops.yaml" \
  actor_rollout_ref.rollout.agent.default_agent_loop=toolcanary_simulated \
  actor_rollout_ref.rollout.agent.agent_loop_manager_class=toolcanary.train.verl_hooks.CurriculumAgentLoopManager \
  actor_rollout_ref.rollout.val_kwargs.n=4 \
  actor_rollout_ref.rollout.val_kwargs.temperature=0.6 \
  actor_rollout_ref.rollout.val_kwargs.top_p=0.95 \
  actor_rollout_ref.rollout.val_kwargs.top_k=20 \
  trainer.use_v1=True \
  trainer.checkpoint_callback_class=toolcanary.train.verl_hooks.PublishingCheckpointCallback \
  trainer.nnodes="$NNODES" \
  trainer.n_gpus_per_node="$GPUS_PER_NODE" \
  trainer.total_epochs=1 \
  trainer.total_training_steps=200 \
  trainer.save_freq=10 \
  trainer.test_freq=200 \
  trainer.val_before_train=False \
  trainer.max_actor_ckpt_to_keep=3 \
  trainer.resume_mode=auto \
  trainer.default_local_dir="$VERL_CKPT" \
  trainer.project_name=toolcanary \
  trainer.experiment_name="$TOOLCANARY_TRAIN_RUN" \
  trainer.logger='["console","tensorboard"]' \
  "$@"
