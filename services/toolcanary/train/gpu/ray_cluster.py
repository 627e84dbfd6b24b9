"""Wait until the Ray cluster of a multi-node run has every node and its GPUs, before verl starts.

verl's main_ppo refuses to start when the cluster holds fewer GPUs than trainer.nnodes x n_gpus_per_node, and
the other nodes join the head only once it runs (`make ray-worker HEAD=<head>` on each). `train.sh` starts the
head and then runs this, on the head, when NNODES > 1:

    python -m toolcanary.train wait-for-nodes --nodes 2 --gpus-per-node 4 [--timeout-s 1800] [--address auto]
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from toolcanary.contract.errors import ContractError, UsageError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClusterSize:
    """The alive nodes of a Ray cluster and the GPUs they offer."""

    nodes: int
    gpus: float

    @classmethod
    def of(cls, nodes: list[dict]) -> ClusterSize:
        """From `ray.nodes()`: dead nodes stay listed there, flagged `Alive: False`."""
        alive = [node for node in nodes if node.get("Alive")]
        return cls(len(alive), sum(node.get("Resources", {}).get("GPU", 0) for node in alive))

    def holds(self, nodes: int, gpus_per_node: int) -> bool:
        return self.nodes >= nodes and self.gpus >= nodes * gpus_per_node


def wait_for_nodes(nodes: int, gpus_per_node: int, *, address: str = "auto", timeout_s: float = 1800,
                   every_s: float = 2, report_every_s: float = 60,
                   clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> ClusterSize:
    """Connect to the cluster at `address` and return its size once it holds `nodes` nodes with `gpus_per_node`
    GPUs each, logging who is missing every `report_every_s`.

    Raises:
        ContractError: bad counts, or the cluster is still short after `timeout_s` (naming what joined).
    """
    if nodes < 1 or gpus_per_node < 0:
        raise UsageError("--nodes / --gpus-per-node", "at least 1 node and 0 or more GPUs per node",
                         f"{nodes} nodes, {gpus_per_node} GPUs per node")
    import ray

    ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    try:
        started = clock()
        reported = started - report_every_s  # the first look that finds the cluster short says so
        while True:
            size = ClusterSize.of(ray.nodes())
            if size.holds(nodes, gpus_per_node):
                log.info("Ray cluster ready: %d nodes, %g GPUs", size.nodes, size.gpus)
                return size
            now = clock()
            if now - started >= timeout_s:
                raise ContractError("the Ray cluster", f"{nodes} nodes with {gpus_per_node} GPUs each",
                                    f"{size.nodes} nodes with {size.gpus:g} GPUs after {timeout_s:.0f} s",
                                    "Start each other node with `make ray-worker HEAD=<this node's address>` (its "
                                    "GPUS_PER_NODE the same), and check that it reaches this node on RAY_PORT")
            if now - reported >= report_every_s:
                reported = now
                log.info("waiting for the Ray cluster: %d of %d nodes, %g of %d GPUs (make ray-worker "
                         "HEAD=<this node's address> on the others)", size.nodes, nodes, size.gpus,
                         nodes * gpus_per_node)
            sleep(every_s)
    finally:
        ray.shutdown()
