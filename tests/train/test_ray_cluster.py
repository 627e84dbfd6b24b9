"""The head of a multi-node run waits for every node and its GPUs before verl starts (train.sh, NNODES > 1):
what counts, when it gives up and what it says then. Ray itself is a stand-in here; a real two-node cluster
forms in tests/containers/test_multinode.py.

Run: .venvs/train/bin/python -m pytest tests/train/test_ray_cluster.py -q
"""

from __future__ import annotations

import sys
import types

import pytest

from toolcanary.contract.errors import ContractError
from toolcanary.train.gpu.ray_cluster import ClusterSize, wait_for_nodes


def node(gpus: float, alive: bool = True) -> dict:
    return {"Alive": alive, "Resources": {"CPU": 8.0, "GPU": gpus} if gpus else {"CPU": 8.0}}


class FakeRay(types.ModuleType):
    """`ray` answering ray.nodes() from a script of cluster states, one per look (the last one repeats)."""

    def __init__(self, states: list[list[dict]]) -> None:
        super().__init__("ray")
        self.states, self.looks, self.calls = states, 0, []

    def init(self, **kwargs) -> None:
        self.calls.append(("init", kwargs))

    def nodes(self) -> list[dict]:
        state = self.states[min(self.looks, len(self.states) - 1)]
        self.looks += 1
        return state

    def shutdown(self) -> None:
        self.calls.append(("shutdown", {}))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def fake_ray(monkeypatch):
    def install(states: list[list[dict]]) -> FakeRay:
        fake = FakeRay(states)
        monkeypatch.setitem(sys.modules, "ray", fake)
        return fake

    return install


def test_dead_nodes_and_their_gpus_do_not_count():
    assert ClusterSize.of([node(4), node(4, alive=False), node(0)]) == ClusterSize(2, 4)
    assert ClusterSize(2, 8).holds(2, 4) and not ClusterSize(2, 7).holds(2, 4) and not ClusterSize(1, 8).holds(2, 4)


def test_it_returns_once_the_last_node_has_joined_and_leaves_the_cluster(fake_ray):
    fake = fake_ray([[node(4)], [node(4)], [node(4), node(4)]])
    clock = Clock()
    size = wait_for_nodes(2, 4, address="10.0.0.1:6379", clock=clock, sleep=clock.sleep, every_s=2)
    assert size == ClusterSize(2, 8) and fake.looks == 3 and clock.now == 4
    assert fake.calls[0][0] == "init" and fake.calls[0][1]["address"] == "10.0.0.1:6379"
    assert fake.calls[-1][0] == "shutdown"  # the driver leaves, so verl's main_ppo is the cluster's only job


def test_a_node_without_its_gpus_is_still_waited_for(fake_ray):
    clock = Clock()
    fake_ray([[node(4), node(0)], [node(4), node(4)]])
    assert wait_for_nodes(2, 4, clock=clock, sleep=clock.sleep) == ClusterSize(2, 8)


def test_a_cluster_still_short_after_the_timeout_names_what_joined_and_what_to_run(fake_ray):
    clock = Clock()
    fake = fake_ray([[node(4)]])
    with pytest.raises(ContractError) as stopped:
        wait_for_nodes(3, 4, timeout_s=30, clock=clock, sleep=clock.sleep, every_s=5)
    message = str(stopped.value)
    assert "3 nodes with 4 GPUs each" in message and "1 nodes with 4 GPUs after 30 s" in message
    assert "make ray-worker HEAD=" in message
    assert fake.calls[-1][0] == "shutdown"


def test_counts_that_are_no_counts_are_refused_before_ray_starts(fake_ray):
    fake = fake_ray([[node(4)]])
    with pytest.raises(ContractError):
        wait_for_nodes(0, 4)
    assert fake.calls == []
