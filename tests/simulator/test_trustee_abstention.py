"""Abstention tasks in the simulator's trustee mode: asked for by the trainer (`difficulty.call_expected` false),
written by TRUSTEE's author exactly as a call task, then served with tools of other categories; judged by rule.

The checkout is the shared stand-in (tests/conftest.py), whose templates write their fields out as JSON, so a
test reads back which tools the author was shown; the library is a small one of three categories written here;
the upstream is the stub OpenAI-compatible server of tests/simulator/conftest.py.
Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_trustee_abstention.py -q
"""

from __future__ import annotations

import json
import random

import pytest

from toolcanary.common.trustee_checkout import TrusteeCheckout
from toolcanary.contract import ContractError, RoleRecord, SimulatedTask
from toolcanary.simulator.library_index import LibraryIndex, NoOtherCategory
from toolcanary.simulator.llm import prompts_trustee
from toolcanary.simulator.settings import SimulatorSettings

CALL_TASK = {"num_tools": 2, "expected_calls": 1, "user_persona": 0, "query_ambiguity": 0, "expected_turns": 0}
# What the trainer's curriculum asks for an abstention task: no call expected, no expected calls.
ABSTAIN = CALL_TASK | {"expected_calls": 0, "call_expected": False}
SYSTEM = "SYSTEM level=1 format=hermes"


def _tool(name: str, category: str, toolset: str) -> dict:
    return {"type": "function", "function": {"name": name, "description": f"{name} of the test API.",
                                             "parameters": {"type": "object", "properties": {
                                                 "q": {"type": "string"}}, "required": []}},
            "toolset_name": toolset, "toolset_description": "", "category": category}


# Three categories of two toolsets each, three tools a toolset.
LIBRARY = {category: {f"{category} API {n}": [_tool(f"{category.lower()}/{n}/{i}", category, f"{category} API {n}")
                                              for i in range(3)] for n in range(2)}
           for category in ("Mail", "Weather", "Finance")}
CATEGORY_OF = {t["function"]["name"]: t["category"] for toolsets in LIBRARY.values() for tools in toolsets.values()
               for t in tools}


@pytest.fixture
def library(tmp_path):
    path = tmp_path / "three_categories.json"
    path.write_text(json.dumps(LIBRARY))
    return path


def _fields(request: dict, marker: str) -> dict:
    content = request["messages"][-1]["content"]
    assert content.startswith(marker + " "), content[:80]
    return json.loads(content[len(marker) + 1:])


def _author(body: dict) -> tuple:
    """The author's answer: a task for the first tool it was shown, as TRUSTEE's author writes one."""
    shown = _fields(body, "AUTHOR")["tools"][0]["function"]["name"]
    return (200, json.dumps({"expected_tool_calls": [{"name": shown, "arguments": {"q": "report"}}],
                             "user_intent": f"use {shown}", "user_persona": "busy",
                             "first_user_query": f"Please run {shown} for my report"}), 0.0)


def _ask(client, upstream, key: str, difficulty: dict) -> dict:
    upstream.push(_author)
    body = client.post("/v1/task", json={"task_key": key, "difficulty": difficulty}).json()
    assert body["outcome"] == "ok", body
    return body["task"]


def _records(tmp_path, run: str, role: str) -> list[RoleRecord]:
    path = tmp_path / "runs" / run / "simulator" / "step_none.jsonl"
    return [r for r in map(RoleRecord.model_validate_json, path.read_text().splitlines()) if r.role == role]


def test_an_abstention_task_is_trustees_authored_task_served_with_tools_of_other_categories(trustee, upstreams,
                                                                                          library):
    client = trustee(library=library)
    for key in ("a0", "a1", "a2", "a3", "a4", "a5"):
        before = len(upstreams[0].requests)
        task = _ask(client, upstreams[0], key, ABSTAIN)
        request = upstreams[0].requests[before]
        shown = [t["function"]["name"] for t in _fields(request, "AUTHOR")["tools"]]
        offered = [t["function"]["name"] for t in task["tools"]]
        assert len(offered) == len(shown) == 2
        assert {CATEGORY_OF[n] for n in offered}.isdisjoint({CATEGORY_OF[n] for n in shown}), (shown, offered)
        assert task["expected_tool_calls"] == [] and task["call_expected"] is False
        assert task["difficulty"]["call_expected"] is False
        # What the author wrote stays in the record, and the user's story is the author's.
        assert task["expected_tool_calls_as_written"] == [{"name": shown[0], "arguments": {"q": "report"}}]
        assert task["first_user_query"] == f"Please run {shown[0]} for my report"
        assert task["category"] == CATEGORY_OF[offered[0]]


def test_the_author_gets_the_same_prompt_for_an_abstention_task_as_for_a_call_task(trustee, upstreams, library):
    client = trustee(library=library)
    _ask(client, upstreams[0], "same", CALL_TASK)
    call_prompt = upstreams[0].requests[-1]["messages"]
    trustee_again = trustee(library=library, run="other")
    _ask(trustee_again, upstreams[0], "same", ABSTAIN)
    # The same key draws the same tools and the same prompt: the task text is from TRUSTEE's distribution. (The
    # trainer asks an abstention task for no expected calls; TRUSTEE's prompt asks for at least one either way.)
    assert upstreams[0].requests[-1]["messages"] == call_prompt


def test_the_same_abstention_request_gives_the_same_task(trustee, upstreams, library):
    first = trustee(library=library, run="first")
    task = _ask(first, upstreams[0], "k", ABSTAIN)
    asked = len(upstreams[0].requests)
    again = first.post("/v1/task", json={"task_key": "k", "difficulty": ABSTAIN}).json()
    assert again["task"] == task and len(upstreams[0].requests) == asked  # kept, not authored twice
    second = trustee(library=library, run="second")  # another simulator, the same seed: the same draw
    assert _ask(second, upstreams[0], "k", ABSTAIN)["tools"] == task["tools"]
    third = trustee(library=library, run="third", seed=1)
    tools = [_ask(third, upstreams[0], f"k{n}", ABSTAIN)["tools"] for n in range(4)]
    assert any(t != task["tools"] for t in tools)  # the draw depends on the key and the seed


def test_an_abstention_task_is_verified_by_rule_without_the_model(trustee, upstreams, library, tmp_path):
    client = trustee(library=library)
    task = _ask(client, upstreams[0], "v", ABSTAIN)
    asked = len(upstreams[0].requests)
    declined = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task["first_user_query"]},
                {"role": "assistant", "content": "<think>No tool here does that.</think>\nI cannot do that here."}]
    verdict = client.post("/v1/verify", json={"task_key": "v", "trajectory": declined, "num_criteria": 2}).json()
    assert verdict["outcome"] == "ok" and verdict["reward"] == 1 and "rule" in verdict["reasoning"]
    assert verdict["prompt_tokens"] == verdict["completion_tokens"] == 0
    # A call as the trustee-mode trainer sends it (the policy's text alone), then one with structured calls.
    offered = task["tools"][0]["function"]["name"]
    written = "<tool_call>\n" + json.dumps({"name": offered, "arguments": {"q": "x"}}) + "\n</tool_call>"
    called = [*declined[:2], {"role": "assistant", "content": written},
              {"role": "tool", "content": "{'ok': True}"}, {"role": "assistant", "content": "Done."}]
    verdict = client.post("/v1/verify", json={"task_key": "v", "trajectory": called, "num_criteria": 2}).json()
    assert verdict["outcome"] == "ok" and verdict["reward"] == -1 and "called" in verdict["reasoning"]
    structured = [*declined[:2], {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "function": {"name": offered, "arguments": {"q": "x"}}}]},
        {"role": "tool", "content": "{'ok': True}", "tool_call_id": "c1"}]
    verdict = client.post("/v1/verify", json={"task_key": "v", "trajectory": structured, "num_criteria": 2}).json()
    assert verdict["reward"] == -1
    assert len(upstreams[0].requests) == asked  # the model was never asked
    records = _records(tmp_path, "test", "verify")
    assert [(r.backend, r.response["reward"]) for r in records] == [("scripted", 1), ("scripted", -1),
                                                                   ("scripted", -1)]
    metrics = client.get("/metrics").text
    assert 'toolcanary_simulator_calls_total{backend="scripted",outcome="ok",role="verify"} 3' in metrics


def test_nothing_shows_the_authors_calls_as_expected_on_an_abstention_task(trustee, upstreams, library,
                                                                          trustee_checkout, standin_commit):
    client = trustee(library=library)
    task = SimulatedTask.model_validate(_ask(client, upstreams[0], "p", ABSTAIN))
    assert task.expected_tool_calls_as_written  # kept for the record...
    checkout = TrusteeCheckout.open(trustee_checkout, standin_commit)
    messages, _ = prompts_trustee.verifier(checkout, task, [], 2)
    assert _fields({"messages": messages}, "VERIFY")["expected"] == []  # ...but never shown as expected


def test_a_call_on_an_abstention_task_is_played_by_the_tool_role_and_scores_minus_one(trustee, upstreams, library):
    client = trustee(library=library)
    task = _ask(client, upstreams[0], "t", ABSTAIN)
    authored = task["expected_tool_calls_as_written"][0]["name"]
    refused = client.post("/v1/tool", json={"task_key": "t", "history": [], "call": {
        "function": {"name": authored, "arguments": {"q": "x"}}}}).json()
    assert refused["is_error"] is True and refused["reward"] == -1  # the author's tool is not offered
    upstreams[0].push('{"result": {"ok": true}, "reward": 1}')
    played = client.post("/v1/tool", json={"task_key": "t", "history": [], "call": {
        "function": {"name": task["tools"][0]["function"]["name"], "arguments": {"q": "x"}}}}).json()
    assert played["outcome"] == "ok" and played["reward"] == -1


def test_a_call_task_is_unchanged_and_its_verifier_is_the_model(trustee, upstreams, library, tmp_path):
    client = trustee(library=library)
    task = _ask(client, upstreams[0], "c", CALL_TASK)
    shown = [t["function"]["name"] for t in _fields(upstreams[0].requests[-1], "AUTHOR")["tools"]]
    assert [t["function"]["name"] for t in task["tools"]] == shown and task["call_expected"] is True
    assert [c["name"] for c in task["expected_tool_calls"]] == [shown[0]]
    no_call = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"},
               {"role": "assistant", "content": "I cannot help."}]
    upstreams[0].push('{"reward": 0.5}')
    verdict = client.post("/v1/verify", json={"task_key": "c", "trajectory": no_call, "num_criteria": 1}).json()
    assert verdict["reward"] == 0.5  # the model's, even without a call: the trainer applies TRUSTEE's penalty
    assert _fields(upstreams[0].requests[-1], "VERIFY")["expected"] == task["expected_tool_calls_as_written"]
    assert [r.backend for r in _records(tmp_path, "test", "verify")] == ["llm"]


def test_a_library_with_no_other_category_aborts_the_abstention_task_before_asking_the_author(trustee, upstreams):
    client = trustee()  # the stand-in checkout's library: one category
    body = client.post("/v1/task", json={"task_key": "x", "difficulty": ABSTAIN}).json()
    assert body["outcome"] == "aborted" and body["abort_cause"] == "validation" and body.get("task") is None
    assert "another category" in body["abort_detail"] and "TOOLCANARY_TRAIN_NO_CALL_FRACTION" in body["abort_detail"]
    assert upstreams[0].requests == []


def test_the_draw_for_an_abstention_task_skips_excluded_categories_and_names_and_never_falls_back(tmp_path):
    # "Weather" also holds a tool named like a Mail tool: a name the author was shown is never offered again.
    library = json.loads(json.dumps(LIBRARY))
    library["Weather"]["Weather API 0"][0]["function"]["name"] = "mail/0/0"
    path = tmp_path / "library.json"
    path.write_text(json.dumps(library))
    index = LibraryIndex(path)
    for seed in range(30):
        tools = index.sample_tools(3, random.Random(seed), trustee=True, exclude={"Mail"}, exclude_names={"mail/0/0"})
        assert len(tools) == 3 and "Mail" not in {t.category for t in tools}
        assert "mail/0/0" not in {t.schema_.name for t in tools}
    # Without exclusions any category is drawn, as TRUSTEE draws.
    assert {t.category for s in range(30) for t in index.sample_tools(3, random.Random(s), trustee=True)} == set(LIBRARY)
    with pytest.raises(NoOtherCategory, match="none is left"):
        index.sample_tools(2, random.Random(0), trustee=True, exclude=set(LIBRARY))


def test_the_simulators_own_share_is_refused_in_mode_trustee_naming_the_trainers_variable(trustee_checkout):
    with pytest.raises(ContractError, match="TOOLCANARY_TRAIN_NO_CALL_FRACTION") as caught:
        SimulatorSettings.from_env({}, mode="trustee", backend="llm", trustee_dir=trustee_checkout,
                                   no_call_fraction=0.2)
    assert "0.2" in str(caught.value)
