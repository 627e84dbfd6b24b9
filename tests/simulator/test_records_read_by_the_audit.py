"""The simulator's task records are read alike by the simulator (reloading its tasks) and by the audit.

Task text with U+2028, U+2029 or U+0085 (which `str.splitlines` would split on) is written by the simulator's
own writer; both readers find the same tasks. A torn last line and a torn line a writer fenced off are skipped by
both with a warning; a broken middle line no writer fenced off stops both, naming its line.

Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_records_read_by_the_audit.py -q
"""

from __future__ import annotations

import logging

import pytest

from toolcanary.audit.training_inputs import read_tasks
from toolcanary.contract import ContractError
from toolcanary.contract.append_only import fence_path
from toolcanary.contract.simulator_api import RoleRecord
from toolcanary.contract.tasks import SimulatedTask
from toolcanary.simulator.records import RecordStore

DIFFICULTY = {"num_tools": 1, "expected_calls": 1, "user_persona": 0, "query_ambiguity": 0, "expected_turns": 0}
TOOL = {"type": "function", "function": {"name": "feed", "description": "Feed an animal.",
                                         "parameters": {"type": "object", "properties": {}}}}


def _record(task_id: str, query: str) -> RoleRecord:
    task = SimulatedTask.model_validate({"task_id": task_id, "task_key": f"key-{task_id}", "tools": [TOOL],
                                         "user_intent": "feed them", "user_persona": "expert",
                                         "first_user_query": query, "difficulty": DIFFICULTY})
    return RoleRecord(contract_version="1", time="2026-12-01T00:00:00Z", run="seps", step=1, role="task",
                      backend="scripted", request={"task_key": task.task_key, "difficulty": DIFFICULTY},
                      response={"task": task.model_dump(mode="json")}, outcome="ok", latency_s=0.1)


QUERIES = {"ls": "feed the fish\u2028then the cat", "ps": "one\u2029two", "nel": "clean the tank\u0085today",
           "plain": "water the plants"}


def test_tasks_whose_text_holds_line_separators_are_read_alike_by_the_simulator_and_the_audit(tmp_path):
    store = RecordStore(tmp_path / "seps" / "simulator")
    for task_id, query in QUERIES.items():
        store.append(_record(task_id, query))
    store.close()
    simulator = [task.task_id for _, task in RecordStore(store.directory).iter_tasks()]
    audit = read_tasks(tmp_path / "seps")
    assert simulator == list(QUERIES) == [task.task_id for task in audit.tasks]
    assert [t.query.split("\n")[0] for t in audit.tasks] == list(QUERIES.values())
    assert not audit.skipped


def test_a_broken_middle_line_stops_the_simulator_and_the_audit_alike(tmp_path):
    store = RecordStore(tmp_path / "seps" / "simulator")
    store.append(_record("first", "a"))
    store.close()
    path = store.directory / "step_0001.jsonl"
    path.write_bytes(path.read_bytes() + b'{"role": "task", broken\n' + _record("last", "b").model_dump_json().encode()
                     + b"\n")
    with pytest.raises(ContractError, match="line 2") as simulator:
        list(RecordStore(store.directory).iter_tasks())
    with pytest.raises(ContractError, match="line 2") as audit:
        read_tasks(tmp_path / "seps")
    assert simulator.value.got == audit.value.got


def test_a_torn_last_line_and_a_fenced_torn_line_are_skipped_by_the_simulator_and_the_audit_alike(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    folder = tmp_path / "torn" / "simulator"
    folder.mkdir(parents=True)
    path = folder / "step_0001.jsonl"
    path.write_text(_record("first", "a").model_dump_json() + "\n" + _record("killed", "b").model_dump_json()[:90])
    store = RecordStore(folder)
    store.append(_record("after", "c"))  # a restarted simulator fences the torn line off and writes on
    store.close()
    assert fence_path(path).exists()
    path.write_bytes(path.read_bytes() + _record("killed-again", "d").model_dump_json().encode()[:70])

    caplog.clear()
    restarted = RecordStore(folder)
    simulator = [task.task_id for _, task in restarted.iter_tasks()]
    simulator_warnings = [r.getMessage() for r in caplog.records if "is torn" in r.getMessage()]
    caplog.clear()
    audit = read_tasks(tmp_path / "torn")
    audit_warnings = [r.getMessage() for r in caplog.records if "is torn" in r.getMessage()]
    assert simulator == ["first", "after"] == [task.task_id for task in audit.tasks]
    assert restarted.skipped_lines == 2 and not audit.skipped
    for warnings in (simulator_warnings, audit_warnings):
        assert len(warnings) == 2
        assert "line 2" in warnings[0] and "fenced off by the writer" in warnings[0]
        assert "line 4" in warnings[1] and "a writer is in the middle of it" in warnings[1]
