"""Simulator failures become aborted episodes (recorded, masked out), never crashes or invented rewards.

Uses the programmable stub, since the scripted simulator does not fail on demand.
Run: .venvs/train/bin/python -m pytest tests/train/test_simulator_failures.py -q
"""

from __future__ import annotations

import asyncio
import time

import pytest
from conftest import ReplayClient, make_spec, run_episodes
from sim_stub import StubBehaviour, StubSimulator

from toolcanary.contract.hermes import render_tool_call
from toolcanary.contract.simulator_api import VerifyRequest
from toolcanary.train.simulator_client import RoleTimeouts, SimulatorClient

CALL = render_tool_call("get_weather", {"city": "Paris"})


def _run(tokenizer, behaviour: StubBehaviour, texts=(CALL, "Sunny."), **options):
    with StubSimulator(behaviour) as sim:
        out = run_episodes(tokenizer, ReplayClient(tokenizer, list(texts)), sim.url, [make_spec("fail-1")],
                           **options)[0]
        return out, sim.requests


@pytest.mark.parametrize("role", ["task", "tool", "user", "verify"])
def test_an_aborted_role_aborts_the_episode_and_zeroes_its_mask(tokenizer, role):
    texts = ("Which city?", "ok") if role == "user" else (CALL, "Sunny.")
    out, _ = _run(tokenizer, StubBehaviour(fail={role: "aborted"}, user_replies=["Paris"]), texts)
    episode = out.extra_fields["episode"]
    assert episode.outcome == "aborted" and episode.abort_role == role
    assert episode.abort_cause == "timeout" and episode.stop_reason == "aborted"
    assert out.reward_score == 0.0 and episode.verifier_reward is None
    assert len(out.response_mask) >= 1 and not any(out.response_mask)


def test_http_500_is_retried_then_recorded_as_upstream_abort(tokenizer):
    out, requests = _run(tokenizer, StubBehaviour(fail={"verify": "http500"}))
    episode = out.extra_fields["episode"]
    assert len(requests["verify"]) == 2  # the first try and http_retries=1
    assert episode.abort_role == "verify" and episode.abort_cause == "upstream"
    assert "HTTP 500" in episode.abort_detail


def test_a_hanging_role_hits_its_own_timeout(tokenizer):
    started = time.monotonic()
    out, requests = _run(tokenizer, StubBehaviour(fail={"tool": "hang"}),
                         timeouts={"tool": 0.5}, http_retries=0)
    assert time.monotonic() - started < 20
    episode = out.extra_fields["episode"]
    assert episode.abort_role == "tool" and episode.abort_cause == "timeout"
    assert "0.5 s" in episode.abort_detail and len(requests["tool"]) == 1


def test_unreachable_simulator_is_an_abort_not_an_exception(tokenizer):
    out = run_episodes(tokenizer, ReplayClient(tokenizer, [CALL]), "http://127.0.0.1:9", [make_spec("down-1")],
                       http_retries=0)[0]
    assert out.extra_fields["episode"].abort_role == "task"
    assert out.extra_fields["episode"].abort_cause == "upstream"


def test_a_wrong_answer_shape_is_a_parse_abort(tokenizer):
    async def call(url):
        async with SimulatorClient(url, RoleTimeouts(verify=5), retries=0) as client:
            return await client.verify(VerifyRequest(task_key="k", trajectory=[], num_criteria=2))

    with StubSimulator() as sim:
        sim.tasks["k"] = {"call_expected": True}  # as if /v1/task had answered it
        sim._verify = lambda body: {"reward": 7}  # not in {-1, 0, 1}
        answer = asyncio.run(call(sim.url))
    assert answer.outcome == "aborted" and answer.abort_cause in {"parse", "validation"}


def test_parallel_calls_reach_the_simulator_concurrently(tokenizer):
    two = CALL + "\n" + render_tool_call("get_time", {"city": "Paris"})
    behaviour = StubBehaviour(delay_s=0.6)
    with StubSimulator(behaviour) as sim:
        spec = make_spec("par-1", num_tools=2)
        started = time.monotonic()
        out = run_episodes(tokenizer, ReplayClient(tokenizer, [two, "Done."]), sim.url, [spec])[0]
        elapsed = time.monotonic() - started
    episode = out.extra_fields["episode"]
    assert episode.calls == 2 and len([m for m in episode.transcript if m["role"] == "tool"]) == 2
    # task + tools + verify at 0.6 s each: serial tool calls would need >= 2.4 s.
    assert elapsed < 2.3, elapsed
