"""The one reader of the simulator's role records (`simulator_api.iter_role_records`, `iter_recorded_tasks`):
the append-only rule (torn and fenced lines skipped with a warning, a broken middle line refused with its
number), other roles counted without being parsed, and whole lines that hold nothing usable counted by reason.

Run: .venvs/dev/bin/python -m pytest tests/contract/test_role_records.py -q
"""

from __future__ import annotations

import logging

import pytest

from toolcanary.contract import ContractError
from toolcanary.contract.append_only import append_text, fence_path, json_line
from toolcanary.contract.simulator_api import (
    NO_VALID_TASK,
    NOT_A_ROLE_RECORD,
    RoleRecord,
    RoleRecordReading,
    iter_recorded_tasks,
    iter_role_records,
    role_record_file,
)

DIFFICULTY = {"num_tools": 1, "expected_calls": 1, "user_persona": 0, "query_ambiguity": 0, "expected_turns": 0}
TOOL = {"type": "function", "function": {"name": "feed", "description": "Feed an animal.",
                                         "parameters": {"type": "object", "properties": {}}}}


def record(role: str, task_id: str = "t", step: int | None = 1, outcome: str = "ok") -> RoleRecord:
    task = {"task_id": task_id, "task_key": f"key-{task_id}", "tools": [TOOL], "user_intent": "feed them",
            "user_persona": "expert", "first_user_query": "feed the fish", "difficulty": DIFFICULTY}
    # A user call's request holds a conversation whose messages carry roles of their own.
    request = ({"task_key": task["task_key"], "difficulty": DIFFICULTY} if role == "task" else
               {"task_key": task["task_key"], "history": [{"role": "user", "content": "hi"}]})
    return RoleRecord(contract_version="1", time="2026-12-01T00:00:00Z", run="r", step=step, role=role,
                      backend="scripted", request=request,
                      response={"task": task} if role == "task" and outcome == "ok" else {}, outcome=outcome,
                      abort_cause=None if outcome == "ok" else "timeout", latency_s=0.1)


def write(folder, step, *lines: str) -> None:
    append_text(folder / role_record_file(step), "".join(line if line.endswith("\n") else line + "\n"
                                                         for line in lines))


def test_tasks_are_read_in_file_order_other_roles_counted_and_unusable_lines_counted_by_reason(tmp_path):
    write(tmp_path, 2, json_line(record("task", "b", 2)))
    write(tmp_path, 1, json_line(record("task", "a")), json_line(record("user")), json_line(record("verify")),
          json_line(record("task", "gave-up", outcome="aborted")), '{"role": "task", "unexpected": true}',
          json_line(record("task", "a")).replace('"first_user_query":"feed the fish"', '"first_user_query":""'))
    write(tmp_path, None, json_line(record("task", "c", None)))
    reading = RoleRecordReading()
    tasks = [task.task_id for _, task in iter_recorded_tasks(tmp_path, reading)]
    assert tasks == ["a", "b", "c"]  # step_0001, step_0002, step_none
    assert (reading.files, reading.other_roles, reading.aborted_tasks, reading.torn) == (3, 2, 1, 0)
    assert reading.skipped == {NOT_A_ROLE_RECORD: 1, NO_VALID_TASK: 1}
    assert reading.lost == 2
    assert [r.role for r in iter_role_records(tmp_path)] == ["task", "user", "verify", "task", "task", "task",
                                                             "task"]


def test_a_torn_last_line_and_a_fenced_torn_line_are_skipped_with_a_warning(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    path = tmp_path / role_record_file(1)
    path.write_text(json_line(record("task", "a")) + json_line(record("task", "torn"))[:60])
    write(tmp_path, 1, json_line(record("task", "b")))  # the next writer fences the torn line off
    assert fence_path(path).exists()
    path.write_bytes(path.read_bytes() + json_line(record("user")).encode()[:40])  # and a writer dies again
    reading = RoleRecordReading()
    assert [task.task_id for _, task in iter_recorded_tasks(tmp_path, reading)] == ["a", "b"]
    assert reading.torn == 2 and reading.lost == 2
    warnings = [r.getMessage() for r in caplog.records if "is torn" in r.getMessage()]
    assert any("line 2" in w and "fenced off by the writer" in w for w in warnings)
    assert any("line 4" in w and "a writer is in the middle of it" in w for w in warnings)


@pytest.mark.parametrize("broken", [b'{"role": "task", broken', b"\xff\xfe broken bytes", b'{"role": "user", "x'])
def test_a_broken_middle_line_no_writer_fenced_is_refused_with_its_number(tmp_path, broken):
    path = tmp_path / role_record_file(1)
    path.write_bytes(json_line(record("task", "a")).encode() + broken + b"\n" + json_line(record("task")).encode())
    with pytest.raises(ContractError, match=r"step_0001.jsonl: line 2: expected a JSON RoleRecord.*no writer fenced"):
        list(iter_recorded_tasks(tmp_path))


def test_an_unreadable_record_file_is_refused_not_skipped(tmp_path):
    (tmp_path / role_record_file(1)).mkdir()  # a name the glob finds that is not a readable file
    with pytest.raises(ContractError, match="expected a readable simulator record file"):
        list(iter_recorded_tasks(tmp_path))


def test_a_missing_folder_holds_no_records(tmp_path):
    reading = RoleRecordReading()
    assert list(iter_recorded_tasks(tmp_path / "nope", reading)) == [] and reading.files == 0
