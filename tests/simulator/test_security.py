"""The simulator's trust boundary and limits: tasks only from the registry, a token unless --insecure, bounded
steps, errors and nesting, no server path in an error body, connection limits, a bounded restart.

Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_security.py -q
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
import tracemalloc

import httpx
import pytest
from conftest import serving
from fastapi.testclient import TestClient

from toolcanary.simulator.__main__ import main
from toolcanary.simulator.app import create_app
from toolcanary.simulator.settings import SimulatorSettings

TOKEN_ENV = "TOOLCANARY_SIMULATOR_TOKEN"


def _records(tmp_path) -> str:
    return "".join(p.read_text() for p in (tmp_path / "runs" / "test" / "simulator").glob("step_*.jsonl"))


def _call(task: dict) -> dict:
    return {"id": "c1", "type": "function", "function": {"name": task["tools"][0]["function"]["name"],
                                                         "arguments": {}}}


# --- forged tasks --------------------------------------------------------------------------------
def test_a_task_for_a_key_never_issued_is_a_422_and_earns_no_reward(client, new_task, tmp_path):
    real = new_task(client, "issued")
    forged = {**real, "task_key": "never-issued"}
    trajectory = [{"role": "user", "content": real["first_user_query"]}, {"role": "assistant", "content": "done"}]
    for route, body in (("/v1/verify", {"task_key": forged["task_key"], "trajectory": trajectory}),
                        ("/v1/tool", {"task_key": forged["task_key"], "call": _call(forged)}),
                        ("/v1/user", {"task_key": forged["task_key"], "history": trajectory}),
                        ("/v1/gold", {"task_key": forged["task_key"]})):
        response = client.post(route, json=body)
        assert response.status_code == 422, (route, response.text)
        assert "never issued" in response.json()["error"] and "reward" not in response.json()
        assert "/v1/task" in response.json()["error"] and response.json()["detail"][0]["field"] == "task_key"
    assert "never-issued" not in _records(tmp_path)  # refused before the backend ran: nothing recorded


def test_a_role_request_cannot_bring_its_own_task_only_the_key_of_a_stored_one(client, new_task, tmp_path):
    real = new_task(client, "g-forge")
    forged = {**real, "expected_tool_calls": [], "user_intent": "anything"}
    trajectory = [{"role": "user", "content": "anything"}, {"role": "assistant", "content": "anything"}]
    response = client.post("/v1/verify", json={"task_key": real["task_key"], "task": forged,
                                               "trajectory": trajectory, "num_criteria": 1})
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["detail"][0]["field"] == "task" and body["detail"][0]["type"] == "extra_forbidden"
    assert "reward" not in body and '"role":"verify"' not in _records(tmp_path)  # refused before the backend ran
    honest = client.post("/v1/verify", json={"task_key": real["task_key"], "trajectory": trajectory, "num_criteria": 1})
    assert honest.status_code == 200 and honest.json()["outcome"] == "ok"


def test_the_stored_task_survives_a_restart_and_still_guards_its_key(make_client, new_task):
    real = new_task(make_client(), "kept")
    again = make_client()  # a new app on the same records: the registry is reloaded from them
    assert again.post("/v1/gold", json={"task_key": real["task_key"]}).status_code == 200
    assert again.post("/v1/gold", json={"task_key": "never-issued"}).status_code == 422


# --- the token -----------------------------------------------------------------------------------
def test_serve_refuses_to_start_without_a_token_unless_insecure(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    argv = ["serve", "--check", "--run", "ok", "--runs-dir", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert TOKEN_ENV in err and "--insecure" in err
    assert main([*argv, "--insecure"]) == 0
    monkeypatch.setenv(TOKEN_ENV, "a-long-random-string")
    assert main(argv) == 0


def test_with_a_token_every_role_route_needs_it(make_client):
    client = make_client(token="s3cret-security-token")
    body = {"task_key": "k", "difficulty": {"num_tools": 2, "expected_calls": 1, "user_persona": 0,
                                            "query_ambiguity": 0, "expected_turns": 0}}
    for route in ("/v1/task", "/v1/tool", "/v1/user", "/v1/verify", "/v1/gold", "/v1/ready"):
        assert client.post(route, json=body).status_code in (401, 405)
    assert client.post("/v1/task", json=body, headers={"Authorization": "Bearer s3cret-security-token"}).status_code == 200


# --- limits --------------------------------------------------------------------------------------
def test_a_step_beyond_the_bound_is_a_422_without_a_server_path(client, tmp_path):
    body = {"task_key": "k", "step": 10**300, "difficulty": {"num_tools": 2, "expected_calls": 1,
                                                             "user_persona": 0, "query_ambiguity": 0,
                                                             "expected_turns": 0}}
    response = client.post("/v1/task", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["field"] == "step"
    assert str(tmp_path) not in response.text
    assert client.post("/v1/task", json={**body, "step": 10**5}).status_code == 200
    assert client.post("/v1/task", json={**body, "step": 10**5 + 1}).status_code == 422


def test_an_infrastructure_fault_is_a_500_that_names_no_server_path(tmp_path):
    app = create_app(SimulatorSettings(run="test", runs_dir=tmp_path / "runs"))
    store = app.state.service.store

    def full_disk(record):
        raise OSError(28, "No space left on device", str(store.directory / "step_0001.jsonl"))

    store.append = full_disk
    with TestClient(app, raise_server_exceptions=False) as client:
        body = {"task_key": "k", "step": 1, "difficulty": {"num_tools": 2, "expected_calls": 1, "user_persona": 0,
                                                           "query_ambiguity": 0, "expected_turns": 0}}
        response = client.post("/v1/task", json=body)
        assert response.status_code == 500
        assert "OSError" in response.json()["error"] and str(tmp_path) not in response.text
        store.directory.chmod(0o500)
        try:
            ready = client.get("/health")
        finally:
            store.directory.chmod(0o700)
        if ready.status_code == 503:  # root can write anywhere; elsewhere readiness fails, without the path
            assert str(tmp_path) not in ready.text and "record folder" in ready.text
        assert str(tmp_path) not in client.get("/health").text


def test_a_422_lists_at_most_20_errors_however_many_the_body_has(client, new_task):
    task = new_task(client, "many")
    history = [{"role": "nobody", "content": 1}] * 500
    response = client.post("/v1/user", json={"task_key": task["task_key"], "history": history})
    assert response.status_code == 422
    assert len(response.json()["detail"]) == 20 and "errors in all" in response.json()["error"]
    assert len(response.content) < 20_000


@pytest.mark.parametrize("depth", [400, 5000])
def test_deeply_nested_arguments_are_a_422_before_the_backend_runs(client, new_task, tmp_path, depth):
    task = new_task(client, "deep")
    # Built as text: the standard encoder itself gives up (RecursionError) on nesting this deep.
    arguments = '{"a": ' * depth + "{}" + "}" * depth
    call = json.dumps(_call(task)).replace('"arguments": {}', f'"arguments": {arguments}')
    before = _records(tmp_path).count('"role":"tool"')
    response = client.post("/v1/tool", content=f'{{"task_key": {json.dumps(task["task_key"])}, "call": {call}}}',
                           headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text[:300]
    assert "nests too deep" in response.json()["error"] and "at most 32" in response.json()["error"]
    assert _records(tmp_path).count('"role":"tool"') == before


def test_half_open_connections_are_closed_and_do_not_starve_health(tmp_path):
    sockets = []
    with serving(tmp_path) as (url, port):
        try:
            for _ in range(400):
                sock = socket.create_connection(("127.0.0.1", port))
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # a head never finished
                sockets.append(sock)
            assert httpx.get(f"{url}/health", timeout=5).status_code == 200
            time.sleep(2.5)
            sockets[0].settimeout(5)
            assert sockets[0].recv(1) == b""  # closed by the server after head_timeout_s
            assert httpx.get(f"{url}/health/live", timeout=5).status_code == 200
        finally:
            for sock in sockets:
                sock.close()


def test_an_unfinished_head_after_an_answered_request_is_closed_too(tmp_path):
    with serving(tmp_path) as (_, port), socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(5)
        sock.sendall(b"GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /health/live HTTP/1.1\r\nHost: x\r\n")  # the second head never finished
        started = time.monotonic()
        while sock.recv(65536):
            pass
        assert time.monotonic() - started < 4  # closed after head_timeout_s (1 s), not the keep-alive timeout


def test_an_oversized_request_head_is_a_431_and_the_connection_closes(tmp_path):
    with serving(tmp_path, head_timeout_s=30) as (url, port), socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(10)
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        answer = b""
        try:
            for n in range(200):  # 200 headers of 1 KiB: 200 KiB of head, never finished
                sock.sendall(b"x-pad-%d: %s\r\n" % (n, b"a" * 1024))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server closed the connection while the client still sent
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
        assert b"at most 65536 bytes" in answer
        assert httpx.get(f"{url}/health/live", timeout=5).status_code == 200


def test_a_restart_on_thousands_of_keys_is_fast_and_small(tmp_path):
    settings = SimulatorSettings(run="test", runs_dir=tmp_path / "runs")
    difficulty = {"num_tools": 8, "expected_calls": 2, "user_persona": 0, "query_ambiguity": 0, "expected_turns": 0}
    with TestClient(create_app(settings)) as client:
        assert client.post("/v1/task", json={"task_key": "k0", "step": 0, "difficulty": difficulty}).status_code == 200
    # 3000 answered keys: the one record copied under other keys (the records are what a restart reads).
    records = settings.records_dir / "step_0000.jsonl"
    line = records.read_text().splitlines()[0]
    records.write_text("".join(line.replace('"k0"', f'"k{key}"') + "\n" for key in range(3000)))
    tracemalloc.start()
    started = time.perf_counter()
    try:
        app = create_app(settings)
        elapsed, (_, peak) = time.perf_counter() - started, tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    registry = app.state.service.registry
    assert len(registry) == 3000 and registry.in_memory == 0
    assert elapsed < 30 and peak < 32 * 2**20, (elapsed, peak)
    with TestClient(app) as client:  # an old key is still answered from the records, the same task
        task = client.post("/v1/task", json={"task_key": "k2999", "difficulty": difficulty}).json()["task"]
        assert task["task_key"] == "k2999"
        assert client.post("/v1/gold", json={"task_key": task["task_key"]}).status_code == 200


def _role_records(tmp_path) -> int:
    return sum(_records(tmp_path).count(f'"role":"{role}"') for role in ("tool", "user", "verify"))


@pytest.mark.parametrize(("name", "body", "says"), [
    # Arguments sent as a JSON string: the body's depth guard does not look inside strings.
    ("string arguments 400 deep", lambda task: _tool_body(task, json.dumps("[" * 400 + "]" * 400)), "nest too deep"),
    ("string arguments 5000 deep", lambda task: _tool_body(task, json.dumps("[" * 5000 + "]" * 5000)),
     "nest too deep"),
    ("lone surrogate in arguments", lambda task: _tool_body(task, '{"city": "\\ud800"}'), "lone UTF-16 surrogate"),
    ("lone surrogate in history", lambda task: json.dumps({"task_key": task["task_key"], "history": [
        {"role": "user", "content": "x"}]}).replace('"x"', '"\\udc00 low"'), "lone UTF-16 surrogate"),
    ("raw 0xff byte", lambda task: json.dumps({"task_key": task["task_key"], "history": [
        {"role": "user", "content": "x"}]}).encode().replace(b'"x"', b'"\xff"'), "not UTF-8"),
    ("5001-digit step", lambda task: json.dumps({"task_key": task["task_key"], "history": []}).replace(
        '"history"', '"step": ' + "9" * 5001 + ', "history"'), "5001 digits"),
])
def test_a_malformed_body_is_a_422_before_the_backend_runs(client, new_task, tmp_path, name, body, says):
    task = new_task(client, "bad-bodies")
    path = "/v1/tool" if "arguments" in name else "/v1/user"
    before = _role_records(tmp_path)
    content = body(task)
    response = client.post(path, content=content if isinstance(content, bytes) else content.encode(),
                           headers={"content-type": "application/json"})
    assert response.status_code == 422, (name, response.status_code, response.text[:300])
    assert says in response.json()["error"] or says in json.dumps(response.json()["detail"]), response.text[:300]
    assert _role_records(tmp_path) == before  # the backend never ran


def _tool_body(task: dict, arguments: str) -> str:
    call = json.dumps(_call(task)).replace('"arguments": {}', f'"arguments": {arguments}')
    return f'{{"task_key": {json.dumps(task["task_key"])}, "call": {call}}}'
