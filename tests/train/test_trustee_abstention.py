"""The trainer's trustee mode on abstention tasks, which the curriculum asks for when no_call_fraction > 0 (the
abstention ablation, recipes/trustee-qwen3-4b-abstain): TRUSTEE's no-call penalty (-1) applies to a task that
expects a call, never to one whose right answer is to decline; there the verifier's reward stands.

Against the stub simulator of sim_stub.py, whose verifier answers a fixed reward, so the penalty alone can
change the score.
Run: .venvs/train/bin/python -m pytest tests/train/test_trustee_abstention.py -q
"""

from __future__ import annotations

import pytest
from conftest import ReplayClient, make_spec, run_episodes
from sim_stub import StubBehaviour, StubSimulator

from toolcanary.contract.hermes import render_tool_call

CALL = render_tool_call("get_weather", {"city": "Paris"})
DECLINE = "None of my tools can do that, sorry."


def _episode(tokenizer, checkout, texts, *, call_expected: bool, verify_reward: int):
    with StubSimulator(StubBehaviour(verify_reward=verify_reward)) as stub:
        (out,) = run_episodes(tokenizer, ReplayClient(tokenizer, texts), stub.url,
                              [make_spec("k", call_expected=call_expected)], response_length=2048,
                              mode="trustee", trustee_dir=str(checkout))
        assert stub.requests["task"][0]["difficulty"]["call_expected"] is call_expected
        assert len(stub.requests["verify"]) == 1
    return out, out.extra_fields["episode"]


def test_a_declined_abstention_task_gets_the_verifiers_reward_without_the_no_call_penalty(tokenizer,
                                                                                        trustee_checkout):
    out, episode = _episode(tokenizer, trustee_checkout, [DECLINE], call_expected=False, verify_reward=1)
    assert episode.tool_call_turns == 0 and episode.call_expected is False
    assert episode.no_call_penalty is False and out.reward_score == 1.0 and episode.verifier_reward == 1


def test_a_call_task_without_a_call_still_gets_trustees_penalty(tokenizer, trustee_checkout):
    out, episode = _episode(tokenizer, trustee_checkout, [DECLINE], call_expected=True, verify_reward=1)
    assert episode.tool_call_turns == 0 and episode.call_expected is True
    assert episode.no_call_penalty is True and out.reward_score == -1.0


@pytest.mark.parametrize("call_expected", [True, False])
def test_an_episode_with_a_call_gets_the_verifiers_reward_whatever_the_task(tokenizer, trustee_checkout,
                                                                            call_expected):
    out, episode = _episode(tokenizer, trustee_checkout, [CALL, DECLINE], call_expected=call_expected,
                            verify_reward=-1)
    assert episode.tool_call_turns >= 1 and episode.no_call_penalty is False and out.reward_score == -1.0
