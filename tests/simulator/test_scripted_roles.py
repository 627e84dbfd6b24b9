"""The scripted backend's four roles through the HTTP API: tasks, tool validation and results, user, verifier.

Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_scripted_roles.py -q
"""

from __future__ import annotations

import itertools
import json

import pytest

from toolcanary.contract import SimulatedTask, load_tool_library
from toolcanary.simulator.library_index import DEFAULT_LIBRARY_PATH
from toolcanary.simulator.scripted import gold_trajectory

LIBRARY = load_tool_library(DEFAULT_LIBRARY_PATH)
CATEGORY_OF = {t.schema_.name: t.category for t in LIBRARY.all_tools()}


def dump(messages) -> list[dict]:
    return [m.model_dump(mode="json") for m in messages]


def call(name, arguments, call_id="c1") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tool_answer(client, task, call_, history=()):
    response = client.post("/v1/tool", json={"task_key": task["task_key"], "history": list(history), "call": call_})
    assert response.status_code == 200, response.text
    return response.json()


def test_a_task_offers_tools_of_one_category_and_expects_concrete_calls(client, new_task):
    task = new_task(client, "g-shape", num_tools=5, expected_calls=2)
    names = [t["function"]["name"] for t in task["tools"]]
    assert len(names) == 5 and len(set(names)) == 5
    assert len({CATEGORY_OF[n] for n in names}) == 1, "TRUSTEE samples the tools of a task from one category"
    assert len(task["expected_tool_calls"]) == 2
    for expected in task["expected_tool_calls"]:
        assert expected["name"] in names
        required = next(t for t in task["tools"] if t["function"]["name"] == expected["name"])["function"][
            "parameters"]["required"]
        assert set(required) <= set(expected["arguments"])
        for value in expected["arguments"].values():
            shown = f'"{value}"' if isinstance(value, str) else json.dumps(value)
            assert shown in task["first_user_query"], "a clear query mentions every value it needs"


def test_ambiguous_first_queries_hold_values_back_and_the_user_supplies_them_when_asked(client, new_task):
    task = new_task(client, "g-ambiguous", query_ambiguity=1)
    expected = task["expected_tool_calls"][0]
    held_name, held_value = list(expected["arguments"].items())[-1]
    shown = f'"{held_value}"' if isinstance(held_value, str) else json.dumps(held_value)
    assert shown not in task["first_user_query"]
    history = [{"role": "user", "content": task["first_user_query"]},
               {"role": "assistant", "content": "Could you give me the missing details?"}]
    reply = client.post("/v1/user", json={"task_key": task["task_key"], "history": history}).json()
    assert reply["done"] is False and reply["reward"] == 1
    assert shown in reply["reply"] and held_name.replace("_", " ") in reply["reply"]


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({}, "missing required argument"),
        ({"unknown_field": 1}, "unexpected argument 'unknown_field'"),
    ],
)
def test_invalid_arguments_get_an_error_the_policy_can_correct_from(client, new_task, arguments, fragment):
    task = new_task(client, "g-invalid")
    name = task["expected_tool_calls"][0]["name"]
    answer = tool_answer(client, task, call(name, arguments))
    assert answer["is_error"] is True and answer["reward"] == -1 and answer["outcome"] == "ok"
    assert fragment in answer["result"] and name in answer["result"]


def test_a_wrong_type_is_named_with_the_type_it_should_have(client, new_task):
    task = new_task(client, "g-type")
    expected = task["expected_tool_calls"][0]
    schema = next(t for t in task["tools"] if t["function"]["name"] == expected["name"])["function"]["parameters"]
    first = next(iter(expected["arguments"]))
    wanted = schema["properties"][first].get("type", "string")
    wrong = 12345 if wanted != "integer" else "twelve"
    answer = tool_answer(client, task, call(expected["name"], expected["arguments"] | {first: wrong}))
    assert answer["is_error"] is True and answer["reward"] == -1
    assert f"'{first}' must be" in answer["result"] and wanted in answer["result"]


def test_a_tool_the_task_does_not_offer_is_an_error_result_not_a_server_error(client, new_task):
    task = new_task(client, "g-unknown")
    answer = tool_answer(client, task, call("files.delete_everything", {"confirm": True}))
    assert answer["is_error"] is True and answer["reward"] == -1
    assert "does not exist" in answer["result"] and task["tools"][0]["function"]["name"] in answer["result"]


def test_the_expected_call_earns_1_and_returns_a_result_that_agrees_with_it(client, new_task):
    task = new_task(client, "g-right")
    expected = task["expected_tool_calls"][0]
    answer = tool_answer(client, task, call(expected["name"], json.dumps(expected["arguments"])))
    assert answer["is_error"] is False and answer["reward"] == 1
    result = json.loads(answer["result"])
    assert isinstance(result, dict) and result
    for key, value in expected["arguments"].items():
        if key in result and not key.startswith(("page", "order")):
            assert result[key] == value


def test_other_argument_values_earn_0_and_an_unneeded_tool_earns_minus_1(client, new_task):
    task = new_task(client, "g-partial", num_tools=6)
    expected = task["expected_tool_calls"][0]
    key, value = next((k, v) for k, v in expected["arguments"].items() if isinstance(v, str))
    other = "" if value != "" else "x"
    altered = tool_answer(client, task, call(expected["name"], expected["arguments"] | {key: value + "-other" + other}))
    if not altered["is_error"]:
        assert altered["reward"] == 0
    unneeded = next(t for t in task["tools"] if t["function"]["name"] != expected["name"])
    obj = SimulatedTask.model_validate(task)
    from toolcanary.simulator.calls import rng_for
    from toolcanary.simulator.scripted.values import generate_value

    args = generate_value(unneeded["function"]["parameters"], "arguments", rng_for("x"), 0.0)
    answer = tool_answer(client, obj.model_dump(mode="json"), call(unneeded["function"]["name"], args))
    assert answer["is_error"] is False and answer["reward"] == -1


GRID = list(itertools.product([1, 3, 10], [1, 2, 3], range(3), range(3), range(3)))


@pytest.mark.parametrize(("tools", "calls", "persona", "ambiguity", "turns"), GRID[::7])
def test_gold_trajectories_earn_reward_1_through_the_api(client, new_task, tools, calls, persona, ambiguity, turns):
    task = new_task(client, f"gold-{tools}-{calls}-{persona}-{ambiguity}-{turns}", num_tools=tools,
                    expected_calls=calls, user_persona=persona, query_ambiguity=ambiguity, expected_turns=turns)
    gold = dump(gold_trajectory(SimulatedTask.model_validate(task)))
    # Independent of the verifier's matcher: every expected call appears verbatim in the gold trajectory.
    made = [c["function"] for m in gold if m["role"] == "assistant" for c in m["tool_calls"]]
    for expected in task["expected_tool_calls"]:
        assert {"name": expected["name"], "arguments": expected["arguments"]} in made
    for criteria in range(1, 6):
        verdict = client.post("/v1/verify", json={"task_key": task["task_key"], "trajectory": gold, "num_criteria": criteria}).json()
        assert verdict["reward"] == 1, verdict
        assert len(verdict["criteria"]) == criteria


def test_the_gold_trajectory_is_what_the_service_answers_turn_by_turn(client, new_task):
    task = new_task(client, "gold-replay", num_tools=5, expected_calls=3, query_ambiguity=1, expected_turns=2)
    gold = dump(gold_trajectory(SimulatedTask.model_validate(task)))
    for position, message in enumerate(gold):
        history = gold[:position]
        if message["role"] == "tool":
            calls = [c for m in history if m["role"] == "assistant" for c in m["tool_calls"]]
            made = next(c for c in calls if c["id"] == message["tool_call_id"])
            answer = tool_answer(client, task, made, history)
            assert (answer["result"], answer["is_error"]) == (message["content"], message["is_error"])
            assert answer["reward"] == 1
        elif message["role"] == "user" and position > 0:
            reply = client.post("/v1/user", json={"task_key": task["task_key"], "history": history}).json()
            assert reply["reply"] == message["content"] and reply["done"] is False
    final = client.post("/v1/user", json={"task_key": task["task_key"], "history": gold}).json()
    assert final["done"] is True and final["reward"] == 1 and final["reply"] == ""


def test_the_verifier_scores_argument_values_not_only_names(client, new_task):
    task = new_task(client, "g-values", expected_calls=1)
    expected = task["expected_tool_calls"][0]
    key, value = next((k, v) for k, v in expected["arguments"].items() if isinstance(v, str))
    wrong = [{"role": "user", "content": task["first_user_query"]},
             {"role": "assistant", "tool_calls": [call(expected["name"], expected["arguments"] | {key: value + "X"})]},
             {"role": "tool", "content": "{}", "tool_call_id": "c1"},
             {"role": "assistant", "content": "Done."}]
    verdict = client.post("/v1/verify", json={"task_key": task["task_key"], "trajectory": wrong, "num_criteria": 1}).json()
    assert verdict["reward"] == -1 and "0 of 1" in verdict["reasoning"]


def test_answering_without_any_call_is_penalised_and_the_user_gives_up_after_one_reminder(client, new_task):
    task = new_task(client, "g-lazy")
    history = [{"role": "user", "content": task["first_user_query"]},
               {"role": "assistant", "content": "Sure, all done!"}]
    verdict = client.post("/v1/verify", json={"task_key": task["task_key"], "trajectory": history}).json()
    assert verdict["reward"] == -1 and "did not call" in verdict["reasoning"]
    first = client.post("/v1/user", json={"task_key": task["task_key"], "history": history}).json()
    assert first["done"] is False and first["reward"] == -1 and first["reply"].startswith("That isn't done yet.")
    history += [{"role": "user", "content": first["reply"]}, {"role": "assistant", "content": "Done, really."}]
    second = client.post("/v1/user", json={"task_key": task["task_key"], "history": history}).json()
    assert second["done"] is True and second["reward"] == -1


def test_post_gold_answers_the_gold_trajectory_and_needs_the_token(make_client, new_task):
    client = make_client()
    task = new_task(client, "gold-http", num_tools=3, expected_calls=2, expected_turns=1)
    answer = client.post("/v1/gold", json={"task_key": task["task_key"]}).json()
    assert answer["outcome"] == "ok"
    assert answer["messages"] == dump(gold_trajectory(SimulatedTask.model_validate(task)))
    guarded = make_client(token="secret-scripted-token", run="guarded")
    assert guarded.post("/v1/gold", json={"task_key": task["task_key"]}).status_code == 401
