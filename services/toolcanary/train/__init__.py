"""The trainer: GRPO on verl against the simulator, TRUSTEE's curriculum, atomically published checkpoints.

    python -m toolcanary.train cpu --run demo --steps 2 --save-every 1     # the CPU embedded run
    recipes/trustee-qwen3-4b/train.sh                                     # the GPU recipe (verl main_ppo)

`agent_loop` is the episode verl runs on both paths; `cpu_run` drives it on CPU; `verl_hooks` holds the
classes the GPU trainer loads by name. See docs/train.md.
"""
