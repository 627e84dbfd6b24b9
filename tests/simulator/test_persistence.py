"""Every role call is one flushed JSON line per step file; answered task keys survive a kill and restart.

Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_persistence.py -q
The restart tests use a different seed after the restart: only a task reloaded from disk can come back equal.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from toolcanary.contract import RoleRecord


def read_records(path) -> list[RoleRecord]:
    return [RoleRecord.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]


def test_each_role_call_is_a_record_in_its_step_file_and_flushed_at_once(client, settings, diff):
    records_dir = settings.runs_dir / "test" / "simulator"
    task = client.post("/v1/task", json={"task_key": "p1", "step": 3, "episode_id": "ep-9",
                                         "difficulty": diff()}).json()["task"]
    expected = task["expected_tool_calls"][0]
    client.post("/v1/tool", json={"task_key": task["task_key"], "step": 3, "call": {"function": expected}})
    client.post("/v1/user", json={"task_key": task["task_key"], "step": 12345, "history": []})
    client.post("/v1/verify", json={"task_key": task["task_key"], "trajectory": []})
    # Read while the service is still running: nothing may sit in a buffer.
    step3 = read_records(records_dir / "step_0003.jsonl")
    assert [r.role for r in step3] == ["task", "tool"]
    assert step3[0].episode_id == "ep-9" and step3[0].response["task"] == task and step3[0].run == "test"
    assert step3[0].request["task_key"] == "p1" and step3[0].latency_s >= 0
    assert step3[1].response["reward"] == 1 and step3[1].backend == "scripted"
    assert [r.role for r in read_records(records_dir / "step_12345.jsonl")] == ["user"]
    assert [r.role for r in read_records(records_dir / "step_none.jsonl")] == ["verify"]
    # Every task and conversation of the run: readable by its owner (and group), nobody else.
    assert {p.stat().st_mode & 0o777 for p in records_dir.glob("step_*.jsonl")} == {0o640}


def test_a_new_service_on_the_same_run_reloads_answered_keys(make_client, new_task, tmp_path):
    first = make_client(runs_dir=tmp_path / "runs", run="r", seed=1)
    answered = new_task(first, "group-a", num_tools=5)
    restarted = make_client(runs_dir=tmp_path / "runs", run="r", seed=2)
    assert new_task(restarted, "group-a", num_tools=5) == answered
    assert new_task(restarted, "group-b", num_tools=5) != new_task(first, "group-b", num_tools=5)


def test_a_partial_last_line_from_a_crash_is_skipped_and_later_records_stay_readable(make_client, new_task,
                                                                                    tmp_path):
    first = make_client(runs_dir=tmp_path / "runs", run="r")
    answered = new_task(first, "kept")
    path = tmp_path / "runs" / "r" / "simulator" / "step_none.jsonl"
    with path.open("a") as handle:
        handle.write('{"contract_version": "1.0", "role": "ta')  # killed mid-write
    restarted = make_client(runs_dir=tmp_path / "runs", run="r", seed=5)
    assert new_task(restarted, "kept") == answered
    new_task(restarted, "after-crash")
    lines = path.read_text().splitlines()
    assert lines[1].endswith('"role": "ta'), "the partial line stays as it was, alone on its line"
    assert [json.loads(line)["request"]["task_key"] for n, line in enumerate(lines) if n != 1] == [
        "kept", "kept", "after-crash"]


def _start(tmp_path, port: int, seed: int) -> subprocess.Popen:
    env = os.environ | {"TOOLCANARY_RUNS_DIR": str(tmp_path / "runs"), "TOOLCANARY_SIMULATOR_TOKEN": "s3cret-persistence-token"}
    process = subprocess.Popen(
        [sys.executable, "-m", "toolcanary.simulator", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--backend", "scripted", "--run", "killed", "--seed", str(seed), "--log-level", "warning"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read().decode()[-2000:]
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.2)
    _stop(process, signal.SIGKILL)
    raise AssertionError("the simulator did not become healthy within 60 s")


def _stop(process: subprocess.Popen, sig: int) -> None:
    if process.poll() is None:
        process.send_signal(sig)
        process.wait(timeout=20)
    process.stderr.close()


@pytest.mark.slow
def test_a_killed_server_process_loses_nothing_it_answered(tmp_path, diff):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    headers = {"Authorization": "Bearer s3cret-persistence-token"}
    process = _start(tmp_path, port, seed=1)
    try:
        base = f"http://127.0.0.1:{port}"
        answered = {}
        for n in range(6):
            body = {"task_key": f"group-{n}", "step": n % 2, "difficulty": diff(num_tools=3, expected_calls=2)}
            answered[n] = httpx.post(f"{base}/v1/task", json=body, headers=headers, timeout=10).json()["task"]
        _stop(process, signal.SIGKILL)
    finally:
        _stop(process, signal.SIGKILL)
    process = _start(tmp_path, port, seed=99)
    try:
        for n, task in answered.items():
            body = {"task_key": f"group-{n}", "step": 5, "difficulty": diff(num_tools=3, expected_calls=2)}
            again = httpx.post(f"{base}/v1/task", json=body, headers=headers, timeout=10).json()["task"]
            assert again == task, f"group-{n} changed across the restart"
    finally:
        _stop(process, signal.SIGTERM)
    records_dir = tmp_path / "runs" / "killed" / "simulator"
    before = read_records(records_dir / "step_0000.jsonl") + read_records(records_dir / "step_0001.jsonl")
    assert sorted(r.request["task_key"] for r in before) == [f"group-{n}" for n in range(6)]
    assert len(read_records(records_dir / "step_0005.jsonl")) == 6


def test_a_record_that_cannot_be_written_is_a_500_with_a_reason_not_a_silent_loss(settings, diff):
    from fastapi.testclient import TestClient

    from toolcanary.simulator.app import create_app

    app = create_app(settings)
    records_dir = settings.runs_dir / "test" / "simulator"
    shutil.rmtree(records_dir)  # it holds only the start's libraries.jsonl yet
    records_dir.write_text("a file where the record folder should be")
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.post("/v1/task", json={"task_key": "lost", "difficulty": diff()})
    assert response.status_code == 500
    assert "simulator fault: NotADirectoryError" in response.json()["error"]
