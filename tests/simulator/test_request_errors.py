"""A bad request body gets the 422 FastAPI itself would give: the simulator's POST routes read bodies with their
own code (`contract_route`), and this checks them against a plain FastAPI app declaring the same request
models, built here, whose `RequestValidationError`s go through the same `ErrorBody` rule.

Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_request_errors.py -q
"""

from __future__ import annotations

import json

import pytest
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.testclient import TestClient

from toolcanary.contract import GoldRequest, TaskRequest, ToolRequest, UserRequest, VerifyRequest
from toolcanary.simulator.contract_route import MAX_ERRORS, validation_error_response

JSON = {"content-type": "application/json"}
TOOL_CALL = {"function": {"name": "weather/get", "arguments": {"city": "Oslo"}}}


@pytest.fixture(scope="module")
def fastapi_reference() -> TestClient:
    """A plain FastAPI app with the simulator's request models as body parameters of the same paths."""
    app = FastAPI()
    app.add_exception_handler(RequestValidationError, lambda _, exc: validation_error_response(exc.errors()))

    @app.post("/v1/task")
    async def task(request: TaskRequest) -> dict:
        return {}

    @app.post("/v1/tool")
    async def tool(request: ToolRequest) -> dict:
        return {}

    @app.post("/v1/user")
    async def user(request: UserRequest) -> dict:
        return {}

    @app.post("/v1/verify")
    async def verify(request: VerifyRequest) -> dict:
        return {}

    @app.post("/v1/gold")
    async def gold(request: GoldRequest) -> dict:
        return {}

    with TestClient(app) as client:
        yield client


def _body(value) -> bytes:
    return value if isinstance(value, bytes) else json.dumps(value).encode()


BAD_BODIES = [
    # (path, body, headers)
    ("/v1/task", {"difficulty": {}}, JSON),  # missing fields, at two levels
    ("/v1/task", {"task_key": "k", "difficulty": {"num_tools": "many", "expected_calls": 1, "user_persona": 0,
                                                  "query_ambiguity": 0, "expected_turns": 0}}, JSON),  # wrong type
    ("/v1/task", {"task_key": 7, "difficulty": []}, JSON),  # wrong types at the top
    ("/v1/tool", {"task_key": {"nested": {"deeper": ["k"]}}, "call": TOOL_CALL}, JSON),  # nesting where a string goes
    ("/v1/tool", {"task_key": "k", "call": {"function": {"name": "f", "arguments": {"a": 1}}, "extra": [[1]]},
                  "history": [[{"role": "user", "content": "hi"}]]}, JSON),  # an extra level and an unknown field
    ("/v1/tool", {"task_key": "k", "call": {"function": {"name": "f", "arguments": "[1, 2"}}}, JSON),
    ("/v1/tool", {"task_key": "k", "call": TOOL_CALL, "surprise": 1}, JSON),  # a field the contract forbids
    ("/v1/tool", b'{"task_key": ', JSON),  # not JSON: cut short
    ("/v1/user", b'{"task_key": "k",}', JSON),  # not JSON: a trailing comma
    ("/v1/user", b"null", JSON),  # JSON, but nothing
    ("/v1/user", b"", JSON),  # no body at all
    ("/v1/user", [{"task_key": "k"}], JSON),  # an array, not an object
    ("/v1/verify", {"task_key": "k", "trajectory": [{"role": "robot"}] * 30, "num_criteria": 9}, JSON),  # > 20
    ("/v1/verify", {"task_key": "k", "trajectory": []}, {"content-type": "text/plain"}),  # not sent as JSON
    ("/v1/verify", {"task_key": "k", "trajectory": "none"}, {"content-type": "application/problem+json"}),  # JSON
    ("/v1/gold", {"task_key": "x" * 300, "step": -1}, {"content-type": "application/json; charset=utf-8"}),
]


@pytest.mark.parametrize(("path", "body", "headers"), BAD_BODIES,
                         ids=[f"{n}{path}" for n, (path, _, _) in enumerate(BAD_BODIES)])
def test_a_bad_body_gets_the_422_a_plain_fastapi_app_gives(client, fastapi_reference, path, body, headers):
    ours = client.post(path, content=_body(body), headers=headers)
    reference = fastapi_reference.post(path, content=_body(body), headers=headers)
    assert reference.status_code == 422, reference.text  # the case is a bad body for FastAPI too
    assert ours.status_code == 422, ours.text
    assert ours.json() == reference.json()


def test_a_body_without_a_content_type_is_not_read_as_json_as_under_fastapi(client, fastapi_reference):
    body = json.dumps({"task_key": "k", "history": []}).encode()
    ours, reference = client.post("/v1/user", content=body), fastapi_reference.post("/v1/user", content=body)
    assert ours.status_code == reference.status_code == 422
    assert ours.json() == reference.json()
    assert ours.json()["detail"][0]["got"].startswith("b'")  # the bytes, not a parsed object


def test_the_422_names_the_field_cuts_the_input_and_counts_what_it_leaves_out(client):
    answer = client.post("/v1/verify", json={"task_key": "k" * 1000, "trajectory": [{"role": "robot"}] * 30})
    body = answer.json()
    assert answer.status_code == 422 and len(body["detail"]) == MAX_ERRORS
    assert body["error"].startswith("invalid request: field 'task_key': String should have at most 200 characters")
    assert "errors in all, the first 20 listed" in body["error"] and "/docs" in body["error"]
    assert all(len(item["got"]) <= 200 for item in body["detail"])
    cut = client.post("/v1/tool", content=b'{"task_key": "k", "call": ', headers=JSON).json()
    assert cut["detail"] == [{"field": "body", "expected": "valid JSON (decode error at position 26)",
                              "type": "json_invalid", "got": "Expecting value"}]


def test_a_good_body_still_reaches_the_role(client, new_task):
    task = new_task(client)
    answer = client.post("/v1/user", content=_body({"task_key": task["task_key"], "history": []}),
                         headers={"content-type": "application/json; charset=utf-8"})
    assert answer.status_code == 200 and answer.json()["outcome"] == "ok"
