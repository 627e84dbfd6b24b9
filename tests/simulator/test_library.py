"""The default tool library: regenerated exactly by its builder, large, varied and in TRUSTEE's format.

Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_library.py -q
"""

from __future__ import annotations

import json
import re

import pytest

from toolcanary.contract import ContractError, load_tool_library
from toolcanary.simulator import library_builder
from toolcanary.simulator.__main__ import main as cli
from toolcanary.simulator.library_index import DEFAULT_LIBRARY_PATH, LibraryIndex

RAW = json.loads(DEFAULT_LIBRARY_PATH.read_text())
ENTRIES = [e for toolsets in RAW.values() for entries in toolsets.values() for e in entries]


def walk(schema):
    yield schema
    if isinstance(schema, dict):
        for value in (schema.get("properties") or {}).values():
            yield from walk(value)
        if isinstance(schema.get("items"), dict):
            yield from walk(schema["items"])


def test_the_committed_library_is_exactly_what_the_builder_writes(tmp_path):
    assert library_builder.render(library_builder.build_library()) == DEFAULT_LIBRARY_PATH.read_text()
    assert cli(["build-library", "--check"]) == 0
    stale = tmp_path / "stale.json"
    stale.write_text("{}")
    assert cli(["build-library", "--check", "--out", str(stale)]) == 1
    assert cli(["build-library", "--out", str(stale)]) == 0
    assert stale.read_text() == DEFAULT_LIBRARY_PATH.read_text()


def test_a_few_hundred_tools_over_at_least_eight_categories_with_unique_dotted_names():
    assert len(RAW) >= 8
    assert len(ENTRIES) >= 200
    names = [e["function"]["name"] for e in ENTRIES]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[a-z]+\.[a-z]+(_[a-z]+)+", n) for n in names), "prefix.verb_noun"
    assert all(len(e["function"]["description"]) >= 30 for e in ENTRIES)


def test_schemas_have_mcp_like_shapes():
    nodes = [node for e in ENTRIES for node in walk(e["function"]["parameters"])]
    kinds = {node.get("type") for node in nodes}
    assert {"object", "array", "string", "integer", "number", "boolean"} <= kinds
    assert sum("enum" in node for node in nodes) > 50
    nested = [e for e in ENTRIES if any(p.get("type") == "object"
                                        for p in e["function"]["parameters"]["properties"].values())]
    assert len(nested) > 30
    for entry in ENTRIES:
        params = entry["function"]["parameters"]
        assert set(params["required"]) <= set(params["properties"]), entry["function"]["name"]
        assert entry["x_result"]["kind"] in {"record", "list", "deleted", "action"}


def test_the_contract_loader_reads_it_and_a_broken_library_gets_a_clear_error(tmp_path):
    library = load_tool_library(DEFAULT_LIBRARY_PATH)
    assert len(library) == len(ENTRIES)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"travel": {"Flights": [{"no_function": 1}]}}))
    with pytest.raises(ContractError, match="Flights"):
        LibraryIndex(broken)


def test_a_custom_library_in_trustee_format_works_without_result_hints(tmp_path, make_client, new_task):
    custom = {"weather": {"Forecasts": [
        {"type": "function", "function": {"name": "Get Forecast", "description": "Forecast for a city.",
                                          "parameters": {"type": "object", "properties": {
                                              "city": {"type": "string"}}, "required": ["city"]}}}]}}
    path = tmp_path / "custom.json"
    path.write_text(json.dumps(custom))
    client = make_client(library=path)
    task = new_task(client, "custom")
    expected = task["expected_tool_calls"][0]
    answer = client.post("/v1/tool", json={"task_key": task["task_key"], "call": {"function": expected}}).json()
    assert answer["reward"] == 1 and json.loads(answer["result"])["arguments"] == expected["arguments"]


def test_the_validate_command_confirms_gold_trajectories_earn_1(capsys):
    assert cli(["validate", "--tasks", "60"]) == 0
    assert "60/60 gold trajectories earn reward 1" in capsys.readouterr().out
