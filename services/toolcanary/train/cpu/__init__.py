"""The trainer's CPU path: `python -m toolcanary.train cpu` in one process, and the starting policies it trains.

`run` is the loop (rollout through `toolcanary.train.rollout`, the update in `toolcanary.train.grpo`, publish);
`embedded_simulator` starts the scripted simulator it talks to; `generation_client` samples the policy;
`tiny_policy`, `tiny_tokenizer`, `smollm2_policy` and `policy_files` build the policies a CPU can train;
`warm_start`, `gold_conversations`, `held_out` and `starting_policy_cache` make the starting policy;
`trainer_state` saves and resumes a run. Nothing here is imported on the GPU path.
"""
