"""Manifests, simulated tasks, the tool library format and the role shapes.

Run: .venvs/dev/bin/python -m pytest tests/contract/test_manifests_and_tasks.py -q
"""

import json

import pytest
from pydantic import ValidationError

from toolcanary.contract import (
    CONTRACT_VERSION,
    CheckpointManifest,
    ContractError,
    SimulatedTask,
    TaskRequest,
    ToolResponse,
    load_tool_library,
    read_checkpoint_manifest,
)


def manifest(**overrides):
    fields = dict(
        contract_version=CONTRACT_VERSION,
        run="r1",
        step=10,
        base_model="tiny-qwen3",
        weights_sha256="a" * 64,
        weight_files=["model.safetensors"],
        commit="abc",
        curriculum_level=4,
        created_at="2026-01-01T00:00:00Z",
    )
    return fields | overrides


def test_a_complete_checkpoint_is_read(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"x")
    (tmp_path / "manifest.json").write_text(json.dumps(manifest()))
    assert read_checkpoint_manifest(tmp_path).step == 10


def test_readers_refuse_a_folder_without_a_complete_manifest(tmp_path):
    with pytest.raises(ContractError, match="no manifest"):
        read_checkpoint_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text(
        json.dumps({k: v for k, v in manifest().items() if k != "weights_sha256"})
    )
    with pytest.raises(ContractError, match="complete checkpoint manifest"):
        read_checkpoint_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps(manifest()))
    with pytest.raises(ContractError, match="missing"):
        read_checkpoint_manifest(tmp_path)


def test_manifest_hash_must_be_a_sha256():
    with pytest.raises(ValidationError):
        CheckpointManifest(**manifest(weights_sha256="not-a-hash"))


def make_task(**overrides):
    fields = dict(
        task_id="t1",
        task_key="k1",
        category="weather",
        tools=[{"type": "function", "function": {"name": "weather.get", "parameters": {"type": "object"}}}],
        expected_tool_calls=[{"name": "weather.get", "arguments": {"city": "Oslo"}}],
        user_intent="Know the weather in Oslo",
        user_persona="expert",
        first_user_query="Weather in Oslo?",
        difficulty={
            "num_tools": 1,
            "expected_calls": 1,
            "user_persona": 0,
            "query_ambiguity": 0,
            "expected_turns": 0,
        },
    )
    return SimulatedTask(**(fields | overrides))


def test_a_task_round_trips_through_json_and_finds_its_tools():
    task = make_task()
    again = SimulatedTask.model_validate_json(task.model_dump_json())
    assert again == task and again.tool("weather.get") is not None and again.tool("nope") is None


def test_requests_refuse_unknown_fields_and_out_of_range_settings():
    with pytest.raises(ValidationError, match="extra"):
        TaskRequest(task_key="k", difficulty=make_task().difficulty, surprise=1)
    with pytest.raises(ValidationError, match="user_persona"):
        TaskRequest(task_key="k", difficulty={**make_task().difficulty.model_dump(), "user_persona": 3})


def test_an_aborted_response_must_say_why_and_rewards_stay_within_minus_one_and_one():
    with pytest.raises(ValidationError, match="abort_cause"):
        ToolResponse(outcome="aborted")
    assert ToolResponse(outcome="aborted", abort_cause="timeout").reward is None
    assert ToolResponse(reward=0.5).reward == 0.5  # the trustee mode keeps TRUSTEE's fractional scores
    for outside in (1.5, -1.01, float("nan")):
        with pytest.raises(ValidationError):
            ToolResponse(reward=outside)


def test_library_in_trustee_format_loads_and_bad_files_say_where(tmp_path):
    tool = {
        "type": "function",
        "function": {
            "name": "Keyword Ideas",
            "description": "d",
            "parameters": {"type": "object", "properties": {}},
        },
        "toolset_name": "Planner",
        "toolset_description": "p",
        "category": "Advertising",
    }
    path = tmp_path / "lib.json"
    path.write_text(json.dumps({"Advertising": {"Planner": [tool]}}))
    library = load_tool_library(path)
    assert len(library) == 1 and library.all_tools()[0].schema_.name == "Keyword Ideas"
    path.write_text(json.dumps({"Advertising": {"Planner": [{"type": "function"}, tool]}}))
    library = load_tool_library(path)  # one unusable entry is left out and said where, not a refused file
    assert len(library) == 1 and [str(e) for e in library.left_out] == ["'Advertising' / 'Planner' [0]: "
                                                                         "no `function` object"]
    path.write_text(json.dumps({"Advertising": {"Planner": [{"type": "function"}]}}))
    with pytest.raises(ContractError, match="'Advertising' / 'Planner' \\[0\\]"):
        load_tool_library(path)
    with pytest.raises(ContractError, match="no such file"):
        load_tool_library(tmp_path / "missing.json")
