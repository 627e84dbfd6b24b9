"""The CPU GRPO update: group-normalised advantages, aborted episodes out of the loss and the group
statistics, and an update that moves the policy towards rewarded responses.

Run: .venvs/train/bin/python -m pytest tests/train/test_grpo.py -q
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput

from toolcanary.train.grpo import GrpoConfig, build_batch, grpo_advantage, grpo_update, sequence_logprobs
from toolcanary.train.tiny_policy import load_policy

PROMPT = [11, 12, 13, 14]


def _output(key: str, response: list[int], reward: float, aborted: bool = False, mask=None) -> AgentLoopOutput:
    mask = [0] * len(response) if aborted else (mask or [1] * len(response))
    return AgentLoopOutput(prompt_ids=PROMPT, response_ids=response, response_mask=mask,
                           reward_score=0.0 if aborted else reward, metrics=AgentLoopMetrics(),
                           extra_fields={"episode": {"task_key": key, "outcome": "aborted" if aborted else "ok"}})


def _advantages(outputs):
    batch = build_batch(outputs)
    advantages, _ = grpo_advantage(batch.token_rewards, batch.response_mask, batch.index)
    return batch, advantages


def test_advantages_are_group_normalised_and_ignore_aborted_episodes():
    outputs = [_output("g0", [20, 21, 22], 1.0), _output("g0", [23, 24], -1.0), _output("g0", [25], 0.0),
               _output("g0", [26, 27], 0.0, aborted=True), _output("g1", [30], 1.0), _output("g1", [31, 32], 1.0)]
    batch, advantages = _advantages(outputs)
    rewards = [1.0, -1.0, 0.0]
    mean = sum(rewards) / 3
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / 2)  # unbiased, as torch.std
    for row, reward in enumerate(rewards):
        length = len(outputs[row].response_ids)
        expected = (reward - mean) / (std + 1e-6)
        assert advantages[row, :length].tolist() == pytest.approx([expected] * length, abs=1e-5)
        assert advantages[row, length:].abs().sum() == 0
    assert advantages[3].abs().sum() == 0  # aborted: no advantage, and g0's mean/std exclude it
    assert advantages[4:].abs().sum() == 0  # a group with equal rewards carries no signal
    assert batch.response_mask[3].sum() == 0


def test_an_update_raises_the_rewarded_response_and_lowers_the_punished_one(tiny_dir):
    policy, _ = load_policy(tiny_dir)
    reference = copy.deepcopy(policy).eval()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-2)
    good, bad = [40, 41, 42, 43], [50, 51, 52, 53]
    outputs = [_output("g", good, 1.0), _output("g", bad, -1.0), _output("g", [60, 61], 0.0, aborted=True)]

    def score(response):
        with torch.no_grad():
            return float(sequence_logprobs(policy, PROMPT + response, len(PROMPT), len(response))[0].sum())

    before = score(good), score(bad)
    stats = grpo_update(policy, reference, optimizer, outputs, config=GrpoConfig())
    after = score(good), score(bad)
    assert stats["updated"] == 1.0 and stats["trained_tokens"] == 8.0
    assert after[0] > before[0] and after[1] < before[1]
    assert stats["kl"] == pytest.approx(0.0, abs=1e-6)  # policy == reference before the step
    assert stats["entropy"] > 0


def test_only_aborted_episodes_change_nothing(tiny_dir):
    policy, _ = load_policy(tiny_dir)
    reference = copy.deepcopy(policy).eval()
    weights = copy.deepcopy(policy.state_dict())
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-2)
    stats = grpo_update(policy, reference, optimizer, [_output("g", [1, 2], 0.0, aborted=True)] * 2,
                        config=GrpoConfig())
    assert stats["updated"] == 0.0 and math.isnan(stats["loss"])
    assert all(torch.equal(weights[k], v) for k, v in policy.state_dict().items())


def test_masked_environment_tokens_are_not_trained(tiny_dir):
    policy, _ = load_policy(tiny_dir)
    reference = copy.deepcopy(policy).eval()
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.0)
    # The same trained span with different masked env tokens after it: identical gradients.
    grads = []
    for env in ([70, 71, 72], [80, 81, 82]):
        response = [40, 41] + env
        outputs = [_output("g", response, 1.0, mask=[1, 1, 0, 0, 0]),
                   _output("g", [50, 51] + env, -1.0, mask=[1, 1, 0, 0, 0])]
        grpo_update(policy, reference, optimizer, outputs, config=GrpoConfig(max_grad_norm=1e9))
        grads.append(torch.cat([p.grad.flatten() for p in policy.parameters() if p.grad is not None]))
    assert torch.allclose(grads[0], grads[1], atol=1e-6)
