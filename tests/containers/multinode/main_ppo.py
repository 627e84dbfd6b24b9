"""Stands in for `python3 -m verl.trainer.main_ppo` on the Ray head of tests/containers/test_multinode.py.

train.sh hands it the recipe's real arguments (its wiring loop, and the cluster address it adds when
NNODES > 1). It composes them with verl's own main_ppo up to `ray.init` (toolcanary.train.gpu.recipe_check's
compose_like_main_ppo), calls `ray.init` with exactly those arguments, as main_ppo would next, and then runs
one task pinned to another node of the cluster, which reports the environment it sees and writes a file into
the results volume. Everything it found is printed as one line, `PROBE <json>`, for the test to read.

Run (in the train image, on the head, through the python3 beside this file):
    PATH=/probe:$PATH bash /opt/toolcanary/recipes/trustee-qwen3-4b/train.sh
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from toolcanary.train.gpu.recipe_check import compose_like_main_ppo

# A secret train.sh keeps out of the wiring (verl prints its config): a worker has it from its own environment.
TOKEN = "TOOLCANARY_SIMULATOR_TOKEN"
MARK = "written-by-a-worker-node.txt"


@ray.remote(num_cpus=0)
def look(names: list[str], results: str) -> dict:
    """On the node it is pinned to: the node's id, the variables the task sees, and a file in the results volume."""
    folder = Path(results)
    folder.mkdir(parents=True, exist_ok=True)
    node = ray.get_runtime_context().get_node_id()
    (folder / MARK).write_text(node)
    return {"node": node, "env": {name: os.environ.get(name) for name in names}}


def main(argv: list[str]) -> None:
    config, ray_init = compose_like_main_ppo(argv)
    ray.init(**ray_init)
    head = ray.get_runtime_context().get_node_id()
    alive = [node for node in ray.nodes() if node["Alive"]]
    others = [node["NodeID"] for node in alive if node["NodeID"] != head]
    wiring = ray_init.get("runtime_env", {}).get("env_vars", {})
    seen = None
    if others:
        names = sorted({*wiring, TOKEN})
        results = os.path.join(wiring["TOOLCANARY_RESULTS_DIR"], wiring["TOOLCANARY_TRAIN_RUN"])
        pinned = NodeAffinitySchedulingStrategy(node_id=others[0], soft=False)
        seen = ray.get(look.options(scheduling_strategy=pinned).remote(names, results), timeout=300)
    print("PROBE " + json.dumps({
        "ray_init": {key: value for key, value in ray_init.items() if key != "runtime_env"},
        "wiring": wiring,
        "recipe": {"nnodes": int(config.trainer.nnodes), "n_gpus_per_node": int(config.trainer.n_gpus_per_node)},
        "head": head,
        "head_env": {TOKEN: os.environ.get(TOKEN)},
        "nodes": [{"id": node["NodeID"], "gpus": node["Resources"].get("GPU", 0)} for node in alive],
        "worker": seen,
    }), flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
