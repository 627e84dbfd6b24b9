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


@pytest.mark.parametrize("run", ["--trust-remote-code", "../other", "demo\n", ""])
def test_a_manifest_whose_run_is_no_run_id_is_refused(tmp_path, run):
    """The run names the served model on vLLM's command line: a flag-looking or path-like one is refused."""
    (tmp_path / "model.safetensors").write_bytes(b"x")
    (tmp_path / "manifest.json").write_text(json.dumps(manifest(run=run)))
    with pytest.raises(ContractError, match="complete checkpoint manifest"):
        read_checkpoint_manifest(tmp_path)


def test_an_oversized_manifest_is_refused_by_its_size_before_it_is_parsed(tmp_path):
    from toolcanary.contract.manifests import CHECKPOINT_MANIFEST_MAX_BYTES

    (tmp_path / "model.safetensors").write_bytes(b"x")
    padded = manifest(base_model="x" * CHECKPOINT_MANIFEST_MAX_BYTES)
    (tmp_path / "manifest.json").write_text(json.dumps(padded))
    with pytest.raises(ContractError) as refused:
        read_checkpoint_manifest(tmp_path)
    assert f"at most {CHECKPOINT_MANIFEST_MAX_BYTES} bytes" in str(refused.value) and len(str(refused.value)) < 600
    (tmp_path / "manifest.json").write_text(json.dumps(manifest(base_model="x" * 1000)))
    assert read_checkpoint_manifest(tmp_path).step == 10


def _published(folder, shards: dict[str, bytes], with_files: bool = True):
    from toolcanary.contract.manifests import checkpoint_files, weights_sha256

    folder.mkdir(parents=True, exist_ok=True)
    for name, data in shards.items():
        (folder / name).write_bytes(data)
    (folder / "config.json").write_text('{"hidden_size": 8}')
    (folder / "tokenizer_config.json").write_text('{"chat_template": "x"}')
    fields = manifest(weights_sha256=weights_sha256(folder, sorted(shards)), weight_files=sorted(shards))
    if with_files:
        fields["files"] = {k: v.model_dump() for k, v in checkpoint_files(folder).items()}
    (folder / "manifest.json").write_text(json.dumps(fields))
    return folder


@pytest.mark.parametrize(("tamper", "named"), [
    (lambda f: (f / "config.json").write_text('{"hidden_size": 9}'), "config.json"),
    (lambda f: (f / "tokenizer_config.json").write_text('{"chat_template": "y"}'), "tokenizer_config.json"),
    (lambda f: (f / "model-00003.safetensors").write_bytes(b"extra"), "model-00003.safetensors"),
    # The same bytes in all, so the weights' one digest over the shards is unchanged; the split moved.
    (lambda f: ((f / "model-00001.safetensors").write_bytes(b"aaab"), (f / "model-00002.safetensors").write_bytes(b"bb")),
     "model-00001.safetensors"),
    (lambda f: (f / "generation_config.json").unlink(), "generation_config.json"),
])
def test_a_checkpoint_changed_after_publishing_is_refused_naming_the_file(tmp_path, tamper, named):
    from toolcanary.contract.manifests import verify_checkpoint

    folder = tmp_path / "step_0010"
    (tmp_path / "step_0010").mkdir()
    (folder / "generation_config.json").write_text("{}")
    _published(folder, {"model-00001.safetensors": b"aaa", "model-00002.safetensors": b"bbb"})
    assert verify_checkpoint(folder).step == 10
    tamper(folder)
    with pytest.raises(ContractError, match=named):
        verify_checkpoint(folder)


def test_a_manifest_from_before_the_file_list_still_verifies_its_weights(tmp_path):
    from toolcanary.contract.manifests import verify_checkpoint

    folder = _published(tmp_path / "old", {"model.safetensors": b"w"}, with_files=False)
    (folder / "config.json").write_text('{"hidden_size": 9}')  # not covered by an old manifest
    assert verify_checkpoint(folder).files is None


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


def test_a_pass_manifest_records_the_thinking_mode_served_and_one_without_it_reads_as_not_observed():
    from toolcanary.contract import EvalPassManifest

    fields = dict(contract_version="1.9", run="r1", step=0, pass_index=1, served_model="r1-step0000",
                  base_url="http://127.0.0.1:8000/v1", bfcl_eval_version="2026.3.23", handler="h",
                  categories=["irrelevance"], threads=1, temperature=0.001, overlong_counted_wrong=True,
                  started_at="2026-01-01T00:00:00Z")
    assert EvalPassManifest.model_validate(fields).served_enable_thinking is None  # a manifest from before 1.10
    observed = EvalPassManifest.model_validate(fields | {"served_enable_thinking": False})
    assert EvalPassManifest.model_validate_json(observed.model_dump_json()).served_enable_thinking is False
