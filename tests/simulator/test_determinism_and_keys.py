"""Determinism of the scripted backend and idempotent task keys, also under concurrent identical requests.

Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_determinism_and_keys.py -q
"""

from __future__ import annotations

import asyncio

import httpx

from toolcanary.simulator.app import create_app
from toolcanary.simulator.settings import SimulatorSettings


def test_same_seed_and_key_give_the_same_task_and_the_same_results(make_client, new_task, tmp_path):
    first = make_client(runs_dir=tmp_path / "a", seed=7)
    second = make_client(runs_dir=tmp_path / "b", seed=7)
    other_seed = make_client(runs_dir=tmp_path / "c", seed=8)
    settings = {"num_tools": 6, "expected_calls": 2, "query_ambiguity": 1, "expected_turns": 1}
    task_a, task_b = new_task(first, "k1", **settings), new_task(second, "k1", **settings)
    assert task_a == task_b
    assert new_task(other_seed, "k1", **settings) != task_a
    expected = task_a["expected_tool_calls"][0]
    body = {"task_key": task_a["task_key"], "call": {"function": {"name": expected["name"], "arguments": expected["arguments"]}}}
    results = {c.post("/v1/tool", json=body).json()["result"] for c in (first, second, first)}
    assert len(results) == 1


def test_different_keys_give_different_tasks(client, new_task):
    tasks = [new_task(client, f"key-{n}") for n in range(5)]
    assert len({t["task_id"] for t in tasks}) == 5
    assert len({t["first_user_query"] for t in tasks}) > 1


def test_a_draw_names_the_same_task_under_any_key_and_without_one_the_key_draws(client, diff):
    """Private keys (a run's tag in them) can name tasks that are the same in every run: the content comes from
    the request's draw; only the key differs."""
    def task(key, draw=None, **difficulty):
        body = {"task_key": key, "difficulty": diff(num_tools=3, expected_calls=2, **difficulty)}
        answer = client.post("/v1/task", json=body | ({"draw": draw} if draw else {}))
        assert answer.status_code == 200, answer.text
        return answer.json()["task"]

    run_1, run_2 = task("run1-aaaa-warm-0-000", "warm-0-000"), task("run2-bbbb-warm-0-000", "warm-0-000")
    assert run_1["task_key"] != run_2["task_key"]
    assert {k: v for k, v in run_1.items() if k != "task_key"} == {k: v for k, v in run_2.items() if k != "task_key"}
    assert task("run1-aaaa-warm-0-001", "warm-0-001")["task_id"] != run_1["task_id"]
    plain = task("warm-0-000")  # no draw: the key draws, as before contract 1.7
    assert {k: v for k, v in plain.items() if k != "task_key"} == {k: v for k, v in run_1.items() if k != "task_key"}


def test_a_key_asked_again_gets_the_same_task_and_counts_as_a_cache_hit(client, new_task):
    first = new_task(client, "group-1", num_tools=3)
    again = new_task(client, "group-1", num_tools=3)
    assert first == again
    assert 'toolcanary_simulator_task_cache_hits_total 1' in client.get("/metrics").text


def test_a_key_reused_with_other_settings_is_refused_with_409(client, new_task, diff):
    new_task(client, "group-2", num_tools=3)
    response = client.post("/v1/task", json={"task_key": "group-2", "difficulty": diff(num_tools=4)})
    assert response.status_code == 409
    body = response.json()
    assert "group-2" in body["error"] and body["detail"][0]["field"] == "task_key"


class CountingBackend:
    """The scripted backend, slowed down and counting author calls, to widen the race window."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.author_calls = inner, inner.name, 0

    async def author(self, request, abstain):
        self.author_calls += 1
        await asyncio.sleep(0.05)
        return await self.inner.author(request, abstain)

    def __getattr__(self, item):
        return getattr(self.inner, item)


def test_concurrent_identical_requests_share_one_author_call(tmp_path, diff):
    from toolcanary.simulator.library_index import load_index
    from toolcanary.simulator.scripted import ScriptedBackend

    backend = CountingBackend(ScriptedBackend(load_index(), seed=0))
    app = create_app(SimulatorSettings(run="race", runs_dir=tmp_path), backend=backend)

    async def main():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sim") as http:
            body = {"task_key": "group-race", "difficulty": diff(num_tools=5, expected_calls=2)}
            return await asyncio.gather(*[http.post("/v1/task", json=body) for _ in range(16)])

    responses = asyncio.run(main())
    app.state.service.store.close()
    assert all(r.status_code == 200 for r in responses)
    tasks = [r.json()["task"] for r in responses]
    assert all(t == tasks[0] for t in tasks)
    assert backend.author_calls == 1
    records = (tmp_path / "race" / "simulator" / "step_none.jsonl").read_text().splitlines()
    assert len(records) == 16, "every role call is persisted, cache hits included"


def test_a_failed_key_is_retried_unless_failures_are_kept_as_in_the_trustee_mode(diff):
    from toolcanary.contract import DifficultySettings, TaskResponse
    from toolcanary.simulator.backend import RoleOutput
    from toolcanary.simulator.task_registry import TaskRegistry

    difficulty = DifficultySettings.model_validate(diff())
    calls = []

    async def author_failing_once():
        calls.append(1)
        if len(calls) == 1:
            return RoleOutput(TaskResponse(outcome="aborted", abort_cause="parse", abort_detail="first try"))
        return RoleOutput(TaskResponse(outcome="aborted", abort_cause="timeout", abort_detail="second try"))

    async def ask_twice(registry):
        calls.clear()
        first, _ = await registry.get_or_create("k", difficulty, author_failing_once)
        second, cached = await registry.get_or_create("k", difficulty, author_failing_once)
        return first.response.abort_detail, second.response.abort_detail, cached, len(calls)

    # The toolcanary mode retries a failed key; the trustee mode replaces it by another key, so every episode of
    # the group must see the same failure.
    assert asyncio.run(ask_twice(TaskRegistry())) == ("first try", "second try", False, 2)
    assert asyncio.run(ask_twice(TaskRegistry(keep_failures=True))) == ("first try", "first try", True, 1)
