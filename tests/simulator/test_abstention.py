"""Abstention tasks: no offered tool serves them; declining earns 1 and any call earns -1 (scripted backend).

Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_abstention.py -q
"""

from __future__ import annotations

from toolcanary.contract import SimulatedTask, load_tool_library
from toolcanary.simulator.library_index import DEFAULT_LIBRARY_PATH
from toolcanary.simulator.scripted import gold_trajectory

LIBRARY = load_tool_library(DEFAULT_LIBRARY_PATH)
CATEGORY_OF = {t.schema_.name: t.category for t in LIBRARY.all_tools()}
PHRASE_OF = {t.schema_.name: t.schema_.function.description.split(".")[0].split(",")[0].lower()
             for t in LIBRARY.all_tools()}


def test_no_call_fraction_1_makes_every_task_an_abstention_task(make_client, new_task):
    client = make_client(no_call_fraction=1.0)
    for key in ("a", "b", "c", "d"):
        task = new_task(client, key, num_tools=5)
        assert task["call_expected"] is False and task["expected_tool_calls"] == []
        assert task["difficulty"]["call_expected"] is False
        offered = {CATEGORY_OF[t["function"]["name"]] for t in task["tools"]}
        # The request, if it names a library tool's job, belongs to a category that is not offered.
        for name, phrase in PHRASE_OF.items():
            if phrase and phrase in task["first_user_query"].lower():
                assert CATEGORY_OF[name] not in offered, (name, task["first_user_query"])


def test_no_call_fraction_picks_a_stable_share_of_keys(make_client, new_task):
    client = make_client(no_call_fraction=0.3)
    flags = [new_task(client, f"k{n}", num_tools=2)["call_expected"] for n in range(60)]
    share = flags.count(False) / len(flags)
    assert 0.1 < share < 0.5
    again = make_client(no_call_fraction=0.3, run="other")
    assert [new_task(again, f"k{n}", num_tools=2)["call_expected"] for n in range(60)] == flags


def test_call_expected_false_in_the_request_asks_for_an_abstention_task(client, new_task):
    task = new_task(client, "explicit", call_expected=False)
    assert task["call_expected"] is False


def test_declining_earns_1_from_verifier_and_user(make_client, new_task):
    client = make_client(no_call_fraction=1.0)
    task = new_task(client, "decline")
    gold = [m.model_dump(mode="json") for m in gold_trajectory(SimulatedTask.model_validate(task))]
    assert [m["role"] for m in gold] == ["user", "assistant"] and not gold[1]["tool_calls"]
    verdict = client.post("/v1/verify", json={"task_key": task["task_key"], "trajectory": gold, "num_criteria": 2}).json()
    assert verdict["reward"] == 1
    user = client.post("/v1/user", json={"task_key": task["task_key"], "history": gold}).json()
    assert user["done"] is True and user["reward"] == 1


def test_any_call_on_an_abstention_task_earns_minus_1(make_client, new_task):
    client = make_client(no_call_fraction=1.0)
    task = new_task(client, "call-anyway", num_tools=3)
    tool = task["tools"][0]["function"]
    required = {k: "x" for k in tool["parameters"].get("required", [])}
    call = {"id": "c1", "function": {"name": tool["name"], "arguments": required}}
    answer = client.post("/v1/tool", json={"task_key": task["task_key"], "call": call}).json()
    assert answer["reward"] == -1
    trajectory = [{"role": "user", "content": task["first_user_query"]},
                  {"role": "assistant", "tool_calls": [call]},
                  {"role": "tool", "content": answer["result"], "tool_call_id": "c1"},
                  {"role": "assistant", "content": "Here you go."}]
    for criteria in (1, 2, 5):
        verdict = client.post("/v1/verify", json={"task_key": task["task_key"], "trajectory": trajectory,
                                                   "num_criteria": criteria}).json()
        assert verdict["reward"] == -1
    user = client.post("/v1/user", json={"task_key": task["task_key"], "history": trajectory}).json()
    assert user["done"] is True and user["reward"] == -1


def test_a_malformed_call_on_an_abstention_task_earns_minus_1(make_client, new_task):
    """The trainer sends a turn whose call it could not read without the markup, and the tool message that
    answered it with an error: the attempt is a call all the same, or a policy that garbles its calls would be
    paid as if it had declined."""
    client = make_client(no_call_fraction=1.0)
    task = new_task(client, "garbled-call", num_tools=2)
    trajectory = [{"role": "user", "content": task["first_user_query"]},
                  {"role": "assistant", "content": "", "tool_calls": []},
                  {"role": "tool", "content": "Error: malformed tool call (unterminated <tool_call> block).",
                   "is_error": True},
                  {"role": "assistant", "content": "Sorry, none of my tools can do that."}]
    verdict = client.post("/v1/verify", json={"task_key": task["task_key"], "trajectory": trajectory,
                                               "num_criteria": 2}).json()
    assert verdict["reward"] == -1
    user = client.post("/v1/user", json={"task_key": task["task_key"], "history": trajectory}).json()
    assert user["done"] is True and user["reward"] == -1
    declined = [trajectory[0], trajectory[3]]
    verdict = client.post("/v1/verify", json={"task_key": task["task_key"], "trajectory": declined,
                                               "num_criteria": 2}).json()
    assert verdict["reward"] == 1
