"""The llm backend against stub OpenAI-compatible upstreams: every way a model answer goes wrong ends right.

Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_llm_backend.py -q
Each case checks the HTTP status (never 5xx), the outcome and cause, the persisted record and the metric.
"""

from __future__ import annotations

import json
import random
import re
import time

import pytest

from toolcanary.contract import DifficultySettings, RoleRecord, SimulatedTask
from toolcanary.simulator.library_index import load_index
from toolcanary.simulator.scripted import make_task

TASK = make_task(load_index(), DifficultySettings(num_tools=3, expected_calls=1, user_persona=0, query_ambiguity=0,
                                                  expected_turns=0), "llm-fixture", 0).model_dump(mode="json")
EXPECTED = TASK["expected_tool_calls"][0]
CALL = {"id": "c1", "function": {"name": EXPECTED["name"], "arguments": EXPECTED["arguments"]}}
TRAJECTORY = [{"role": "user", "content": TASK["first_user_query"]}, {"role": "assistant", "tool_calls": [CALL]},
              {"role": "tool", "content": "{}", "tool_call_id": "c1"}, {"role": "assistant", "content": "Done."}]


@pytest.fixture
def llm(make_client, upstreams, tmp_path, issue):
    for stub in upstreams:
        stub.reset()

    def make(**overrides):
        values = {"backend": "llm", "upstreams": [upstreams[0].url], "timeout_s": 0.5, "retries": 1,
                  "backoff_s": 0.01, "runs_dir": tmp_path / "runs"} | overrides
        client = make_client(**values)
        issue(client, TASK)  # the roles play only tasks the simulator issued
        return client

    return make


def records(tmp_path, role):
    path = tmp_path / "runs" / "test" / "simulator" / "step_none.jsonl"
    return [r for r in map(RoleRecord.model_validate_json, path.read_text().splitlines()) if r.role == role]


def post_tool(client):
    response = client.post("/v1/tool", json={"task_key": TASK["task_key"], "history": TRAJECTORY[:2], "call": CALL})
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize(
    ("content", "result", "reward"),
    [
        ('```json\n{"result": "Event created: evt_91", "reward": 1}\n```', "Event created: evt_91", 1),
        ('<think>\nShould I return {"result": "no", "reward": -1}? No.\n</think>\n\n{"result": "ok", "reward": 0}',
         "ok", 0),
        ('Here is the simulation:\n{"result": {"id": "evt_1", "status": "confirmed"}, "reward": "1"}',
         '{"id": "evt_1", "status": "confirmed"}', 1),
        ('{"result": "Created the event", "is_error": false, "reward": 1, "note": "cut off her', "Created the event", 1),
    ],
    ids=["fenced", "think-block", "chatter-and-object-result", "truncated-but-repairable"],
)
def test_answers_wrapped_in_fences_reasoning_or_cut_short_are_read(llm, upstreams, content, result, reward):
    client = llm()
    upstreams[0].push(content)
    answer = post_tool(client)
    assert answer["outcome"] == "ok" and answer["result"] == result and answer["reward"] == reward
    assert answer["prompt_tokens"] > 0 and answer["completion_tokens"] > 0
    text = client.get("/metrics").text
    assert 'toolcanary_simulator_calls_total{backend="llm",outcome="ok",role="tool"} 1' in text
    assert f'toolcanary_simulator_rewards_total{{reward="{reward}",role="tool"}} 1' in text


@pytest.mark.parametrize(
    ("reply", "cause"),
    [
        ('{"result": "the eve', "parse"),
        ("I cannot simulate this tool.", "parse"),
        ('{"answer": "Event created", "score": 1}', "validation"),
        ('{"result": "Event created", "reward": "high"}', "validation"),
        ('{"result": "Event created", "reward": 5}', "validation"),
        ((200, '{"result": "late", "reward": 1}', 1.5), "timeout"),
        ((500, "boom", 0.0), "upstream"),
    ],
    ids=["truncated", "prose", "wrong-fields", "wrong-type", "out-of-range", "slow", "http-500"],
)
def test_unusable_answers_end_aborted_with_their_cause_after_the_retries(llm, upstreams, tmp_path, reply, cause):
    client = llm()
    upstreams[0].push(reply, reply)
    answer = post_tool(client)
    assert answer["outcome"] == "aborted" and answer["abort_cause"] == cause
    assert answer["reward"] is None, "an aborted call never carries a made-up reward"
    assert answer["abort_detail"]
    record = records(tmp_path, "tool")[-1]
    assert (record.outcome, record.abort_cause, record.retries) == ("aborted", cause, 1)
    text = client.get("/metrics").text
    assert f'toolcanary_simulator_aborts_total{{cause="{cause}",role="tool"}} 1' in text
    assert 'toolcanary_simulator_retries_total{role="tool"} 1' in text


def test_a_failed_attempt_is_retried_and_the_retry_is_counted(llm, upstreams, tmp_path):
    client = llm(retries=2)
    upstreams[0].push((500, "overloaded", 0.0), '{"result": "fine", "reward": 1}')
    answer = post_tool(client)
    assert answer["outcome"] == "ok" and answer["result"] == "fine"
    assert records(tmp_path, "tool")[-1].retries == 1
    text = client.get("/metrics").text
    assert 'toolcanary_simulator_upstream_requests_total{result="http_5xx",upstream="upstream 1"} 1' in text
    assert re.search(r'toolcanary_simulator_tokens_total\{kind="prompt",role="tool"\} [1-9]', text)


@pytest.mark.parametrize(("backoff", "pauses_s"), [("exponential", 0.15 + 0.3), ("fixed", 0.1 + 0.1)],
                         ids=["exponential", "fixed"])
def test_attempts_pause_a_fixed_time_or_doubling_with_up_to_half_more(llm, upstreams, tmp_path, monkeypatch,
                                                                     backoff, pauses_s):
    monkeypatch.setattr(random, "random", lambda: 1.0)  # the most jitter the doubling pause adds: 50 %
    client = llm(retries=2, backoff=backoff, backoff_s=0.1)
    upstreams[0].push("not JSON", "still not JSON", "never JSON")
    started = time.monotonic()
    answer = post_tool(client)
    elapsed = time.monotonic() - started
    assert (answer["outcome"], answer["abort_cause"]) == ("aborted", "parse")
    assert len(upstreams[0].requests) == 3 and records(tmp_path, "tool")[-1].retries == 2
    assert pauses_s <= elapsed < pauses_s + 0.3, elapsed


def test_requests_are_spread_over_the_upstreams(llm, upstreams):
    client = llm(upstreams=[u.url for u in upstreams])
    for _ in range(6):
        assert post_tool(client)["outcome"] == "ok"
    assert len(upstreams[0].requests) == 3 and len(upstreams[1].requests) == 3


def _author_reply(body: dict):
    names = re.findall(r'"name": "([a-z_]+\.[a-z_]+)"', body["messages"][0]["content"])
    return 200, json.dumps({"expected_tool_calls": [names[0]], "user_intent": "Book the team offsite for May 4.",
                            "user_persona": "a busy office manager", "first_user_query": "Can you set up our offsite?"}), 0


def test_the_llm_task_author_builds_a_task_from_a_valid_answer_and_keys_stay_idempotent(llm, upstreams, diff):
    client = llm()
    upstreams[0].push(_author_reply)
    body = {"task_key": "llm-group", "difficulty": diff(num_tools=3)}
    task = client.post("/v1/task", json=body).json()["task"]
    assert task["first_user_query"] == "Can you set up our offsite?" and len(task["tools"]) == 3
    assert task["expected_tool_calls"][0]["name"] in {t["function"]["name"] for t in task["tools"]}
    assert client.post("/v1/task", json=body).json()["task"] == task
    assert len(upstreams[0].requests) == 1
    prompt = upstreams[0].requests[0]["messages"][0]["content"]
    assert "first_user_query" in prompt and upstreams[0].requests[0]["chat_template_kwargs"] == {"enable_thinking": True}


def test_a_task_naming_tools_it_was_not_given_is_a_validation_abort_and_the_key_stays_open(llm, upstreams, diff):
    client = llm()
    bad = json.dumps({"expected_tool_calls": ["made.up_tool"], "user_intent": "x", "user_persona": "y",
                      "first_user_query": "z"})
    upstreams[0].push(bad, bad, _author_reply)
    body = {"task_key": "llm-retry", "difficulty": diff(num_tools=2)}
    first = client.post("/v1/task", json=body).json()
    assert first["outcome"] == "aborted" and first["abort_cause"] == "validation" and first["task"] is None
    assert client.post("/v1/task", json=body).json()["outcome"] == "ok"


def test_an_abstention_task_asks_for_no_expected_calls(llm, upstreams, diff):
    client = llm()
    upstreams[0].push(lambda body: (200, json.dumps({"expected_tool_calls": [], "user_intent": "wants a poem",
                                                     "user_persona": "poet", "first_user_query": "Write a haiku."}), 0))
    task = client.post("/v1/task", json={"task_key": "llm-abstain", "difficulty": diff(call_expected=False)}).json()
    assert task["outcome"] == "ok" and task["task"]["call_expected"] is False
    assert "NONE of these tools" in upstreams[0].requests[0]["messages"][0]["content"]


def test_declining_an_abstention_task_is_judged_with_the_abstention_criteria(llm, upstreams, issue):
    client = llm()
    upstreams[0].push('{"reward": 1, "reasoning": "It said it cannot do this and called nothing."}')
    abstention = issue(client, TASK | {"task_key": "llm-abstain", "call_expected": False, "expected_tool_calls": []})
    declined = [TRAJECTORY[0], {"role": "assistant", "content": "I can't do that with the tools I have."}]
    verdict = client.post("/v1/verify", json={"task_key": abstention["task_key"], "trajectory": declined}).json()
    assert verdict["outcome"] == "ok" and verdict["reward"] == 1
    prompt = upstreams[0].requests[0]["messages"][0]["content"]
    assert "none of the offered tools can serve the request" in prompt and verdict["criteria"][0] in prompt


def test_an_empty_user_response_ends_the_episode(llm, upstreams):
    client = llm()
    upstreams[0].push('<think>goal met</think>{"response": "", "reward": 1}')
    answer = client.post("/v1/user", json={"task_key": TASK["task_key"], "history": TRAJECTORY}).json()
    assert answer == answer | {"outcome": "ok", "reply": "", "done": True, "reward": 1}


def test_the_verifier_reads_reward_and_reasoning_and_reports_the_criteria_shown(llm, upstreams):
    client = llm()
    upstreams[0].push('{"reward": 0, "reasoning": "Called the right tool but with a wrong da')
    verdict = client.post("/v1/verify", json={"task_key": TASK["task_key"], "trajectory": TRAJECTORY, "num_criteria": 2}).json()
    assert verdict["outcome"] == "ok" and verdict["reward"] == 0 and verdict["reasoning"].startswith("Called")
    assert len(verdict["criteria"]) == 2


def test_decisions_that_need_no_model_are_made_without_an_upstream_call(llm, upstreams, issue):
    client = llm()
    unknown = {"function": {"name": "not.offered", "arguments": {}}}
    answer = client.post("/v1/tool", json={"task_key": TASK["task_key"], "call": unknown}).json()
    assert answer["is_error"] is True and answer["reward"] == -1
    lazy = client.post("/v1/verify", json={"task_key": TASK["task_key"], "trajectory": TRAJECTORY[:1]}).json()
    assert lazy["reward"] == -1
    abstention = issue(client, TASK | {"task_key": "llm-abstain", "call_expected": False, "expected_tool_calls": []})
    called = client.post("/v1/verify", json={"task_key": abstention["task_key"], "trajectory": TRAJECTORY}).json()
    assert called["reward"] == -1
    assert upstreams[0].requests == []


def test_a_slow_upstream_gets_fewer_requests_than_a_fast_one(stub_factory, tmp_path):
    import asyncio

    import httpx

    from toolcanary.simulator.app import create_app
    from toolcanary.simulator.settings import SimulatorSettings

    slow = stub_factory(default=(200, '{"result": "slow", "reward": 1}', 0.3))
    fast = stub_factory(default=(200, '{"result": "fast", "reward": 1}', 0.0))
    settings = SimulatorSettings(run="spread", runs_dir=tmp_path, backend="llm", upstreams=[slow.url, fast.url],
                                 timeout_s=5, retries=0)
    app = create_app(settings)
    task = SimulatedTask.model_validate(TASK)
    app.state.service.registry.add(task.difficulty, task)  # the roles play only tasks the simulator issued

    async def main():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sim", timeout=30) as http:
            async def worker():
                for _ in range(6):
                    response = await http.post("/v1/tool", json={"task_key": TASK["task_key"], "call": CALL})
                    assert response.json()["outcome"] == "ok"

            await asyncio.gather(*[worker() for _ in range(4)])
        await app.state.service.backend.aclose()
        app.state.service.store.close()

    asyncio.run(main())
    assert len(slow.requests) + len(fast.requests) == 24
    assert len(fast.requests) > 2 * len(slow.requests), (len(fast.requests), len(slow.requests))
