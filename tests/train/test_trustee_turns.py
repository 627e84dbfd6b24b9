"""How the trustee mode reads a policy turn, sizes a generation, replaces a task and ends on a role's failure,
each case with the outcome TRUSTEE's code gives (JamyDon/TRUSTEE at the pinned commit, `agent_loop.py` and its
Hermes tool parser, as read), against a stub simulator; the toolcanary mode beside it where it differs.

- Call detection: a turn is a tool call when `<tool_call>` or `</tool_call>` appears anywhere in its text
  (special tokens dropped), reasoning included, or the parser read a call; the parser reads the non-greedy
  `<tool_call>(.*?)</tool_call>` blocks of the whole text (only when both tags occur) and keeps a block whose
  JSON has "name" and "arguments", whatever JSON the arguments are.
- A generation may use `prompt_length + response_length` minus the context so far.
- A task the author could not make, or whose prompt is over the budget, is replaced by another.
- A tool or user role that gives up leaves TRUSTEE's failure text as the last message the verifier reads.

If TRUSTEE_DIR names a real TRUSTEE checkout, the differential test runs TRUSTEE's own parser on the same
generated texts and must agree with the stand-in this suite's checkout carries.
Run: .venvs/train/bin/python -m pytest tests/train/test_trustee_turns.py -q
"""

from __future__ import annotations

import asyncio
import json
import os
import re

import pytest
from conftest import ReplayClient, make_spec, run_episodes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_stub import StubBehaviour, StubSimulator

from toolcanary.common.trustee_checkout import TrusteeCheckout
from toolcanary.contract.hermes import render_tool_call
from toolcanary.train.episode_rules import (
    TRUSTEE_TOOL_FAILED,
    TRUSTEE_USER_FAILED,
    UNPARSED,
    TrusteeRules,
    rules_for,
    trustee_hermes_parser,
)

CALL = render_tool_call("get_weather", {"city": "Paris"})
ANSWER = "It is sunny in Paris."
PROMPT_LENGTH = 4096  # run_episodes' prompt budget


def _run(tokenizer, stub, texts, checkout=None, *, key="t", response_length=2048, **options):
    options |= {"mode": "trustee", "trustee_dir": str(checkout)} if checkout else {}
    client = ReplayClient(tokenizer, texts)
    (out,) = run_episodes(tokenizer, client, stub.url, [make_spec(key, max_user_turns=1, max_assistant_turns=2,
                                                                   max_tool_turns=1)],
                          response_length=response_length, **options)
    return client, out, out.extra_fields["episode"]


@pytest.mark.parametrize(("text", "calls", "tool_message"), [
    # Reasoning that names the tag, then a real call: the non-greedy block runs from the tag in the reasoning to
    # the first closing tag, its JSON does not parse, so no call is read; the tags make it a tool turn.
    ("<think>I answer with <tool_call> blocks.</think>\n" + CALL, [], UNPARSED),
    # A call inside reasoning cut off before </think>: read and answered.
    ("<think>Let me check. " + CALL, [("get_weather", {"city": "Paris"})], None),
    # Arguments that are no object: passed on as they are.
    ('<tool_call>\n{"name": "get_weather", "arguments": ["Paris"]}\n</tool_call>', [("get_weather", ["Paris"])], None),
    # A closing tag alone: a tool turn, no call (the parser needs both tags).
    ("Done.</tool_call>", [], UNPARSED),
    # No "arguments": dropped.
    ('<tool_call>\n{"name": "get_weather"}\n</tool_call>', [], UNPARSED),
], ids=["tag-in-reasoning", "call-in-open-reasoning", "list-arguments", "closing-tag-only", "no-arguments"])
def test_a_turn_is_a_tool_call_as_trustee_reads_it(tokenizer, trustee_checkout, text, calls, tool_message):
    with StubSimulator(StubBehaviour(verify_reward=1)) as stub:
        _, out, episode = _run(tokenizer, stub, [text, ANSWER], trustee_checkout)
    assert episode.tool_call_turns >= 1 and episode.no_call_penalty is False and out.reward_score == 1.0
    sent = [(r["call"]["function"]["name"], r["call"]["function"]["arguments"]) for r in stub.requests["tool"]]
    assert sent == calls
    trajectory = stub.requests["verify"][0]["trajectory"]
    if tool_message:
        assert [m["content"] for m in trajectory if m["role"] == "tool"][0] == tool_message


def test_the_toolcanary_mode_reads_the_same_turns_its_own_way(tokenizer):
    # Its reader: a tag named inside closed reasoning is no call, so a user turn follows and, the task expecting
    # a call, the episode scores -1; non-object arguments are a malformed call answered with an error.
    with StubSimulator(StubBehaviour(verify_reward=1, user_replies=["Paris."])) as stub:
        _, out, episode = _run(tokenizer, stub, ["<think>I answer with <tool_call> blocks.</think>\nHi.", ANSWER])
    assert episode.tool_call_turns == 0 and out.reward_score == -1.0 and stub.requests["tool"] == []
    with StubSimulator(StubBehaviour(verify_reward=1)) as stub:
        _, _, episode = _run(tokenizer, stub, ['<tool_call>\n{"name": "get_weather", "arguments": ["Paris"]}\n'
                                              '</tool_call>', ANSWER])
    assert stub.requests["tool"] == [] and episode.invalid_calls == 1


def _reference_trustee_reading(text: str) -> tuple[bool, list[tuple[str, object]]]:
    """TRUSTEE's reading of a decoded turn, written out from its code for this test."""
    calls = []
    if "<tool_call>" in text and "</tool_call>" in text:
        for body in re.findall(r"<tool_call>(.*?)</tool_call>", text, flags=re.DOTALL):
            try:
                value = json.loads(body)
                name, arguments = value["name"], value["arguments"]
            except Exception:  # noqa: BLE001 - the parser drops whatever fails
                continue
            if isinstance(name, str):
                calls.append((name, arguments))
    return "<tool_call>" in text or "</tool_call>" in text or bool(calls), calls


_PIECES = st.sampled_from(["<tool_call>", "</tool_call>", "<think>", "</think>", "\n", " text ", "{", "}",
                           '{"name": "get_weather", "arguments": {"city": "Paris"}}',
                           '{"name": "get_time", "arguments": 3}', '{"name": 7, "arguments": {}}',
                           '{"name": "get_weather", "arguments": {"city": "{Paris}"}}', '"arguments"'])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(_PIECES, max_size=12))
def test_any_text_is_read_as_trustee_reads_it(tokenizer, trustee_checkout, pieces):
    rules = rules_for("trustee", tokenizer, set(), str(trustee_checkout))
    ids = tokenizer.encode("".join(pieces), add_special_tokens=False)
    turn = asyncio.run(rules.read_turn(ids))
    attempted, calls = _reference_trustee_reading(tokenizer.decode(ids, skip_special_tokens=True))
    assert turn.attempted_call == attempted
    assert [(c.function.name, c.function.arguments) for c in turn.calls] == calls


@pytest.mark.skipif(not os.environ.get("TRUSTEE_DIR"), reason="TRUSTEE_DIR names no TRUSTEE checkout")
def test_trustees_own_parser_agrees_with_the_stand_in(tokenizer, trustee_checkout):
    real = trustee_hermes_parser(TrusteeCheckout.open(os.environ["TRUSTEE_DIR"]), tokenizer)
    stand_in = trustee_hermes_parser(TrusteeCheckout.open(trustee_checkout), tokenizer)

    @settings(max_examples=300, deadline=None)
    @given(pieces=st.lists(_PIECES, max_size=12))
    def agree(pieces):
        ids = tokenizer.encode("".join(pieces), add_special_tokens=False)
        ours = asyncio.run(stand_in.extract_tool_calls(ids))
        theirs = asyncio.run(real.extract_tool_calls(ids))
        assert [(c.name, c.arguments) for c in ours[1]] == [(c.name, c.arguments) for c in theirs[1]]
        assert ours[0] == theirs[0]
    agree()


def test_a_generation_may_use_the_whole_context_left(tokenizer, trustee_checkout):
    with StubSimulator(StubBehaviour(user_replies=["Paris."])) as stub:
        client, _, _ = _run(tokenizer, stub, [ANSWER, ANSWER], trustee_checkout, response_length=2048,
                            max_turn_tokens=100_000)
    assert client.caps == [PROMPT_LENGTH + 2048 - len(p) for p in client.prompts]
    with StubSimulator(StubBehaviour(user_replies=["Paris."])) as stub:
        client, _, _ = _run(tokenizer, stub, [ANSWER, ANSWER], response_length=2048, max_turn_tokens=100_000)
    used = [len(p) - len(client.prompts[0]) for p in client.prompts]
    assert client.caps == [2048 - u for u in used]  # the toolcanary mode: the response budget left


def test_a_task_that_cannot_be_made_or_is_too_long_is_replaced_for_the_whole_group(tokenizer, trustee_checkout):
    behaviour = StubBehaviour(verify_reward=1, failing_task_keys=("g",), oversized_task_keys=("g.r1",))
    with StubSimulator(behaviour) as stub:
        client = ReplayClient(tokenizer, [CALL, ANSWER])
        outputs = run_episodes(tokenizer, client, stub.url, [make_spec("g", member=i) for i in range(3)],
                               mode="trustee", trustee_dir=str(trustee_checkout))
    episodes = [o.extra_fields["episode"] for o in outputs]
    assert {(e.task_key, e.tasks_replaced, e.outcome) for e in episodes} == {("g.r2", 2, "ok")}
    assert {r["task_key"] for r in stub.requests["tool"]} == {"g.r2"}
    with StubSimulator(StubBehaviour(failing_task_keys=("g", "g.r1", "g.r2", "g.r3", "g.r4"))) as stub:
        client = ReplayClient(tokenizer, [CALL])
        (out,) = run_episodes(tokenizer, client, stub.url, [make_spec("g")], mode="trustee",
                              trustee_dir=str(trustee_checkout))
    episode = out.extra_fields["episode"]
    assert (episode.outcome, episode.abort_role, episode.tasks_replaced) == ("aborted", "task", 4)
    assert len(stub.requests["task"]) == 5 and client.emitted == []
    with StubSimulator(StubBehaviour(oversized_task_keys=("g",))) as stub:  # the toolcanary mode drops it
        (out,) = run_episodes(tokenizer, ReplayClient(tokenizer, [CALL]), stub.url, [make_spec("g")])
    assert (out.extra_fields["episode"].abort_cause, len(stub.requests["task"])) == ("too_large", 1)


@pytest.mark.parametrize(("fail", "texts", "last"), [
    ("tool", [CALL], {"role": "tool", "content": TRUSTEE_TOOL_FAILED}),
    ("user", [ANSWER], {"role": "user", "content": TRUSTEE_USER_FAILED}),
])
def test_after_a_role_gives_up_the_verifier_reads_trustees_failure_text(tokenizer, trustee_checkout, fail, texts,
                                                                         last):
    with StubSimulator(StubBehaviour(fail={fail: "aborted"}, verify_reward=1)) as stub:
        _run(tokenizer, stub, texts, trustee_checkout)
    (verify,) = stub.requests["verify"]
    assert {k: verify["trajectory"][-1][k] for k in ("role", "content")} == last
    assert verify["trajectory"][-2]["role"] == "assistant"


def test_the_trustee_rules_refuse_a_checkout_without_the_tool_parser(tokenizer, make_trustee_checkout, tmp_path):
    checkout = make_trustee_checkout(tmp_path / "TRUSTEE", skip="tool_parser.py")
    with pytest.raises(Exception, match="tool_parser.py"):
        rules_for("trustee", tokenizer, set(), str(checkout))
    assert isinstance(rules_for("trustee", tokenizer, set(), str(make_trustee_checkout(tmp_path / "T2"))),
                      TrusteeRules)
