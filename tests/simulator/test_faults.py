"""What the simulator does about faults: readiness that means something, torn record files, bounded memory.

- Liveness (/health/live) and readiness (/health/ready, /health, and /v1/ready behind the token) differ: a
  simulator whose record folder cannot be written, or whose upstream is down, is alive but not ready. Both
  name the mode the simulator plays.
- Drill (torn tails, the simulator's records): a record file truncated mid-line, then written to by a
  restarted service and read back: nothing lost but the torn line, which is reported. A broken line in
  the middle that no writer fenced off stops the service from starting, naming the file and the line.
- The task registry keeps a bounded number of tasks in memory and reads older ones back from disk.

Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_faults.py -q
"""

from __future__ import annotations

import logging

import pytest

from toolcanary.contract import CONTRACT_VERSION, ContractError


def test_liveness_and_readiness_are_distinguishable(make_client, settings, tmp_path):
    client = make_client(runs_dir=tmp_path / "runs", run="probe")
    live, ready = client.get("/health/live").json(), client.get("/health/ready").json()
    assert live["probe"] == "live" and ready["probe"] == "ready" and live["contract_version"] == CONTRACT_VERSION
    # Both name the mode played (the trainer refuses another); only mode trustee has a checkout commit.
    assert [(h["mode"], h["trustee_commit"]) for h in (live, ready)] == [("toolcanary", None)] * 2
    assert any("record folder" in check and "writable" in check for check in ready["checks"])
    assert client.get("/health").json() == ready

    records = tmp_path / "runs" / "probe" / "simulator"
    records.rename(records.with_name("moved"))
    records.write_text("a file where the record folder should be")  # every role call would now be a 500
    answer = client.get("/health/ready")
    assert answer.status_code == 503 and client.get("/health").status_code == 503
    assert client.get("/health/live").status_code == 200  # alive all the same: a restart would not help
    body = answer.json()
    assert "not a writable folder" in body["error"] and body["detail"][0]["check"] == "records"


def test_the_trainers_readiness_check_needs_the_token_the_health_checks_do_not(make_client, monkeypatch):
    client = make_client(token="s3cret-faults-token")
    assert client.get("/health/ready").status_code == 200 and client.get("/health/live").status_code == 200
    assert client.get("/v1/ready").status_code == 401
    assert client.get("/v1/ready", headers={"Authorization": "Bearer wrong"}).status_code == 401
    ready = client.get("/v1/ready", headers={"Authorization": "Bearer s3cret-faults-token"})
    assert ready.status_code == 200 and ready.json()["probe"] == "ready"


def test_drill_a_record_file_truncated_mid_line_loses_only_that_line(make_client, new_task, tmp_path, caplog,
                                                                     drill):
    caplog.set_level(logging.WARNING)
    runs = tmp_path / "runs"
    first = make_client(runs_dir=runs, run="torn")
    answered = {key: new_task(first, key) for key in ("a", "b", "c")}
    path = runs / "torn" / "simulator" / "step_none.jsonl"
    data = path.read_bytes()
    last = data.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(data[: last + 200])  # record "c" torn 200 bytes in: the service was killed mid-write

    restarted = make_client(runs_dir=runs, run="torn", seed=7)  # another seed: only reloaded tasks come back equal
    assert new_task(restarted, "a") == answered["a"] and new_task(restarted, "b") == answered["b"]
    assert new_task(restarted, "c") != answered["c"]  # the torn answer is lost; "c" is authored again
    again = make_client(runs_dir=runs, run="torn", seed=9)
    assert new_task(again, "c") == new_task(restarted, "c")  # the new answer was kept whole after the torn line
    store = again.app.state.service.store
    lost = store.skipped_lines
    reported = [r.getMessage() for r in caplog.records if "is torn" in r.getMessage()]
    assert lost == 1 and any("fenced off" in m for m in reported)
    drill("torn tails [simulator records]", faults_injected=1, survived=1, records_lost="1 (the torn one)",
          reported=f"{len(reported)} warnings")


def test_a_broken_record_in_the_middle_that_no_writer_fenced_stops_the_service(make_client, new_task, tmp_path):
    runs = tmp_path / "runs"
    first = make_client(runs_dir=runs, run="broken")
    new_task(first, "a")
    path = runs / "broken" / "simulator" / "step_none.jsonl"
    with path.open("a") as handle:
        handle.write('{"contract_version": "1.1", "role": "ta\n')  # cut, then glued on by a rule-breaker
        handle.write(path.read_text().splitlines()[0] + "\n")
    with pytest.raises(ContractError, match=r"step_none.jsonl: line 2: expected a JSON RoleRecord.*no writer fenced"):
        make_client(runs_dir=runs, run="broken")


def test_only_a_bounded_number_of_tasks_stay_in_memory_and_older_ones_come_back_from_disk(make_client, new_task):
    client = make_client(task_cache_size=4)
    answered = {f"k{n}": new_task(client, f"k{n}") for n in range(20)}
    registry = client.app.state.service.registry
    assert registry.in_memory == 4 and len(registry) == 20
    assert all(new_task(client, key) == task for key, task in answered.items())  # read back from disk
    assert registry.in_memory == 4
    metrics = client.get("/metrics").text
    assert "toolcanary_simulator_tasks_in_memory 4" in metrics and "toolcanary_simulator_tasks_known 20" in metrics
    assert "toolcanary_simulator_resident_memory_bytes " in metrics
    conflict = client.post("/v1/task", json={"task_key": "k0", "difficulty": {
        "num_tools": 2, "expected_calls": 1, "user_persona": 0, "query_ambiguity": 0, "expected_turns": 0}})
    assert conflict.status_code == 409  # an evicted key keeps its settings too
