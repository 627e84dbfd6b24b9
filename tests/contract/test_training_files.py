"""The trainer's typed files: episodes.jsonl lines and curriculum.json round-trip, and bad ones say what to do.

Run: .venvs/dev/bin/python -m pytest tests/contract/test_training_files.py -q
"""

from __future__ import annotations

import json
import math

import pytest

from toolcanary.contract.errors import ContractError
from toolcanary.contract.training_files import (
    HELD_OUT_FILE,
    CurriculumFile,
    EpisodeRecord,
    HeldOutAnswer,
    append_episodes,
    read_curriculum,
    read_episode_lines,
    read_episodes,
    read_held_out,
    write_curriculum,
    write_held_out,
)


def test_episode_records_round_trip_as_one_json_line_each(tmp_path):
    path = tmp_path / "episodes.jsonl"
    first = EpisodeRecord(step=1, episode_id="e1", task_key="k1", reward=1.0, tool_rewards=[1.0])
    append_episodes(path, [first, {"step": 2, "episode_id": "e2", "task_key": "k2"}])
    assert read_episodes(path) == [first, EpisodeRecord(step=2, episode_id="e2", task_key="k2")]
    assert [json.loads(line)["step"] for line, _ in read_episode_lines(path)] == [1, 2]
    assert read_episodes(tmp_path / "missing.jsonl") == []


def test_a_line_that_is_not_an_episode_record_names_the_line_and_the_fix(tmp_path):
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps({"step": "one", "episode_id": "e", "task_key": "k"}) + "\n")
    with pytest.raises(ContractError) as caught:
        read_episodes(path)
    err = caught.value
    assert err.where == f"{path}: line 1" and "EpisodeRecord" in err.expected and "step" in err.got
    assert "move it aside" in err.fix


@pytest.mark.parametrize("field, text", [("reward", "NaN"), ("seconds", "Infinity"), ("verifier_reward", "-Infinity"),
                                         ("tool_rewards", "[1.0, NaN]")])
def test_a_non_finite_number_in_an_episode_line_is_refused_with_its_line(tmp_path, field, text):
    """Python's json reads NaN and Infinity; a reward mean over them would be no measurement."""
    path = tmp_path / "episodes.jsonl"
    good = json.dumps({"step": 1, "episode_id": "e1", "task_key": "k"})
    path.write_text(good + "\n" + good[:-1].replace('"e1"', '"e2"') + f', "{field}": {text}}}\n')
    with pytest.raises(ContractError) as caught:
        read_episodes(path)
    assert caught.value.where == f"{path}: line 2" and field in caught.value.got
    with pytest.raises(ContractError, match="EpisodeRecord"):
        append_episodes(tmp_path / "out.jsonl", [{"step": 1, "episode_id": "e", "task_key": "k",
                                                        field: [math.nan] if field == "tool_rewards" else math.nan}])
    assert not (tmp_path / "out.jsonl").exists()


def test_writing_a_record_that_is_not_one_is_refused(tmp_path):
    with pytest.raises(ContractError, match="EpisodeRecord"):
        append_episodes(tmp_path / "episodes.jsonl", [{"step": 1}])
    assert not (tmp_path / "episodes.jsonl").exists()


def test_curriculum_file_round_trips_and_a_missing_one_is_none(tmp_path):
    path = tmp_path / "trainer" / "curriculum.json"
    assert read_curriculum(path) is None
    state = {"level": 3, "step": 2, "epsilon": 0.5, "no_call_fraction": 0.0, "criteria_cap": 2}
    written = CurriculumFile.model_validate({**state, "history": {"2": state}, "attempts": {"3": "abc"}})
    write_curriculum(path, written)
    assert read_curriculum(path) == written
    assert json.loads(path.read_text())["history"]["2"] == state
    assert [p.name for p in path.parent.iterdir()] == ["curriculum.json"]  # no temporary file left


def test_a_bad_curriculum_file_says_what_was_expected_and_what_to_do(tmp_path):
    path = tmp_path / "curriculum.json"
    path.write_text('{"level": 0, "epsilon": 0.5, "no_call_fraction": 0.0}')
    with pytest.raises(ContractError) as caught:
        read_curriculum(path)
    assert "CurriculumFile" in caught.value.expected and "level" in caught.value.got
    assert "delete it" in caught.value.fix
    path.write_text("{not json")
    with pytest.raises(ContractError, match="curriculum state"):
        read_curriculum(path)


def test_held_out_answers_round_trip_and_a_bad_line_is_named(tmp_path):
    answers = [HeldOutAnswer(task_key="heldout-warm-0-000", call_expected=True, tools=[{"type": "function"}],
                             text='<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>', tokens=20,
                             finished=True),
               HeldOutAnswer(task_key="heldout-warm-0-001", call_expected=False, tools=[], text="No.", tokens=3,
                             finished=True)]
    path = tmp_path / HELD_OUT_FILE
    write_held_out(path, answers)
    assert read_held_out(path) == answers
    path.write_text(path.read_text() + '{"task_key": "x"}\n')
    with pytest.raises(ContractError, match="line 3") as raised:
        read_held_out(path)
    assert "starting-policy" in str(raised.value)
    with pytest.raises(ContractError, match="no such file"):
        read_held_out(tmp_path / "missing.jsonl")
