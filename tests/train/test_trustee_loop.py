"""The agent loop's trustee mode against a stub simulator: TRUSTEE's system prompts from a checkout, its turn
limits at levels 1, 40 and 100, its abort handling and reward, its tool-turn rules and the overlong-task drop.

Each count below is TRUSTEE's, derived from its agent loop (a limit stops the episode after a generation that
takes a count over it; trustee_reference.yaml, agent_loop.turn_limits) and compared with the toolcanary mode.
Run: .venvs/train/bin/python -m pytest tests/train/test_trustee_loop.py -q
"""

from __future__ import annotations

import math
import random

import pytest
import torch
from conftest import ReplayClient, make_spec, run_episodes, spans
from sim_stub import StubBehaviour, StubSimulator

from toolcanary.contract import ContractError
from toolcanary.contract.hermes import render_tool_call
from toolcanary.train.curriculum import Curriculum, derive
from toolcanary.train.episode import truncate_middle_trustee
from toolcanary.train.gpu.seed_data import validation_specs
from toolcanary.train.gpu.verl_hooks import validation_rows
from toolcanary.train.grpo import grpo_advantage
from toolcanary.train.rollout import EpisodeRunner
from toolcanary.train.step_metrics import step_row

CALL = render_tool_call("get_weather", {"city": "Paris"})
ANSWER = "It is sunny in Paris."


def _limits(level: int) -> dict[str, int]:
    settings = derive(level)
    return {"max_user_turns": settings.max_user_turns, "max_assistant_turns": settings.max_assistant_turns,
            "max_tool_turns": settings.max_tool_turns}


def _run(tokenizer, stub, texts, checkout=None, *, specs=None, key="t", response_length=2048, **limits):
    options = {"mode": "trustee", "trustee_dir": str(checkout)} if checkout else {}
    client = ReplayClient(tokenizer, texts)
    outputs = run_episodes(tokenizer, client, stub.url, specs or [make_spec(key, **limits)],
                           response_length=response_length, **options)
    return client, outputs


@pytest.mark.parametrize(("level", "texts", "trustee", "ours"), [
    # (generations, tool turns, user turns, stop reason) in each mode
    (1, [CALL], (3, 2, 0, "assistant_turns"), (2, 1, 0, "assistant_turns")),
    (40, [CALL], (3, 2, 0, "assistant_turns"), (2, 1, 0, "assistant_turns")),
    (1, [ANSWER], (3, 0, 2, "assistant_turns"), (2, 0, 1, "assistant_turns")),
    (100, [CALL], (5, 4, 0, "tool_turns"), (4, 3, 0, "tool_turns")),
    (100, [CALL, ANSWER] * 4, (7, 3, 3, "assistant_turns"), (6, 3, 2, "assistant_turns")),
], ids=["L1-calls", "L40-calls", "L1-answers", "L100-calls", "L100-alternating"])
def test_turn_limits_at_levels_1_40_and_100(tokenizer, trustee_checkout, level, texts, trustee, ours):
    assert _limits(1) == _limits(40) == {"max_user_turns": 1, "max_assistant_turns": 2, "max_tool_turns": 1}
    replies = ["Paris, please."] * 8
    for checkout, expected in ((trustee_checkout, trustee), (None, ours)):
        with StubSimulator(StubBehaviour(user_replies=list(replies))) as stub:
            client, (out,) = _run(tokenizer, stub, texts, checkout, key=f"L{level}", **_limits(level))
        episode = out.extra_fields["episode"]
        got = (len(client.emitted), episode.tool_turns, episode.user_turns, episode.stop_reason)
        assert got == expected, ("trustee" if checkout else "toolcanary", got)
        assert len(stub.requests["tool"]) == episode.tool_turns and len(stub.requests["user"]) == episode.user_turns
        trained = [text for bit, text in spans(tokenizer, out) if bit == 1]
        assert len(trained) == len(client.emitted)  # every generation is trained on, the last one included
        shown = [m for m in stub.requests["verify"][0]["trajectory"] if m["role"] == "assistant"]
        if checkout:  # the generation that went over a limit is never shown to the verifier
            assert len(shown) == len(client.emitted) - (episode.stop_reason != "user_terminated")
        else:
            assert len(shown) == len(client.emitted)


def test_the_system_prompt_comes_from_the_checkout_and_roles_see_the_whole_conversation(tokenizer,
                                                                                       trustee_checkout):
    with StubSimulator(StubBehaviour(user_replies=["Paris, please."])) as stub:
        client, (out,) = _run(tokenizer, stub, ["<think>\nwhich city?\n</think>\n\nWhich city?", CALL],
                              trustee_checkout, **_limits(100))
    prompt = tokenizer.decode(out.prompt_ids)
    assert "SYSTEM level=0 format=hermes" in prompt
    history = stub.requests["user"][0]["history"]
    assert history[0] == {"role": "system", "content": "SYSTEM level=0 format=hermes"}
    assert history[1]["role"] == "user" and history[-1]["content"].startswith("<think>")  # as the policy wrote it
    tool_history = stub.requests["tool"][0]["history"]
    # TRUSTEE's messages carry the text alone: the call is in it, never beside it.
    assert "<tool_call>" in tool_history[-1]["content"] and not tool_history[-1].get("tool_calls")


def test_an_aborted_episode_is_still_verified_and_keeps_that_reward_out_of_the_loss(tokenizer, trustee_checkout):
    with StubSimulator(StubBehaviour(fail={"tool": "aborted"}, verify_reward=1)) as stub:
        _, (out,) = _run(tokenizer, stub, [CALL], trustee_checkout)
    episode = out.extra_fields["episode"]
    assert episode.outcome == "aborted" and episode.abort_role == "tool" and len(stub.requests["verify"]) == 1
    assert out.reward_score == 1.0 and episode.verifier_reward == 1 and sum(out.response_mask) == 0
    with StubSimulator(StubBehaviour(fail={"tool": "aborted"}, verify_reward=1)) as stub:
        _, (ours,) = _run(tokenizer, stub, [CALL])
    assert ours.reward_score == 0.0 and stub.requests["verify"] == []


def test_no_tool_call_turn_scores_minus_one_aborted_or_not_and_a_failed_verifier_scores_zero(tokenizer,
                                                                                            trustee_checkout):
    with StubSimulator(StubBehaviour(fail={"user": "aborted"}, verify_reward=1)) as stub:
        _, (out,) = _run(tokenizer, stub, [ANSWER], trustee_checkout)
    episode = out.extra_fields["episode"]
    assert episode.outcome == "aborted" and out.reward_score == -1.0 and episode.no_call_penalty is True
    with StubSimulator(StubBehaviour(fail={"tool": "aborted", "verify": "aborted"})) as stub:
        _, (out,) = _run(tokenizer, stub, [CALL], trustee_checkout)
    episode = out.extra_fields["episode"]
    assert out.reward_score == 0.0 and episode.abort_role == "tool"  # the first cause is kept


def test_the_curriculum_mean_and_group_statistics_of_a_hand_computed_batch(tokenizer, trustee_checkout):
    # Four episodes of one task: finished with a call (verifier 1), aborted after a call (verifier 1), aborted
    # after a call with the verifier failing too (0), finished without a call (-1).
    cases = [{}, {"fail": {"tool": "aborted"}}, {"fail": {"tool": "aborted", "verify": "aborted"}}, {}]
    texts = [[CALL], [CALL], [CALL], [ANSWER]]
    records, outputs = {"trustee": [], "toolcanary": []}, {"trustee": [], "toolcanary": []}
    for mode, checkout in (("trustee", trustee_checkout), ("toolcanary", None)):
        for member, (behaviour, turns) in enumerate(zip(cases, texts, strict=True)):
            with StubSimulator(StubBehaviour(verify_reward=1, **behaviour)) as stub:
                _, (out,) = _run(tokenizer, stub, turns, checkout, specs=[make_spec("batch", member=member)])
            outputs[mode].append(out)
            records[mode].append(out.extra_fields["episode"])
    assert [r.outcome for r in records["trustee"]] == ["ok", "aborted", "aborted", "ok"]
    assert [r.reward for r in records["trustee"]] == [1.0, 1.0, 0.0, -1.0]
    assert [r.reward for r in records["toolcanary"]] == [1.0, 0.0, 0.0, -1.0]
    # TRUSTEE's curriculum mean counts every row at its reward; the toolcanary mode counts aborted ones at 0.
    assert step_row(1, records["trustee"], level=1, step_seconds=0)["reward_mean"] == 0.25
    assert step_row(1, records["toolcanary"], level=1, step_seconds=0)["reward_mean"] == 0.0
    # The group statistics leave both aborted rows out: mean 0 and unbiased std sqrt(2) over [1, -1].
    length = max(len(o.response_mask) for o in outputs["trustee"])
    mask = torch.tensor([o.response_mask + [0] * (length - len(o.response_mask)) for o in outputs["trustee"]],
                        dtype=torch.float32)
    scores = torch.zeros_like(mask)
    for row, out in enumerate(outputs["trustee"]):
        scores[row, int(mask[row].nonzero().max()) if mask[row].any() else 0] = out.reward_score
    advantages, _ = grpo_advantage(scores, mask, index=["batch"] * 4)
    finished = [advantages[row][mask[row] == 1].unique().tolist() for row in (0, 3)]
    assert finished[0] == pytest.approx([1 / math.sqrt(2)], abs=1e-4)
    assert finished[1] == pytest.approx([-1 / math.sqrt(2)], abs=1e-4)
    assert mask[1].sum() == mask[2].sum() == 0  # aborted: nothing of theirs is trained on
    rewards = torch.tensor([o.reward_score for o in outputs["trustee"]])
    kept = rewards[[0, 3]]
    assert finished[0][0] == pytest.approx(float((kept[0] - kept.mean()) / (kept.std() + 1e-6)), abs=1e-5)


def test_a_turn_without_a_parsable_call_gets_one_error_and_bad_calls_beside_good_ones_are_dropped(
        tokenizer, trustee_checkout):
    broken = '<tool_call>\n{"name": "get_weather", "arguments": {oops}\n</tool_call>'
    with StubSimulator() as stub:
        _, (out,) = _run(tokenizer, stub, [broken, CALL + "\n" + broken], trustee_checkout, **_limits(100))
    episode = out.extra_fields["episode"]
    tool_messages = [m for m in episode.transcript if m["role"] == "tool"]
    assert tool_messages[0]["content"] == "Error: Tool call is malformed or could not be parsed"
    assert tool_messages[0]["is_error"] is True
    assert episode.tool_rewards[0] == -1.0 and len(stub.requests["tool"]) >= 1
    assert all(r["call"]["function"]["name"] == "get_weather" for r in stub.requests["tool"])


def test_trustees_middle_cut_keeps_half_the_limit_from_each_end():
    text = "a" * 300 + "b" * 300
    assert truncate_middle_trustee(text, 512) == "a" * 256 + "...(truncated)..." + "b" * 256
    assert truncate_middle_trustee("short", 512) == "short"


@pytest.mark.parametrize("trustee", [True, False], ids=["trustee", "toolcanary"])
def test_a_task_whose_prompt_exceeds_the_budget_is_dropped_before_any_generation(tokenizer, trustee_checkout,
                                                                                 trustee):
    options = {"mode": "trustee", "trustee_dir": str(trustee_checkout)} if trustee else {}
    with StubSimulator() as stub:
        client = ReplayClient(tokenizer, [CALL])
        with EpisodeRunner(tokenizer, client, simulator_url=stub.url, prompt_length=64, response_length=256,
                           loop_options={"http_retries": 1, **options}) as runner:
            (out,) = runner.run_step([make_spec("long")])
    episode = out.extra_fields["episode"]
    assert (episode.abort_role, episode.abort_cause) == ("task", "too_large")
    assert "64-token prompt budget" in episode.abort_detail and len(out.prompt_ids) == 64
    assert client.emitted == [] and stub.requests["verify"] == [] and sum(out.response_mask) == 0


def test_the_loop_refuses_a_missing_checkout_by_name(tokenizer, tmp_path):
    with StubSimulator() as stub, pytest.raises(ContractError, match="no folder at"):
        _run(tokenizer, stub, [CALL], tmp_path / "absent")


def test_the_number_of_tools_gets_its_own_soft_curriculum_coin_in_the_trustee_mode():
    class Coins(random.Random):
        """random() answers from a list (0.9: no soft draw, 0.1: soft draw); randint() gives the top value."""

        def __init__(self, coins: list[float]) -> None:
            super().__init__(0)
            self.coins = list(coins)

        def random(self) -> float:
            return self.coins.pop(0)

        def randint(self, a: int, b: int) -> int:
            return b

    at, top = derive(1), derive(100)
    # First coin: the author's aspects (not soft); second: the number of tools (soft), as TRUSTEE draws twice.
    theirs = Curriculum(level=1, epsilon=0.5, mode="trustee").draw(Coins([0.9, 0.1, 0.9]))
    assert theirs.num_tools == top.num_tools and theirs.expected_calls == at.expected_calls
    ours = Curriculum(level=1, epsilon=0.5).draw(Coins([0.9, 0.9]))
    assert ours.num_tools == at.num_tools and ours.expected_calls == at.expected_calls


def test_validation_rows_get_trustees_generic_prompt_and_fixed_caps_in_the_trustee_mode():
    rows = [{**spec.model_dump(mode="json")} for spec in validation_specs("run-0123456789abcdef", 2)]
    theirs = validation_rows(rows, step=50, mode="trustee")
    ours = validation_rows(rows, step=50)
    assert all((r["system_prompt_level"], r["max_user_turns"], r["max_assistant_turns"], r["max_tool_turns"])
               == (3, 3, 6, 3) for r in theirs)
    assert [(r["system_prompt_level"], r["max_assistant_turns"]) for r in ours] == \
        [(row["system_prompt_level"], row["max_assistant_turns"]) for row in rows]
