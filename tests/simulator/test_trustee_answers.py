"""The trustee mode reads, checks and requests the role answers as TRUSTEE's simulator does.

What is pinned here, each against the outcome TRUSTEE's steps give (`json_output`'s module docstring):
- the reader (`extract_json_as_trustee`): fixed cases, and a property test over generated texts (reasoning tags,
  fences, nested braces, truncated JSON) against a reference of the seven steps written out below;
- with TRUSTEE_DIR set to a TRUSTEE checkout whose `verl` is importable: the same texts against TRUSTEE's own
  `Simulator._extract_json` (skipped, with the reason, when its module cannot be imported);
- each role's check of the value (`Trustee*Output`): a dict with the role's keys, `float()` rewards clamped, and
  `str()` of the tool result and the user's reply; a parse failure is cause `parse`, a failed check `validation`;
- the OpenAI SDK's re-sends within an attempt (`sdk_retries`): which failures are re-sent, the pause, the count;
- the author's expected calls reaching the verifier as written, and calls whose arguments are not an object.

Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_trustee_answers.py -q
     TRUSTEE_DIR=../TRUSTEE .venvs/simulator/bin/python -m pytest tests/simulator/test_trustee_answers.py -q
"""

from __future__ import annotations

import email.utils
import importlib.util
import json
import os
import re
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolcanary.contract import DifficultySettings, RoleRecord
from toolcanary.simulator.__main__ import main
from toolcanary.simulator.library_index import load_index
from toolcanary.simulator.llm import upstream
from toolcanary.simulator.llm.json_output import OutputParseError, extract_json_as_trustee, read_trustee_json
from toolcanary.simulator.llm.role_answers import TrusteeToolOutput, TrusteeUserOutput, TrusteeVerifierOutput
from toolcanary.simulator.scripted import make_task
from toolcanary.simulator.settings import SimulatorSettings

DIFFICULTY = {"num_tools": 2, "expected_calls": 2, "user_persona": 0, "query_ambiguity": 0, "expected_turns": 0}
AUTHOR = {"expected_tool_calls": [{"name": "messages/send", "arguments": {"size": 500}}, "messages/list", 3],
          "user_intent": "send the report", "user_persona": "terse", "first_user_query": "Send my report"}
SYSTEM = "SYSTEM level=1 format=hermes"
PARSE = ("parse", None)


# --- the reference: TRUSTEE's reading, one step after the other ---------------------------------------------------
class _Nothing:
    """A step that found nothing (None is a JSON value a step may find)."""


NOTHING = _Nothing()


def _ref_unfence(text: str) -> str:
    if "```json" in text:
        opener = "```json"
    elif "```" in text:
        opener = "```"
    else:
        return text
    start = text.index(opener) + len(opener)
    end = text.find("```", start)
    return (text[start:] if end == -1 else text[start:end]).strip()


def _ref_loads(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return NOTHING


def _ref_first_object(text: str):
    depth, start = 0, -1
    for index, char in enumerate(text):
        if char == "{":
            if depth == 0:
                start = index
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0 and start >= 0:
                value = _ref_loads(text[start:index + 1])
                if value is not NOTHING:
                    return value
                start = -1
    return NOTHING


def _ref_repair(text: str):
    reward = re.search(r'"reward"\s*:\s*(-?[01](?:\.\d+)?)', text)
    if reward and -1 <= float(reward.group(1)) <= 1:
        return {"reward": float(reward.group(1))}
    last = text.rfind("{")
    if last >= 0:
        tail = text[last:]
        open_braces = tail.count("{") - tail.count("}")
        if open_braces > 0:
            for suffix in ("}" * open_braces, '"' + "}" * open_braces):
                value = _ref_loads(tail + suffix)
                if value is not NOTHING:
                    return value
    return NOTHING


def reference(original: str) -> tuple[str, str | None]:
    """("value", the value as JSON text) or PARSE."""
    content = _ref_unfence(original)
    if "</think>" in content:
        after = content[content.index("</think>") + len("</think>"):]
        content = _ref_unfence(after.strip())
    elif "<think>" in content:
        content = ""
    steps = [lambda: _ref_loads(content), lambda: _ref_first_object(content)]
    if content != original:
        steps.append(lambda: _ref_first_object(original))
    steps.append(lambda: _ref_repair(content))
    if content != original:
        steps.append(lambda: _ref_repair(original))
    for step in steps:
        try:
            value = step()
        except ValueError:  # json.loads failing otherwise than on syntax ends the reading
            return PARSE
        if value is not NOTHING:
            return "value", json.dumps(value)
    return PARSE


def ours(text: str) -> tuple[str, str | None]:
    try:
        return "value", json.dumps(extract_json_as_trustee(text))
    except OutputParseError:
        return PARSE


# --- generated answers: reasoning, fences, nested braces, truncation ----------------------------------------------
FRAGMENTS = ["<think>", "</think>", "<think>\nI think ", "```json", "```", "```json\n", "\n```", "{", "}", "[", "]",
             '"', ":", ",", " ", "\n", '"reward"', '"result"', '"response"', ": 1", ": -1", ": 0.5", ": 1.5", ": 10",
             '"reward": 1', '"reward":-0.25', "null", "true", "Sure: ", "{}", '"a}b"', '"{"', "\\", "NaN"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(st.sampled_from('ab{}"\\ :'), max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.sampled_from(["result", "reward", "response", "reasoning", "a"]), children, max_size=3),
    max_leaves=8)
role_answers = st.fixed_dictionaries(
    {"reward": st.sampled_from([-1, 0, 1, 0.5, "1", 7, None])},
    optional={"result": json_values, "response": json_values, "reasoning": st.text(max_size=6)})
json_texts = st.one_of(json_values, role_answers).map(json.dumps)
truncated = st.tuples(json_texts, st.integers(0, 120)).map(lambda cut: cut[0][:cut[1]])
pieces = st.one_of(st.sampled_from(FRAGMENTS), json_texts, truncated, st.text(max_size=4))
answers = st.lists(pieces, max_size=12).map("".join)


@settings(max_examples=800, deadline=None)
@given(answers)
def test_the_reader_agrees_with_trustees_steps_on_generated_answers(text):
    assert ours(text) == reference(text)


@settings(max_examples=200, deadline=None)
@given(answers, st.sampled_from(["", " ", "\n", " \n\t"]))
def test_the_answer_is_stripped_before_it_is_read_as_trustees_call_does(text, pad):
    try:
        value, repaired = read_trustee_json(pad + text + pad)
        got = "value", json.dumps(value)
    except OutputParseError:
        got, repaired = PARSE, False
    assert got == reference(text.strip()) and repaired is False


@pytest.mark.parametrize(("text", "expected"), [
    # Step 1 takes the first ```json fence, even inside the reasoning; its body parses at step 3.
    ('<think>Let me draft it:\n```json\n{"result": "draft", "reward": 0}\n```\nBetter:</think>\n'
     '{"result": "final", "reward": 1}', {"result": "draft", "reward": 0}),
    # Step 2 empties a text cut off in its reasoning; step 5 finds the complete object in the whole text.
    ('<think>I could answer {"result": "x", "reward": 1} but first', {"result": "x", "reward": 1}),
    # Step 4 ends the object at the "}" inside the string, which does not parse; step 6 finds the reward alone.
    ('Sure: {"result": "a}b", "reward": 1}', {"reward": 1.0}),
    # Step 3 takes whatever JSON the text is: a list, a number.
    ('[{"result": "a", "reward": 1}]', [{"result": "a", "reward": 1}]),
    ("1", 1),
    # After the reasoning, a fence is unwrapped again (step 2).
    ('<think>hmm</think>\n```\n{"response": "ok", "reward": -1}\n```', {"response": "ok", "reward": -1}),
    # A fence that never closes runs to the end of the text (step 1).
    ('Answer: ```json {"result": "r", "reward": 0.5}', {"result": "r", "reward": 0.5}),
    # Step 6: the tail from the last "{" is closed with a quote and a brace.
    ('{"result": "cut sho', {"result": "cut sho"}),
    # Step 6: a reward named in a truncated text wins over closing it; "10" reads as its first digit, 1.
    ('{"reward": 10, "reasoning": "the agent', {"reward": 1.0}),
    # Step 7: the reward is only in the reasoning, which steps 1-2 dropped.
    ('<think>so "reward": -1 it is, and</think> I cannot say', {"reward": -1.0}),
])
def test_fixed_answers_read_as_trustee_reads_them(text, expected):
    assert extract_json_as_trustee(text) == expected
    assert reference(text) == ("value", json.dumps(expected))


@pytest.mark.parametrize("text", [
    "",
    "no JSON here",
    "<think>still reasoning when it was cut off",
    '{"reward": 1.5, "result": [1, 2',  # 1.5 is out of [-1, 1]; closing with "}" or '"}' leaves the "[" open
    '{"a": ' + "1" * 5000 + "}",  # json.loads refuses the integer with a ValueError: the reading stops
])
def test_texts_that_yield_nothing_are_a_parse_failure(text):
    with pytest.raises(OutputParseError):
        extract_json_as_trustee(text)
    assert reference(text) == PARSE


@pytest.fixture(scope="module")
def trustees_extract_json():
    """TRUSTEE's own reader, from the checkout at TRUSTEE_DIR; skipped when that module cannot be imported."""
    root = os.environ.get("TRUSTEE_DIR")
    if not root:
        pytest.skip("TRUSTEE_DIR is not set: no TRUSTEE checkout to compare the reader with")
    path = Path(root) / "verl" / "recipe" / "trustee" / "simulator.py"
    if not path.is_file():
        pytest.skip(f"TRUSTEE_DIR has no verl/recipe/trustee/simulator.py: {path}")
    sys.path.insert(0, str(path.parents[2]))  # where `recipe` (and TRUSTEE's `verl`) can be imported from
    try:
        spec = importlib.util.spec_from_file_location("trustee_simulator_under_test", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - any failure to import means there is nothing to compare with
        pytest.skip(f"TRUSTEE's simulator module imports verl's agent loop, openai and httpx when it is imported, "
                    f"and that failed here ({type(err).__name__}: {err}); run this test where verl is installed")
    finally:
        sys.path.remove(str(path.parents[2]))
    simulator = object.__new__(module.Simulator)  # the reader uses no state set by __init__
    return simulator._extract_json


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(answers)
def test_the_reader_agrees_with_trustees_own_on_generated_answers(trustees_extract_json, text):
    try:
        theirs = "value", json.dumps(trustees_extract_json(text))
    except ValueError:  # json.JSONDecodeError is one: TRUSTEE's callers count both as a parse failure
        theirs = PARSE
    assert ours(text) == theirs


# --- checking the value, per role ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("result", "shown"), [
    ({"a": 1}, "{'a': 1}"), (None, "None"), (True, "True"), (3, "3"), ([1, "x"], "[1, 'x']"), ("text", "text")])
def test_the_tool_result_is_pythons_str_of_the_value(result, shown):
    assert TrusteeToolOutput.read({"result": result, "reward": 1}).result == shown


@pytest.mark.parametrize(("reward", "read"), [
    (1, 1.0), (0.5, 0.5), ("-0.25", -0.25), (" 1 ", 1.0), (True, 1.0), (7, 1.0), (-3, -1.0), ("inf", 1.0),
    ("nan", 1.0)])  # float() then the clamp; NaN comes out of it as 1.0
def test_a_reward_is_float_of_the_value_clamped(reward, read):
    assert TrusteeVerifierOutput.read({"reward": reward}).reward == read


@pytest.mark.parametrize(("answer", "message"), [
    ([{"result": "a", "reward": 1}], "must be a dict"),
    ("text", "must be a dict"),
    ({"reward": 1.0}, "'result'"),
    ({"result": "a"}, "'reward'"),
    ({"result": "a", "reward": None}, "not a number"),
    ({"result": "a", "reward": "high"}, "float"),
    ({"result": "a", "reward": [1]}, "not a number"),
    ({"result": "a", "reward": 10 ** 400}, "range"),
])
def test_a_value_that_does_not_fit_the_tool_role_is_refused(answer, message):
    with pytest.raises(ValueError, match=message):
        TrusteeToolOutput.read(answer)


def test_each_role_needs_its_own_keys_and_nothing_else():
    assert TrusteeUserOutput.read({"response": None, "reward": "0"}) == TrusteeUserOutput("None", 0.0)
    assert TrusteeVerifierOutput.read({"reward": -1, "reasoning": ["a"]}) == TrusteeVerifierOutput(-1.0, "['a']")
    assert TrusteeToolOutput.read({"result": "r", "reward": 0, "is_error": "yes"}).is_error is False
    for role, answer in [(TrusteeUserOutput, {"reward": 1}), (TrusteeVerifierOutput, {"result": "r"})]:
        with pytest.raises(ValueError):
            role.read(answer)


# --- over HTTP --------------------------------------------------------------------------------------------------------
@pytest.fixture
def quick_resends(monkeypatch):
    """The SDK's pauses shortened to milliseconds (the pacing itself is tested apart)."""
    monkeypatch.setattr(upstream, "SDK_FIRST_DELAY_S", 0.001)


def _task(client, stub, answer=None, key="g1") -> dict:
    stub.push(json.dumps(answer or AUTHOR))
    body = client.post("/v1/task", json={"task_key": key, "difficulty": DIFFICULTY}).json()
    assert body["outcome"] == "ok", body
    return body["task"]


def _call(arguments=NOTHING) -> dict:
    """A call to an offered tool, its arguments in the OpenAI wire form (JSON text)."""
    arguments = {"size": "500"} if arguments is NOTHING else arguments
    return {"function": {"name": "messages/send", "arguments": json.dumps(arguments)}}


def _history(task: dict, call: dict | None = None) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task["first_user_query"]},
            {"role": "assistant", "content": "<tool_call>...</tool_call>", "tool_calls": [call or _call()]}]


def _fields(request: dict, marker: str) -> dict:
    content = request["messages"][-1]["content"]
    assert content.startswith(marker + " "), content[:80]
    return json.loads(content[len(marker) + 1:])


def _records(tmp_path, role: str) -> list[RoleRecord]:
    path = tmp_path / "runs" / "test" / "simulator" / "step_none.jsonl"
    return [r for r in map(RoleRecord.model_validate_json, path.read_text().splitlines()) if r.role == role]


def _post(client, role: str, task: dict) -> dict:
    history = _history(task)
    body = {"task_key": task["task_key"]}
    body |= {"tool": {"history": history, "call": history[-1]["tool_calls"][0]}, "user": {"history": history},
             "verify": {"trajectory": history, "num_criteria": 2}}[role]
    response = client.post(f"/v1/{role}", json=body)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize(("role", "answer", "expected"), [
    ("tool", '<think>draft:\n```json\n{"result": "draft", "reward": 0}\n```</think>{"result": "final", "reward": 1}',
     {"result": "draft", "reward": 0.0, "is_error": False}),
    ("tool", '<think>I could answer {"result": "x", "reward": 1} but', {"result": "x", "reward": 1.0}),
    ("tool", '{"result": {"sent": true, "id": null}, "reward": "0.5"}',
     {"result": "{'sent': True, 'id': None}", "reward": 0.5}),
    ("user", '{"response": null, "reward": 3}', {"reply": "None", "reward": 1.0, "done": False}),
    ("user", '```json\n{"response": "", "reward": 0}\n```', {"reply": "", "reward": 0.0, "done": True}),
    ("verify", '{"reward": -0.5, "reasoning": 42}', {"reward": -0.5, "reasoning": "42"}),
    ("verify", 'The "reward": 1 since the agent {"did": "it"', {"reward": 1.0}),
])
def test_answers_the_roles_read_as_trustee_does(trustee, upstreams, role, answer, expected):
    client = trustee()
    task = _task(client, upstreams[0])
    upstreams[0].push(answer)
    body = _post(client, role, task)
    assert body["outcome"] == "ok", body
    assert {key: body[key] for key in expected} == expected


@pytest.mark.parametrize(("role", "answer", "cause", "detail"), [
    ("tool", 'Sure: {"result": "a}b", "reward": 1}', "validation", "'result'"),  # read as {"reward": 1.0}
    ("tool", '[{"result": "a", "reward": 1}]', "validation", "must be a dict"),
    ("user", '{"response": "hi", "reward": "high"}', "validation", "float"),
    ("verify", '{"reasoning": "fine"}', "validation", "'reward'"),
    ("verify", "<think>the agent did well, so the reward", "parse", "no JSON value"),
    ("user", "I would rather not answer.", "parse", "no JSON value"),
])
def test_answers_that_do_not_fit_end_aborted_after_three_attempts_with_trustees_cause(trustee, upstreams, tmp_path,
                                                                                      role, answer, cause, detail):
    client = trustee()
    task = _task(client, upstreams[0])
    upstreams[0].push(answer, answer, answer)
    body = _post(client, role, task)
    assert (body["outcome"], body["abort_cause"]) == ("aborted", cause) and detail in body["abort_detail"]
    assert len(upstreams[0].requests) == 1 + 3  # an answer that came is never re-sent by the SDK
    assert _records(tmp_path, role)[-1].retries == 2


# --- the author's expected calls and the call text ----------------------------------------------------------------------
def test_the_verifier_gets_the_authors_expected_calls_as_written_and_the_task_keeps_their_names(trustee, upstreams,
                                                                                             issue):
    client = trustee()
    task = _task(client, upstreams[0])
    assert [c["name"] for c in task["expected_tool_calls"]] == ["messages/send", "messages/list", "3"]
    assert task["expected_tool_calls_as_written"] == AUTHOR["expected_tool_calls"]
    upstreams[0].push('{"reward": 1}')
    assert _post(client, "verify", task)["outcome"] == "ok"
    assert _fields(upstreams[0].requests[-1], "VERIFY")["expected"] == AUTHOR["expected_tool_calls"]

    # Expected calls that are not a list are none, as TRUSTEE makes them.
    odd = _task(client, upstreams[0], AUTHOR | {"expected_tool_calls": {"name": "messages/send"}}, key="g2")
    assert odd["expected_tool_calls"] == [] and odd["expected_tool_calls_as_written"] == []
    upstreams[0].push('{"reward": 0}')
    _post(client, "verify", odd)
    assert _fields(upstreams[0].requests[-1], "VERIFY")["expected"] == []

    # A task stored before the list was kept shows the verifier the names.
    older = issue(client, task | {"task_key": "older", "expected_tool_calls_as_written": None})
    upstreams[0].push('{"reward": 0}')
    _post(client, "verify", older)
    assert _fields(upstreams[0].requests[-1], "VERIFY")["expected"] == ["messages/send", "messages/list", "3"]


@pytest.mark.parametrize("arguments", [[1, "a"], "just text", 3, 2.5, None, True, {"size": "500", "ids": [1, 2]}])
def test_a_calls_arguments_of_any_json_type_reach_the_tool_role_as_trustee_writes_them(trustee, upstreams,
                                                                                     arguments):
    client = trustee()
    task = _task(client, upstreams[0])
    call = _call(arguments)
    upstreams[0].push('{"result": "ok", "reward": 0}')
    response = client.post("/v1/tool", json={"task_key": task["task_key"], "history": _history(task, call),
                                             "call": call})
    assert response.status_code == 200 and response.json()["outcome"] == "ok", response.text
    written = json.dumps({"type": "function", "function": {"name": "messages/send", "arguments": arguments}}, indent=2)
    assert _fields(upstreams[0].requests[-1], "TOOL")["call"] == written


# --- the OpenAI SDK's re-sends within an attempt -----------------------------------------------------------------------
@pytest.mark.parametrize(("status", "headers", "resent"), [
    (408, None, True), (409, None, True), (429, None, True), (500, None, True), (503, None, True), (599, None, True),
    (400, None, False), (401, None, False), (404, None, False), (422, None, False),
    (400, {"x-should-retry": "true"}, True), (500, {"x-should-retry": "false"}, False),
    (500, {"x-should-retry": "maybe"}, True), (404, {"X-Should-Retry": "TRUE"}, False),
])
def test_which_error_statuses_the_sdk_re_sends(status, headers, resent):
    assert upstream.sdk_should_resend(status, headers) is resent


def test_the_sdks_pause_doubles_from_half_a_second_to_eight_shortened_by_up_to_a_quarter(monkeypatch):
    monkeypatch.setattr(upstream.random, "random", lambda: 0.0)
    assert [upstream.sdk_resend_delay_s(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    monkeypatch.setattr(upstream.random, "random", lambda: 1.0)
    assert [upstream.sdk_resend_delay_s(n) for n in range(3)] == [0.375, 0.75, 1.5]


@pytest.mark.parametrize(("headers", "pause"), [
    ({"retry-after-ms": "250"}, 0.25),
    ({"retry-after": "3"}, 3.0),
    ({"retry-after": "2.5", "retry-after-ms": "not a number"}, 2.5),
    ({"retry-after": "60"}, 60.0),
    ({"retry-after": "61"}, 0.5),  # more than a minute: the SDK's own backoff instead
    ({"retry-after": "0"}, 0.5),
    ({"retry-after": "-4"}, 0.5),
    ({"retry-after": "soon"}, 0.5),
])
def test_the_sdks_pause_follows_retry_after_up_to_a_minute(monkeypatch, headers, pause):
    monkeypatch.setattr(upstream.random, "random", lambda: 0.0)
    assert upstream.sdk_resend_delay_s(0, headers) == pause


def test_a_retry_after_date_asks_for_the_time_until_it():
    when = email.utils.formatdate(time.time() + 10, usegmt=True)
    assert 8.0 <= upstream.sdk_resend_delay_s(0, {"retry-after": when}) <= 10.5


def test_a_500_twice_then_an_answer_is_one_attempt_of_three_requests(trustee, upstreams, tmp_path):
    client = trustee(retries=0)  # one attempt only: whatever is re-sent, the SDK's rule re-sent it
    task = _task(client, upstreams[0])
    upstreams[0].push((500, "down", 0.0), (502, "down", 0.0), '{"result": "fine", "reward": 1}')
    started = time.monotonic()
    body = _post(client, "tool", task)
    elapsed = time.monotonic() - started
    assert body["outcome"] == "ok" and body["result"] == "fine"
    assert len(upstreams[0].requests) == 1 + 3
    assert 0.375 + 0.75 <= elapsed < 0.5 + 1.0 + 2.0, elapsed  # the SDK's two pauses, jitter included
    assert _records(tmp_path, "tool")[-1].retries == 2
    url = "upstream 1"  # upstreams are named by their place in the list, never by URL
    text = client.get("/metrics").text
    assert f'toolcanary_simulator_upstream_requests_total{{result="http_5xx",upstream="{url}"}} 2' in text
    assert f'toolcanary_simulator_upstream_requests_total{{result="ok",upstream="{url}"}} 2' in text  # author, tool
    assert 'toolcanary_simulator_retries_total{role="tool"} 2' in text


@pytest.mark.parametrize(("reply", "requests", "outcome"), [
    ((400, "bad request", 0.0), 1, "aborted"),
    ((404, "no such model", 0.0), 1, "aborted"),
    ((503, "down", 0.0, {"x-should-retry": "false"}), 1, "aborted"),
    ((400, "busy", 0.0, {"x-should-retry": "true"}), 2, "ok"),
    ((429, "slow down", 0.0, {"retry-after-ms": "20"}), 2, "ok"),
    ((200, '{"result": "late", "reward": 1}', 1.0), 2, "ok"),  # over timeout_s: a timeout, re-sent
])
def test_what_one_attempt_re_sends(trustee, upstreams, quick_resends, reply, requests, outcome):
    client = trustee(retries=0)
    task = _task(client, upstreams[0])
    upstreams[0].push(reply, '{"result": "fine", "reward": 1}')
    body = _post(client, "tool", task)
    assert body["outcome"] == outcome and len(upstreams[0].requests) == 1 + requests
    if outcome == "aborted":
        assert body["abort_cause"] == "upstream"


def test_a_role_call_makes_at_most_nine_requests_and_an_author_call_six(trustee, upstreams, tmp_path, quick_resends):
    client = trustee()
    task = _task(client, upstreams[0])
    upstreams[0].default = (500, "down", 0.0)
    try:
        body = _post(client, "user", task)
        assert (body["outcome"], body["abort_cause"]) == ("aborted", "upstream")
        assert len(upstreams[0].requests) == 1 + 9 and _records(tmp_path, "user")[-1].retries == 8
        upstreams[0].reset()
        body = client.post("/v1/task", json={"task_key": "g9", "difficulty": DIFFICULTY}).json()
        assert body["outcome"] == "aborted" and len(upstreams[0].requests) == 6
    finally:
        upstreams[0].default = (200, '{"result": "ok", "reward": 1}', 0.0)


def test_the_toolcanary_mode_sends_each_attempt_once(make_client, upstreams, issue):
    for stub in upstreams:
        stub.reset()
    client = make_client(backend="llm", upstreams=[upstreams[0].url], timeout_s=0.5, retries=0)
    task = make_task(load_index(), DifficultySettings(**DIFFICULTY), "plain", 0).model_dump(mode="json")
    issue(client, task)
    expected = task["expected_tool_calls"][0]
    call = {"function": {"name": expected["name"], "arguments": expected["arguments"]}}
    upstreams[0].push((500, "down", 0.0), '{"result": "fine", "reward": 1}')
    body = client.post("/v1/tool", json={"task_key": "plain", "history": [], "call": call}).json()
    assert (body["outcome"], body["abort_cause"]) == ("aborted", "upstream") and len(upstreams[0].requests) == 1


def test_sdk_retries_is_a_setting_with_a_default_per_mode(trustee_checkout, capsys):
    trustee = {"mode": "trustee", "backend": "llm", "trustee_dir": trustee_checkout}
    assert SimulatorSettings.from_env({}).sdk_retries == 0
    assert SimulatorSettings.from_env({}, **trustee).sdk_retries == 2
    assert SimulatorSettings.from_env({"TOOLCANARY_SIMULATOR_SDK_RETRIES": "0"}, **trustee).sdk_retries == 0
    assert SimulatorSettings.from_env({}, sdk_retries=4).sdk_retries == 4
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    assert "--sdk-retries" in capsys.readouterr().out
