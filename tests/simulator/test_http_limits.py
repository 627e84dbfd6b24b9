"""Bad input and access control: 422 naming the field, 413 over the body limit, 401 without the token, docs.

Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_http_limits.py -q
"""

from __future__ import annotations

import json

import pytest


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"difficulty": {}}, "task_key"),
        ({"task_key": "k", "difficulty": {"num_tools": 0, "expected_calls": 1, "user_persona": 0,
                                          "query_ambiguity": 0, "expected_turns": 0}}, "difficulty.num_tools"),
        ({"task_key": "k", "difficulty": {"num_tools": 2, "expected_calls": 1, "user_persona": "expert",
                                          "query_ambiguity": 0, "expected_turns": 0}}, "difficulty.user_persona"),
        ({"task_key": "k", "surprise": 1, "difficulty": {"num_tools": 2, "expected_calls": 1, "user_persona": 0,
                                                         "query_ambiguity": 0, "expected_turns": 0}}, "surprise"),
    ],
)
def test_a_malformed_request_is_a_422_naming_the_field_and_what_it_takes(client, body, field):
    response = client.post("/v1/task", json=body)
    assert response.status_code == 422
    error = response.json()
    assert f"'{field}'" in error["error"] and "/docs" in error["error"]
    assert error["detail"][0]["field"] == field and error["detail"][0]["expected"]


def test_a_body_that_is_not_json_is_a_422_about_the_body(client):
    response = client.post("/v1/tool", content=b'{"task": ', headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] == "body"
    assert "valid JSON" in response.json()["error"]


def test_a_tool_call_with_arguments_that_are_not_an_object_is_answered_as_an_invalid_call(client, new_task):
    # Arguments may be any JSON value (the trustee mode passes them on as TRUSTEE does); the toolcanary mode's
    # tool role answers anything but an object as an invalid call, without a model.
    task = new_task(client)
    name = task["tools"][0]["function"]["name"]
    response = client.post("/v1/tool", json={"task_key": task["task_key"],
                                             "call": {"function": {"name": name, "arguments": "[1, 2]"}}})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["is_error"], body["reward"]) == (True, -1) and "must be a JSON object" in body["result"]
    malformed = client.post("/v1/tool", json={"task_key": task["task_key"],
                                              "call": {"function": {"name": name, "arguments": "[1, 2"}}})
    assert malformed.status_code == 422 and "call.function.arguments" in malformed.json()["error"]


def test_bodies_over_the_limit_are_refused_with_413_declared_or_streamed(make_client):
    client = make_client(max_body_bytes=2048)
    big = json.dumps({"task_key": "k" * 5000, "difficulty": {}}).encode()
    declared = client.post("/v1/task", content=big, headers={"content-type": "application/json"})
    assert declared.status_code == 413 and "at most 2048 bytes" in declared.json()["error"]

    def chunks():
        for start in range(0, len(big), 512):
            yield big[start : start + 512]

    streamed = client.post("/v1/task", content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413
    assert client.get("/health").status_code == 200


def test_the_bearer_token_guards_everything_but_health(make_client, diff):
    client = make_client(token="s3cret-guards-token")
    assert client.get("/health").status_code == 200
    for method, path in [("post", "/v1/task"), ("post", "/v1/tool"), ("post", "/v1/user"), ("post", "/v1/verify"),
                         ("get", "/metrics"), ("get", "/docs"), ("get", "/openapi.json")]:
        response = getattr(client, method)(path)
        assert response.status_code == 401, path
        assert "TOOLCANARY_SIMULATOR_TOKEN" in response.json()["error"]
    wrong = client.post("/v1/task", headers={"Authorization": "Bearer nope"},
                        json={"task_key": "k", "difficulty": diff()})
    assert wrong.status_code == 401
    right = client.post("/v1/task", headers={"Authorization": "Bearer s3cret-guards-token"},
                        json={"task_key": "k", "difficulty": diff()})
    assert right.status_code == 200 and right.json()["outcome"] == "ok"


def test_health_reports_contract_version_backend_and_run_and_docs_are_served(client):
    from toolcanary.contract import CONTRACT_VERSION

    # /health is readiness now: the same fields, plus which probe answered and what it checked.
    body = client.get("/health").json()
    assert {k: body[k] for k in ("status", "contract_version", "backend", "mode", "run")} == {
        "status": "ok", "contract_version": CONTRACT_VERSION, "backend": "scripted", "mode": "toolcanary",
        "run": "test"}
    assert body["probe"] == "ready"
    schema = client.get("/openapi.json").json()
    assert {"/v1/task", "/v1/tool", "/v1/user", "/v1/verify", "/health", "/metrics"} <= set(schema["paths"])
    assert client.get("/docs").status_code == 200


def test_metrics_count_calls_rewards_and_latency_per_role(client, new_task):
    from prometheus_client.parser import text_string_to_metric_families

    task = new_task(client)
    client.post("/v1/verify", json={"task_key": task["task_key"], "trajectory": []})
    answer = client.get("/metrics")
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    lines = set(answer.text.splitlines())
    assert 'toolcanary_simulator_calls_total{backend="scripted",outcome="ok",role="task"} 1.0' in lines
    assert 'toolcanary_simulator_rewards_total{reward="-1",role="verify"} 1.0' in lines
    assert 'toolcanary_simulator_latency_seconds_count{role="verify"} 1.0' in lines
    assert 'toolcanary_simulator_latency_seconds_bucket{le="+Inf",role="task"} 1.0' in lines
    assert "# TYPE toolcanary_simulator_calls_total counter" in lines
    assert "# TYPE toolcanary_simulator_latency_seconds histogram" in lines
    # A Prometheus parser reads the whole text, every family under the one prefix.
    families = {family.name: family for family in text_string_to_metric_families(answer.text)}
    assert all(name.startswith("toolcanary_simulator_") for name in families)
    memory = families["toolcanary_simulator_resident_memory_bytes"].samples[0].value
    assert memory > 1 << 20  # read from the process at the scrape
