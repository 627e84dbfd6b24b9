"""The trainer's GPU path around verl: what verl's own trainer loads and what prepares its run.

`verl_hooks` is loaded by name from the recipe's YAML (the agent loop, the reward, the step's metrics row);
`recipe_check` runs verl's main_ppo up to Ray and checks what GPU workers would reject; `seed_data` writes the
recipe's placeholders; `base_checkpoint` publishes the starting model as step 0 and `disk_plan` sizes its disk;
`ray_cluster` waits for a multi-node cluster. Nothing here is imported on the CPU path.
"""
