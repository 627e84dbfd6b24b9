"""TRUSTEE's ToolBench library at its real size and with its quirks: every usable entry loads, the entries that
are not usable are left out and reported (start log, libraries.jsonl), and only a file that is no library at all
is refused.

The library is generated (`toolbench_like_library.py`: about 15.5 MB, shared names across and within toolsets,
names with slashes and spaces, number parameters with string defaults, one entry of each unusable kind) into the
TRUSTEE-shaped checkout of tests/conftest.py; the upstream is the stub OpenAI-compatible server. Smaller
libraries pin each kind of entry, shared names, refused files, and (fuzzed) that any JSON entry is either a tool
or reported, never a crash.
Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_toolbench_library.py -x -q
"""

from __future__ import annotations

import json
import logging
import random
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolcanary.common.trustee_checkout import LIBRARY
from toolcanary.contract import ContractError, LibraryRecord
from toolcanary.contract.tasks import library_from_json
from toolcanary.simulator.library_index import LibraryIndex

sys.path.insert(0, str(Path(__file__).parent))
from toolbench_like_library import UNUSABLE, string_defaults_of_numbers, write_toolbench_like  # noqa: E402

DIFFICULTY = {"num_tools": 6, "expected_calls": 2, "user_persona": 0, "query_ambiguity": 0, "expected_turns": 0}
AUTHOR = json.dumps({"expected_tool_calls": ["products/list"], "user_intent": "i", "user_persona": "p",
                     "first_user_query": "Find me a red pillow"})


def _tool(tool_name: str, **function) -> dict:
    return {"type": "function", "function": {"name": tool_name, "description": "d", "parameters": {
        "type": "object", "properties": {}}} | function}


def test_the_real_sized_library_loads_and_its_unusable_entries_are_reported(trustee_checkout, make_client,
                                                                               upstreams, caplog, tmp_path,
                                                                               commit_checkout):
    expected = write_toolbench_like(trustee_checkout / LIBRARY)
    commit = commit_checkout(trustee_checkout)
    assert 15_000_000 < expected.size_bytes < 16_000_000
    upstreams[0].reset()
    caplog.set_level(logging.INFO, logger="toolcanary.simulator.app")
    client = make_client(backend="llm", mode="trustee", trustee_dir=trustee_checkout, trustee_commit=commit,
                         upstreams=[upstreams[0].url])

    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and f"{len(UNUSABLE)} entries left out" in warnings[0]
    assert all(f"'Unusable' / {toolset!r}" in warnings[0] for _, toolset, _ in expected.left_out)
    started = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("simulator:"))
    assert f"({expected.usable} tools, {len(expected.duplicate_names)} names shared" in started

    lines = (tmp_path / "runs" / "test" / "simulator" / "libraries.jsonl").read_text().splitlines()
    record = LibraryRecord.model_validate_json(lines[-1])
    assert (record.tools, record.left_out, record.mode) == (expected.usable, len(UNUSABLE), "trustee")
    for entry, (category, toolset, reason) in zip(record.left_out_entries, expected.left_out, strict=True):
        assert entry.where.startswith(f"{category!r} / {toolset!r} [") and reason in entry.reason, entry
    assert record.left_out_entries[0].where == "'Unusable' / 'Strings' [1]"  # its usable neighbour [0] stayed

    index: LibraryIndex = client.app.state.service.backend.index
    assert set(index.duplicate_names) == expected.duplicate_names
    assert {"products/list", "Keyword Ideas", "Search  Products"} <= set(index.tools)  # names kept as written
    kept = sum(string_defaults_of_numbers(t.schema_.model_dump()) for t in index.library.all_tools())
    assert kept == expected.string_default_numbers  # "1000" for a number reaches the roles as written

    upstreams[0].push(AUTHOR)
    task = client.post("/v1/task", json={"task_key": "big", "difficulty": DIFFICULTY}).json()
    assert task["outcome"] == "ok" and 1 <= len(task["task"]["tools"]) <= 6  # a small category gives what it has
    offered = json.loads(upstreams[0].requests[-1]["messages"][-1]["content"].removeprefix("AUTHOR "))["tools"]
    assert [t["function"]["name"] for t in offered] == [t["function"]["name"] for t in task["task"]["tools"]]


@pytest.mark.parametrize(("entry", "reason"), [
    ("GET /ping", "not a JSON object (a string)"),
    ({"function": "ping"}, "no `function` object"),
    (_tool("x", name=None), "no name"),
    (_tool("\t "), "an empty name"),
    (_tool("x", name=["a"]), "a name that is not text (an array)"),
    (_tool("x" * 257), "a name over 256 characters"),
    (_tool("x", parameters="q: str"), "`parameters` that is not a JSON object (a string)"),
    (_tool("x", parameters={"properties": ["q"]}), "`parameters.properties` that is not a JSON object (an array)"),
    (_tool("x", parameters={"properties": {"q": None}}), "parameter 'q' whose schema is not a JSON object (null)"),
    (_tool("x", parameters={"properties": {}, "required": "q"}), "`parameters.required` that is not a list"),
])
def test_each_kind_of_unusable_entry_is_left_out_with_its_reason(tmp_path, entry, reason):
    path = tmp_path / "library.json"
    path.write_text(json.dumps({"Cat": {"Set": [_tool("kept"), entry]}}))
    index = LibraryIndex(path)
    assert list(index.tools) == ["kept"] and len(index.left_out) == 1
    assert index.left_out[0].where == "'Cat' / 'Set' [1]" and index.left_out[0].reason.startswith(reason)


def test_odd_but_usable_entries_are_kept_as_written_or_read_as_empty(tmp_path):
    path = tmp_path / "library.json"
    number_with_text = {"type": "object", "properties": {"size": {"type": "number", "default": "1000"},
                                                         "key": {"type": "credentials", "default": ""}}}
    path.write_text(json.dumps({"Cat": {
        "Set": [{"type": "function", "function": {"name": "no parameters"}},
                _tool("null description", description=None),
                _tool("listed description", description=["a", "b"]),
                _tool("odd types", parameters=number_with_text),
                _tool("toolset fields", parameters={}) | {"toolset_name": None, "category": 7}],
        "Not a list": {"a": 1}},
        "Not an object": ["x"]}))
    index = LibraryIndex(path)
    tools = {t.schema_.name: t for t in index.library.all_tools()}
    assert tools["no parameters"].schema_.function.parameters == {"type": "object", "properties": {}}
    assert tools["null description"].schema_.function.description == ""
    assert tools["listed description"].schema_.function.description == '["a", "b"]'
    assert tools["odd types"].schema_.function.parameters == number_with_text
    assert (tools["toolset fields"].toolset_name, tools["toolset fields"].category) == ("Set", "Cat")
    assert [(e.where, e.reason) for e in index.left_out] == [
        ("'Cat' / 'Not a list'", "a toolset that is not a list of tools (a JSON object)"),
        ("'Not an object'", "a category that is not a JSON object of toolsets (an array)")]


def test_shared_names_are_all_drawn_as_trustee_draws_them_and_looked_up_as_the_first(tmp_path):
    first, second = _tool("products/list", description="first"), _tool("products/list", description="second")
    path = tmp_path / "library.json"
    path.write_text(json.dumps({"eCommerce": {"Zappos": [first, first], "Wayfair": [second, _tool("auto-complete")]}}))
    index = LibraryIndex(path)
    assert len(index) == 4 and index.duplicate_names == {"products/list": 3}
    assert index.tools["products/list"].schema_.function.description == "first"
    draws = [index.sample_tools(2, random.Random(seed), trustee=True) for seed in range(60)]
    assert any([t.schema_.name for t in tools] == ["products/list"] * 2 for tools in draws)  # as TRUSTEE's pool


@pytest.mark.parametrize(("content", "message"), [
    (b'{"Advertising": {"Planner": [', "not JSON"),
    (b"\xff\xfe\x00garbage", "not JSON"),
    (b'[{"type": "function"}]', "a JSON object of categories"),
    (b"{}", "at least one usable tool"),
    (b'{"Cat": {"Set": [null, {"function": {}}]}}', "none among 2 entries ('Cat' / 'Set' [0]: not a JSON object"),
])
def test_a_file_that_is_no_library_is_refused_with_what_came_and_what_to_do(trustee_checkout, make_client, content,
                                                                             message, commit_checkout):
    (trustee_checkout / LIBRARY).write_bytes(content)
    commit = commit_checkout(trustee_checkout)
    with pytest.raises(ContractError, match=re.escape(message)) as caught:
        make_client(backend="llm", mode="trustee", trustee_dir=trustee_checkout, trustee_commit=commit,
                    upstreams=["http://127.0.0.1:9"])
    assert "toolbench_tools.json" in str(caught.value) and "--library" in str(caught.value)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                        st.sampled_from(["function", "name", "parameters", "properties", "required", "description",
                                         "toolset_name", "category", "q"]), inner, max_size=4), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(entries=st.lists(JSON, max_size=4))
def test_any_entries_load_or_are_refused_with_a_contract_error_never_a_crash(entries):
    raw = {"Cat": {"Set": [_tool("kept"), *entries]}, "Other": {"Set": entries}}
    library = library_from_json(raw, "fuzzed.json")
    assert library.all_tools()[0].schema_.name == "kept"
    assert len(library) + len(library.left_out) == 1 + 2 * len(entries)  # every entry either kept or reported
    try:
        library_from_json({"Cat": {"Set": entries}}, "fuzzed.json")
    except ContractError as err:
        assert "at least one usable tool" in str(err)


def test_a_libraries_line_from_before_left_out_was_recorded_reads_as_none_left_out():
    line = json.dumps({"contract_version": "1.5", "time": "2026-12-01T00:00:00+00:00", "run": "r", "mode": "trustee",
                       "path": "/trustee/x.json", "packaged": False, "sha256": "0" * 64, "tools": 16_000})
    record = LibraryRecord.model_validate_json(line)
    assert (record.left_out, record.left_out_entries) == (0, [])
