"""The simulator's trustee mode over HTTP: TRUSTEE's templates and library read from a checkout, its sampling,
attempts and reading of answers, and a refused checkout.

The checkout is the shared `trustee_checkout` fixture (tests/conftest.py): TRUSTEE's paths and function
signatures with placeholder templates that write their fields out as JSON, so each test reads back exactly what
the mode substituted. The upstream is a stub OpenAI-compatible server.
Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_trustee_mode.py -q
"""

from __future__ import annotations

import json
import random

import pytest

from toolcanary.contract import ContractError
from toolcanary.simulator.library_index import LibraryIndex
from toolcanary.simulator.settings import SimulatorSettings

DIFFICULTY = {"num_tools": 2, "expected_calls": 2, "user_persona": 1, "query_ambiguity": 2, "expected_turns": 1}
AUTHOR = json.dumps({"expected_tool_calls": ["not/offered"], "user_intent": "", "user_persona": "",
                     "first_user_query": "  Send my report  "})
SYSTEM = "SYSTEM level=1 format=hermes"


def _fields(request: dict, marker: str) -> dict:
    content = request["messages"][-1]["content"]
    assert content.startswith(marker + " "), content[:80]
    return json.loads(content[len(marker) + 1:])


def _task(client, upstream, key="g1") -> dict:
    upstream.push(AUTHOR)
    body = client.post("/v1/task", json={"task_key": key, "difficulty": DIFFICULTY}).json()
    assert body["outcome"] == "ok", body
    return body["task"]


def _conversation(task: dict) -> list[dict]:
    call = {"function": {"name": "messages/send", "arguments": {"size": "500", "ids": "1,2"}}}
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task["first_user_query"]},
            {"role": "assistant", "content": "<think>ok</think>\n<tool_call>...</tool_call>", "tool_calls": [call]}]


def test_the_author_gets_trustees_prompt_with_its_fields_and_its_library_and_sampling(trustee, upstreams):
    client = trustee()
    task = _task(client, upstreams[0])
    request = upstreams[0].requests[0]
    assert request["messages"][0] == {"role": "system", "content": "SYSTEM level=3 format=hermes"}
    fields = _fields(request, "AUTHOR")
    assert (fields["calls"], fields["persona"], fields["ambiguity"], fields["turns"]) == (2, 1, 2, 1)
    assert {t["function"]["name"] for t in fields["tools"]} == {"messages/send", "messages/list"}
    assert all(set(t) == {"type", "function"} for t in fields["tools"])  # toolset fields stripped, as TRUSTEE
    assert "temperature" not in request and "frequency_penalty" not in request  # TRUSTEE's author sends neither
    # TRUSTEE keeps the author's answer as it came: empty intent and persona, names it never checks.
    assert task["first_user_query"] == "Send my report" and task["user_intent"] == ""
    assert [c["name"] for c in task["expected_tool_calls"]] == ["not/offered"]


def test_toolbench_style_values_reach_the_tool_role_with_trustees_call_text_and_history(trustee, upstreams):
    client = trustee()
    task = _task(client, upstreams[0])
    upstreams[0].push('{"result": {"sent": true}, "reward": 0.5}')
    history = _conversation(task)
    answer = client.post("/v1/tool", json={"task_key": task["task_key"], "history": history,
                                           "call": history[-1]["tool_calls"][0]}).json()
    assert answer["outcome"] == "ok" and answer["is_error"] is False
    assert answer["result"] == "{'sent': True}" and answer["reward"] == 0.5  # str() of the object, as TRUSTEE
    assert upstreams[0].requests[-1]["frequency_penalty"] == 0.1 and "temperature" not in upstreams[0].requests[-1]
    fields = _fields(upstreams[0].requests[-1], "TOOL")
    assert json.loads(fields["call"]) == {"type": "function", "function": {
        "name": "messages/send", "arguments": {"size": "500", "ids": "1,2"}}}
    assert fields["call"].startswith('{\n  "type"')  # indented, as TRUSTEE's agent loop writes it
    assert fields["history"][0] == {"role": "system", "content": SYSTEM}
    assert fields["history"][-1] == {"role": "assistant", "content": history[-1]["content"]}


def test_a_tool_the_task_does_not_offer_is_refused_without_a_model_call(trustee, upstreams):
    client = trustee()
    task = _task(client, upstreams[0])
    answer = client.post("/v1/tool", json={"task_key": task["task_key"], "history": [],
                                           "call": {"function": {"name": "nope", "arguments": {}}}}).json()
    assert answer["is_error"] is True and answer["reward"] == -1 and len(upstreams[0].requests) == 1


def test_user_and_verifier_get_the_first_message_as_the_original_query(trustee, upstreams):
    client = trustee()
    task = _task(client, upstreams[0])
    history = _conversation(task)
    upstreams[0].push('{"response": 42, "reward": 7}')
    user = client.post("/v1/user", json={"task_key": task["task_key"], "history": history}).json()
    assert user["reply"] == "42" and user["reward"] == 1.0 and user["done"] is False  # clamped, text
    fields = _fields(upstreams[0].requests[-1], "USER")
    assert fields["query"] == SYSTEM and fields["latest"] == history[-1]["content"]
    upstreams[0].push('{"reward": -0.5}')  # no reasoning: TRUSTEE needs only the reward
    verdict = client.post("/v1/verify", json={"task_key": task["task_key"], "trajectory": history, "num_criteria": 2}).json()
    assert verdict["outcome"] == "ok" and verdict["reward"] == -0.5
    assert verdict["criteria"] == ["criterion one", "criterion two"]
    fields = _fields(upstreams[0].requests[-1], "VERIFY")
    assert fields["query"] == SYSTEM and fields["expected"] == ["not/offered"]


def test_the_verifier_is_asked_even_without_a_call_and_a_reward_is_recovered_from_cut_text(trustee, upstreams):
    client = trustee()
    task = _task(client, upstreams[0])
    no_call = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"},
               {"role": "assistant", "content": "I cannot help."}]
    upstreams[0].push('<think>The agent made no call, so "reward": -1 is right, and the reasoning is')
    verdict = client.post("/v1/verify", json={"task_key": task["task_key"], "trajectory": no_call, "num_criteria": 1}).json()
    assert verdict["outcome"] == "ok" and verdict["reward"] == -1 and len(upstreams[0].requests) == 2


def test_trustees_attempts_three_per_role_two_for_the_author(trustee, upstreams, monkeypatch):
    from toolcanary.simulator.llm import upstream

    monkeypatch.setattr(upstream, "SDK_FIRST_DELAY_S", 0.001)  # the SDK's pauses, shortened for the test
    client = trustee()
    task = _task(client, upstreams[0])
    before = len(upstreams[0].requests)
    upstreams[0].push(*["not json at all"] * 5)  # an answer that arrived is never re-sent: one request an attempt
    answer = client.post("/v1/user", json={"task_key": task["task_key"], "history": _conversation(task)}).json()
    assert answer["outcome"] == "aborted" and answer["abort_cause"] == "parse"
    assert len(upstreams[0].requests) - before == 3
    upstreams[0].reset()
    upstreams[0].push(*[(500, "down", 0.0)] * 7)  # 2 attempts, each a request and the SDK's 2 re-sends
    body = client.post("/v1/task", json={"task_key": "g2", "difficulty": DIFFICULTY}).json()
    assert body["outcome"] == "aborted" and body["abort_cause"] == "upstream" and len(upstreams[0].requests) == 6


@pytest.mark.parametrize(("layout", "message"), [
    ("absent", "no folder at"),
    ("no-git", "without git metadata"),
    ("other-commit", "commit 0123456"),
    ("verifier_simulation.py", "verifier_simulation.py"),
    ("toolbench_tools.json", "toolbench_tools.json"),
])
def test_a_checkout_that_is_absent_incomplete_or_at_another_commit_is_refused_by_name(tmp_path, layout, message,
                                                                                     make_trustee_checkout):
    root = tmp_path / "TRUSTEE"
    if layout == "other-commit":
        make_trustee_checkout(root, commit="0123456" + "0" * 33)
    elif layout == "no-git":
        make_trustee_checkout(root)
        for path in sorted((root / ".git").rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        (root / ".git").rmdir()
    elif layout != "absent":
        make_trustee_checkout(root, skip=layout)
    with pytest.raises(ContractError, match=message) as caught:
        SimulatorSettings.from_env({}, backend="llm", mode="trustee", trustee_dir=root, upstreams=["http://x"])
    assert "trustee_dir" in str(caught.value) or "checkout" in str(caught.value)


def test_the_trustee_mode_needs_the_llm_backend_a_checkout_and_no_abstention_tasks(trustee_checkout):
    for values, message in [({"backend": "scripted", "trustee_dir": trustee_checkout}, "needs backend llm"),
                            ({"backend": "llm"}, "set trustee_dir"),
                            ({"backend": "llm", "trustee_dir": trustee_checkout, "no_call_fraction": 0.1},
                             "no abstention tasks")]:
        with pytest.raises(ContractError, match=message):
            SimulatorSettings.from_env({}, mode="trustee", **values)


def test_each_mode_fills_the_settings_it_leaves_unset_and_explicit_values_win(trustee_checkout):
    ours = SimulatorSettings.from_env({})
    assert (ours.temperature, ours.frequency_penalty, ours.retries, ours.backoff) == (0.7, None, 3, "exponential")
    assert (ours.retries_task, ours.timeout_s_task) == (ours.retries, ours.timeout_s)
    theirs = SimulatorSettings.from_env({"TOOLCANARY_SIMULATOR_MODE": "trustee",
                                         "TOOLCANARY_SIMULATOR_TRUSTEE_DIR": str(trustee_checkout),
                                         "TOOLCANARY_SIMULATOR_BACKEND": "llm"})
    assert (theirs.temperature, theirs.frequency_penalty, theirs.retries, theirs.backoff) == (None, 0.1, 2, "fixed")
    assert (theirs.retries_task, theirs.timeout_s_task, theirs.backoff_s_task) == (1, 60.0, 1.0)
    assert theirs.library == trustee_checkout.resolve() / "verl/recipe/trustee/data/toolbench_tools.json"
    custom = SimulatorSettings.from_env({"TOOLCANARY_SIMULATOR_TEMPERATURE": "none"}, retries=5)
    assert custom.temperature is None and custom.retries == 5


def test_trustees_tool_sampling_draws_any_category_and_never_tops_up_a_small_one(tmp_path):
    def tool(name: str, category: str) -> dict:
        return {"type": "function", "function": {"name": name, "description": "d", "parameters": {
            "type": "object", "properties": {}}}, "toolset_name": category, "toolset_description": "", "category":
            category}

    library = {"Big": {"Big API": [tool(f"big/{i}", "Big") for i in range(3)]}, "Small": {"Small API": [
        tool("small/0", "Small")]}}
    path = tmp_path / "library.json"
    path.write_text(json.dumps(library))
    index = LibraryIndex(path)
    theirs = [index.sample_tools(2, random.Random(seed), trustee=True) for seed in range(40)]
    ours = [index.sample_tools(2, random.Random(seed)) for seed in range(40)]
    assert {len(tools) for tools in theirs} == {1, 2}  # the small category, when drawn, gives its one tool
    assert all({t.category for t in tools} in ({"Big"}, {"Small"}) for tools in theirs)
    assert all(len(tools) == 2 and {t.category for t in tools} == {"Big"} for tools in ours)


def test_every_start_records_the_library_it_draws_from(trustee, make_client, tmp_path, trustee_checkout,
                                                       standin_commit):
    from toolcanary.contract import LibraryRecord

    trustee()
    make_client()  # a second start, in the toolcanary mode, with the packaged library
    lines = (tmp_path / "runs" / "test" / "simulator" / "libraries.jsonl").read_text().splitlines()
    theirs, ours = (LibraryRecord.model_validate_json(line) for line in lines)
    assert (theirs.mode, theirs.packaged, theirs.tools, theirs.trustee_commit) == ("trustee", False, 2, standin_commit)
    assert theirs.in_checkout == "verl/recipe/trustee/data/toolbench_tools.json"
    assert (ours.mode, ours.packaged, ours.trustee_commit) == ("toolcanary", True, None) and ours.tools > 200


def test_every_health_answer_names_the_trustee_mode_and_the_checkouts_commit(trustee, make_trustee_checkout,
                                                                              tmp_path, standin_commit):
    """The trainer's pre-flight compares these with its own mode and checkout, so both routes must carry them."""
    client = trustee()
    answers = [client.get(path) for path in ("/health/live", "/health/ready", "/health")]
    assert [a.status_code for a in answers] == [200] * 3, answers[-1].text
    assert [(a.json()["mode"], a.json()["trustee_commit"]) for a in answers] == [("trustee", standin_commit)] * 3

    # The commit is the one verified at start: templates imported then are what this process plays.
    moved = make_trustee_checkout(tmp_path / "moved")
    client = trustee(trustee_dir=moved)
    (moved / ".git/refs/heads/main").write_text("f" * 40 + "\n")
    assert client.get("/health/live").json()["trustee_commit"] == standin_commit

