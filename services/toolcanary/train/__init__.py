"""The trainer: GRPO on verl against the simulator, TRUSTEE's curriculum, atomically published checkpoints.

    python -m toolcanary.train cpu --run demo --steps 2 --save-every 1     # the CPU embedded run
    recipes/trustee-qwen3-4b/train.sh                                     # the GPU recipe (verl main_ppo)

The folder shows what runs where: `cpu/` only on the CPU path (the one-process run and the policies it
trains), `gpu/` only around verl's own trainer (the hooks its YAML names, the recipe's checks), and beside them
what both paths run: `agent_loop` (the episode verl runs), `rollout`, `grpo`, `curriculum`, the simulator's
client and check, the step metrics and the publisher. See docs/train.md.
"""
