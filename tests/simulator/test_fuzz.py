"""Property-based fuzz of the request models: whatever arrives, the service answers below 500.

Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_fuzz.py -q
Three layers: arbitrary JSON bodies; valid bodies with one field replaced by arbitrary JSON; and well-formed
requests whose tool schemas, arguments and histories are arbitrary, which must all be answered `ok` (an
aborted answer there would mean the scripted roles crashed on odd input).
"""

from __future__ import annotations

import itertools
import json
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
from fastapi.testclient import TestClient  # noqa: E402

from toolcanary.contract import DifficultySettings, SimulatedTask  # noqa: E402
from toolcanary.simulator.app import create_app  # noqa: E402
from toolcanary.simulator.http_limits import json_depth, nests_within  # noqa: E402
from toolcanary.simulator.library_index import load_index  # noqa: E402
from toolcanary.simulator.scripted import make_task  # noqa: E402
from toolcanary.simulator.settings import SimulatorSettings  # noqa: E402

ENDPOINTS = ["/v1/task", "/v1/tool", "/v1/user", "/v1/verify"]
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=25,
)
TASK = make_task(load_index(), DifficultySettings(num_tools=3, expected_calls=2, user_persona=1, query_ambiguity=1,
                                                  expected_turns=1), "fuzz", 0).model_dump(mode="json")
CALL = {"id": "c1", "type": "function", "function": dict(TASK["expected_tool_calls"][0])}
VALID = {
    "/v1/task": {"task_key": "fz", "step": 1, "difficulty": TASK["difficulty"]},
    "/v1/tool": {"task_key": TASK["task_key"], "history": [{"role": "user", "content": "hi"}], "call": CALL},
    "/v1/user": {"task_key": TASK["task_key"], "history": [{"role": "assistant", "content": "Which one?"}]},
    "/v1/verify": {"task_key": TASK["task_key"], "trajectory": [{"role": "assistant", "tool_calls": [CALL]}], "num_criteria": 3},
}


def paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths(item, (*prefix, index))


def replaced(value, path, new):
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: replaced(value[head], rest, new)}
    return [replaced(item, rest, new) if index == head else item for index, item in enumerate(value)]


MUTATIONS = [(endpoint, path) for endpoint, body in VALID.items() for path in paths(body) if path]


KEYS = itertools.count()


def issue(client, task: dict) -> dict:
    """`task` registered as issued under its key in the simulator behind `client`."""
    made = SimulatedTask.model_validate(task)
    client.app.state.service.registry.add(made.difficulty, made)
    return task


@pytest.fixture(scope="module")
def fuzz_client(tmp_path_factory):
    runs = tmp_path_factory.mktemp("fuzz")
    with TestClient(create_app(SimulatorSettings(run="fuzz", runs_dir=runs, max_body_bytes=256 * 1024))) as client:
        issue(client, TASK)  # the roles play only tasks the simulator issued
        yield client


@FUZZ
@given(endpoint=st.sampled_from(ENDPOINTS), body=json_values)
def test_arbitrary_json_bodies_never_cause_a_server_error(fuzz_client, endpoint, body):
    response = fuzz_client.post(endpoint, json=body)
    assert response.status_code in {200, 409, 413, 422}, response.text


@FUZZ
@given(mutation=st.sampled_from(MUTATIONS), new=json_values)
def test_valid_bodies_with_one_field_replaced_never_cause_a_server_error(fuzz_client, mutation, new):
    endpoint, path = mutation
    response = fuzz_client.post(endpoint, json=replaced(VALID[endpoint], path, new))
    assert response.status_code in {200, 409, 413, 422}, response.text
    if response.status_code == 200:
        assert response.json()["outcome"] == "ok", response.json()


schema_keys = st.sampled_from(["type", "properties", "required", "enum", "minimum", "maximum", "items", "format",
                               "additionalProperties", "minProperties", "maxItems", "description"])
odd_schemas = st.recursive(st.dictionaries(schema_keys, json_values, max_size=5),
                           lambda inner: st.dictionaries(schema_keys, inner | json_values, max_size=5), max_leaves=12)
messages = st.one_of(
    st.builds(lambda c: {"role": "user", "content": c}, st.text(max_size=40)),
    st.builds(lambda c, a: {"role": "assistant", "content": c, "tool_calls": [
        {"id": "c1", "function": {"name": TASK["tools"][0]["function"]["name"], "arguments": a}}]},
        st.none() | st.text(max_size=40), st.dictionaries(st.text(max_size=8), json_values, max_size=3)),
    st.builds(lambda c, e: {"role": "tool", "content": c, "tool_call_id": "c1", "is_error": e},
              st.text(max_size=40), st.booleans()),
)


@FUZZ
@given(schema=odd_schemas, arguments=st.dictionaries(st.text(max_size=10), json_values, max_size=4),
       history=st.lists(messages, max_size=6), criteria=st.integers(1, 5))
def test_odd_schemas_arguments_and_histories_are_answered_ok(fuzz_client, schema, arguments, history, criteria):
    name = TASK["tools"][0]["function"]["name"]
    # Each odd task is issued under a key of its own, as the author would (the roles play only issued tasks).
    task = issue(fuzz_client, {**TASK, "task_key": f"fuzz-{next(KEYS)}",
                               "tools": [{"type": "function", "function": {"name": name, "parameters": schema}}],
                               "expected_tool_calls": [{"name": name, "arguments": arguments}]})
    call = {"function": {"name": name, "arguments": arguments}}
    for endpoint, body in [("/v1/tool", {"task_key": task["task_key"], "history": history, "call": call}),
                           ("/v1/user", {"task_key": task["task_key"], "history": history}),
                           ("/v1/verify", {"task_key": task["task_key"], "trajectory": history, "num_criteria": criteria})]:
        response = fuzz_client.post(endpoint, json=body)
        assert response.status_code == 200, response.text
        assert response.json()["outcome"] == "ok", response.json()


@settings(max_examples=400, deadline=None)
@given(st.recursive(st.none() | st.integers() | st.text(alphabet='[]{}"\\ab', max_size=6),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                        st.text(alphabet='[]{}"\\ab', max_size=4), inner, max_size=3), max_leaves=40),
       st.integers(1, 12))
def test_both_depth_checks_agree_with_the_depth_of_the_parsed_value(value, limit):
    # Brackets inside strings (and escaped quotes) must not count: the alphabet is full of them.
    def depth(node) -> int:
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        return 0 if children is None else 1 + max(map(depth, children), default=0)

    body = json.dumps(value).encode()
    assert json_depth(body) == depth(value)
    assert nests_within(body, limit) == (depth(value) <= limit)
    assert not nests_within(b"[" * (limit + 4) + b"]" * (limit + 3), limit)  # unbalanced: never "within"
