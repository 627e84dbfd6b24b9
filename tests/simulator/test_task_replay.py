"""`--replay-tasks-of RUN`: the simulator serves the tasks RUN's simulator answered, matched by draw, under the new
keys; what RUN cannot answer is an aborted task, never a new one.

Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_task_replay.py -q
"""

from __future__ import annotations

import pytest

from toolcanary.simulator.app import create_app
from toolcanary.simulator.settings import SimulatorSettings


def _ask(client, key, draw=None, **difficulty):
    body = {"task_key": key, "difficulty": {"num_tools": 3, "expected_calls": 2, "user_persona": 0,
                                           "query_ambiguity": 0, "expected_turns": 0} | difficulty}
    answer = client.post("/v1/task", json=body | ({"draw": draw} if draw else {}))
    assert answer.status_code == 200, answer.text
    return answer.json()


def _without_key(task: dict) -> dict:
    return {k: v for k, v in task.items() if k != "task_key"}


@pytest.fixture
def recorded(make_client):
    """Run `first` (seed 0) answered two draws and one request without a draw."""
    first = make_client(run="first", seed=0)
    tasks = {draw: _ask(first, f"first-aaaa-{draw}", draw)["task"] for draw in ("0-s0001-g00", "0-s0001-g01")}
    _ask(first, "first-aaaa-nodraw")
    return tasks


def test_a_replaying_simulator_of_another_seed_serves_the_recorded_tasks_under_its_own_keys(make_client, recorded):
    replaying = make_client(run="second", seed=5, replay_tasks_of="first")
    fresh = make_client(run="third", seed=5)
    for draw, task in recorded.items():
        served = _ask(replaying, f"second-bbbb-{draw}", draw)["task"]
        assert served["task_key"] == f"second-bbbb-{draw}"
        assert _without_key(served) == _without_key(task)
        # Seed 5 alone would author another task for the draw: the replay, not the seed, made them equal.
        assert _without_key(_ask(fresh, f"third-cccc-{draw}", draw)["task"]) != _without_key(task)
    # The replayed task is issued under the new key: its roles play it.
    key = "second-bbbb-0-s0001-g00"
    verdict = replaying.post("/v1/verify", json={"task_key": key, "trajectory": []})
    assert verdict.status_code == 200 and verdict.json()["outcome"] == "ok"


@pytest.mark.parametrize(("draw", "difficulty", "says"), [
    (None, {}, "must name its draw"),
    ("0-s0009-g00", {}, "never drew '0-s0009-g00'"),
    ("0-s0001-g00", {"num_tools": 2}, "the runs' seeds or curricula differ"),
])
def test_what_the_replayed_run_cannot_answer_is_an_aborted_task_not_a_new_one(make_client, recorded, draw,
                                                                              difficulty, says):
    replaying = make_client(run="second", replay_tasks_of="first")
    answer = _ask(replaying, "second-bbbb-x", draw, **difficulty)
    assert answer["outcome"] == "aborted" and answer["task"] is None
    assert answer["abort_cause"] == "rejected" and says in answer["abort_detail"] and "'first'" in answer["abort_detail"]


def test_a_run_without_records_or_without_draws_or_itself_is_refused_at_start(make_client, tmp_path):
    with pytest.raises(ValueError, match="found no such folder"):
        create_app(SimulatorSettings(run="second", runs_dir=tmp_path / "runs", replay_tasks_of="nobody"))
    old = make_client(run="old")
    _ask(old, "old-key")  # a request without a draw, as before contract 1.8
    with pytest.raises(ValueError, match="found none"):
        create_app(SimulatorSettings(run="second", runs_dir=tmp_path / "runs", replay_tasks_of="old"))
    with pytest.raises(ValueError, match="names this run"):
        SimulatorSettings(run="same", runs_dir=tmp_path / "runs", replay_tasks_of="same")
