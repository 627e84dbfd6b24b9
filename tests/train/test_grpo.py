"""The CPU GRPO update: group-normalised advantages, aborted episodes out of the loss and the group
statistics, an update that moves the policy towards rewarded responses, and mini-batches and epochs whose
later optimizer steps see a ratio that moved and clip it, each checked against the formulas written out.

Run: .venvs/train/bin/python -m pytest tests/train/test_grpo.py -q
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput

from toolcanary.contract.training_files import EpisodeRecord
from toolcanary.train.cpu.tiny_policy import load_policy
from toolcanary.train.grpo import (
    GrpoConfig,
    build_batch,
    grpo_advantage,
    grpo_update,
    mini_batches,
    sequence_logprobs,
)

PROMPT = [11, 12, 13, 14]


def _output(key: str, response: list[int], reward: float, aborted: bool = False, mask=None) -> AgentLoopOutput:
    mask = [0] * len(response) if aborted else (mask or [1] * len(response))
    return AgentLoopOutput(prompt_ids=PROMPT, response_ids=response, response_mask=mask,
                           reward_score=0.0 if aborted else reward, metrics=AgentLoopMetrics(),
                           extra_fields={"episode": EpisodeRecord(step=1, episode_id=f"{key}-{response}", task_key=key,
                                                                  outcome="aborted" if aborted else "ok")})


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
    assert after[0] > before[0] and after[1] < before[1]
    assert stats.kl == pytest.approx(0.0, abs=1e-6)  # policy == reference before the step
    assert stats.entropy > 0 and stats.grad_norm > 0 and stats.advantage_abs_mean == pytest.approx(1 / math.sqrt(2), rel=1e-4)
    assert stats.pg_clipfrac == 0.0  # one optimizer step: the ratio is 1


def test_only_aborted_episodes_change_nothing(tiny_dir):
    policy, _ = load_policy(tiny_dir)
    reference = copy.deepcopy(policy).eval()
    weights = copy.deepcopy(policy.state_dict())
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-2)
    stats = grpo_update(policy, reference, optimizer, [_output("g", [1, 2], 0.0, aborted=True)] * 2,
                        config=GrpoConfig())
    assert math.isnan(stats.pg_loss) and math.isnan(stats.grad_norm)  # not measured: nothing was trained
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


def _independent_objective(policy, reference, outputs, config: GrpoConfig, old_policy=None):
    """The same objective written from the formulas, one padded batch with full logits, no verl.

    The ratio is to `old_policy` (None: on-policy, the old log-probabilities are the policy's own); returns the
    loss, the share of trained tokens whose ratio the clip cut, and the ratios of the trained tokens.
    """
    rows = [o for o in outputs if sum(o.response_mask)]
    rewards = {}
    for o in rows:
        rewards.setdefault(o.extra_fields["episode"].task_key, []).append(float(o.reward_score))
    width = max(len(o.prompt_ids) + len(o.response_ids) for o in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    attention, trained = torch.zeros_like(ids), torch.zeros((len(rows), width - 1))
    advantages = torch.zeros((len(rows), 1))
    for row, o in enumerate(rows):
        sequence = list(o.prompt_ids) + list(o.response_ids)
        ids[row, : len(sequence)], attention[row, : len(sequence)] = torch.tensor(sequence), 1
        start = len(o.prompt_ids) - 1  # the position that predicts the first response token
        trained[row, start: start + len(o.response_ids)] = torch.tensor(o.response_mask, dtype=torch.float32)
        group = torch.tensor(rewards[o.extra_fields["episode"].task_key])
        advantages[row] = (float(o.reward_score) - group.mean()) / (group.std() + 1e-6)
    targets = ids[:, 1:, None]

    def logprobs(model):
        return model(input_ids=ids, attention_mask=attention).logits[:, :-1].log_softmax(-1).gather(-1, targets)[..., 0]

    with torch.no_grad():
        ref = logprobs(reference)
        old = logprobs(old_policy) if old_policy is not None else None
    new = logprobs(policy)
    old = new.detach() if old is None else old
    ratio = torch.exp((new - old).clamp(-20, 20))
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1 - config.clip_ratio, 1 + config.clip_ratio)
    pg = torch.maximum(unclipped, clipped)
    pg = torch.where(advantages < 0, torch.minimum(-advantages * 3.0, pg), pg)  # dual clip, c = 3
    clipfrac = float(((clipped > unclipped).float() * trained).sum() / trained.sum())
    log_ratio = (ref - new).clamp(-20, 20)
    kl = (torch.exp(log_ratio) - log_ratio - 1).clamp(-10, 10)
    per_token = (pg + config.kl_coef * kl) * trained
    if config.loss_agg_mode == "token-mean":
        loss = per_token.sum() / trained.sum()
    else:  # each episode's token mean, over every episode of the batch (the aborted ones count in the divisor)
        loss = (per_token.sum(-1) / trained.sum(-1)).sum() / len(outputs)
    return loss, clipfrac, ratio[trained.bool()].detach()


def _independent_loss(policy, reference, outputs, config: GrpoConfig) -> torch.Tensor:
    return _independent_objective(policy, reference, outputs, config)[0]


def _shifted(model, scale: float = 0.02):
    """`model` with every weight moved a fixed random step, so that it differs from `model`."""
    with torch.no_grad():
        for weight in model.parameters():
            weight.add_(scale * torch.randn(weight.shape, generator=torch.Generator().manual_seed(weight.numel())))
    return model


@pytest.mark.parametrize(("threads", "mode"), [(1, "seq-mean-token-mean"), (2, "seq-mean-token-mean"),
                                               (1, "token-mean")])
def test_the_update_matches_an_independent_computation_of_loss_and_gradients(tiny_dir, threads, mode):
    # Any speed-up of grpo_update (fewer logits, no recompute, threads) must leave the objective as it was.
    policy, _ = load_policy(tiny_dir)
    reference = copy.deepcopy(policy).eval()
    _shifted(reference)  # a reference that differs from the policy, so the KL term has a gradient
    config = GrpoConfig(max_grad_norm=1e9, loss_agg_mode=mode)
    outputs = BATCH
    loss = _independent_loss(policy, reference, outputs, config)
    loss.backward()
    expected, expected_loss = [p.grad.clone() for p in policy.parameters()], float(loss.detach())
    assert sum(float(g.abs().sum()) for g in expected) > 0
    before = torch.get_num_threads()
    stats = grpo_update(policy, reference, torch.optim.SGD(policy.parameters(), lr=0.0), outputs, config=config,
                        threads=threads)
    assert torch.get_num_threads() == before  # the caller's threads are restored
    assert stats.pg_loss + config.kl_coef * stats.kl == pytest.approx(expected_loss, rel=1e-4, abs=1e-6)
    for got, want in zip((p.grad for p in policy.parameters()), expected, strict=True):
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-7)


BATCH = [_output("g0", [40, 41, 42, 43], 1.0, mask=[1, 1, 0, 1]), _output("g0", [50, 51], -1.0),
         _output("g0", [52, 53, 54], 0.5), _output("g1", [60, 61, 62], 1.0), _output("g1", [63], 0.0),
         _output("g1", [64, 65], 0.0, aborted=True)]
# SGD with a large step, so that one optimizer step moves some ratios past the clip range of 0.2.
LR = 5.0


def _grads(model) -> list[torch.Tensor]:
    return [p.grad.clone() for p in model.parameters()]


def test_a_second_epoch_sees_the_ratio_move_and_clips_it_as_the_formulas_do(tiny_dir):
    policy, _ = load_policy(tiny_dir)
    reference = _shifted(copy.deepcopy(policy).eval())
    sampler = copy.deepcopy(policy).eval()  # the weights that sampled the step: the old policy
    mirror = copy.deepcopy(policy)
    config = GrpoConfig(max_grad_norm=1e9, ppo_epochs=2)
    stats = grpo_update(policy, reference, torch.optim.SGD(policy.parameters(), lr=LR), BATCH, config=config)
    second_grads = _grads(policy)  # the last optimizer step's

    optimizer = torch.optim.SGD(mirror.parameters(), lr=LR)
    first, first_clipfrac, first_ratio = _independent_objective(mirror, reference, BATCH, config, old_policy=sampler)
    assert first_clipfrac == 0.0 and torch.equal(first_ratio, torch.ones_like(first_ratio))
    first.backward()
    optimizer.step()
    optimizer.zero_grad()
    second, clipfrac, ratio = _independent_objective(mirror, reference, BATCH, config, old_policy=sampler)
    second.backward()
    assert (ratio - 1).abs().max() > config.clip_ratio and 0 < clipfrac < 1
    assert stats.pg_clipfrac == pytest.approx(clipfrac / 2, rel=1e-3)  # the mean over the two optimizer steps
    for got, want in zip(second_grads, _grads(mirror), strict=True):
        assert torch.allclose(got, want, rtol=1e-3, atol=1e-6)


def test_mini_batches_take_whole_task_groups_and_the_later_ones_clip(tiny_dir):
    assert mini_batches(build_batch(BATCH).index, 1) == [[0, 1, 2], [3, 4, 5]]
    assert mini_batches(build_batch(BATCH).index, 0) == mini_batches(build_batch(BATCH).index, 2) == [list(range(6))]
    policy, _ = load_policy(tiny_dir)
    reference = _shifted(copy.deepcopy(policy).eval())
    sampler, mirror = copy.deepcopy(policy).eval(), copy.deepcopy(policy)
    config = GrpoConfig(max_grad_norm=1e9, ppo_mini_batch_size=1)
    stats = grpo_update(policy, reference, torch.optim.SGD(policy.parameters(), lr=LR), BATCH, config=config)

    # g0's optimizer step, then g1's, whose old log-probabilities are the sampler's, taken before g0's step.
    optimizer = torch.optim.SGD(mirror.parameters(), lr=LR)
    first, first_clipfrac, _ = _independent_objective(mirror, reference, BATCH[:3], config, old_policy=sampler)
    first.backward()
    optimizer.step()
    optimizer.zero_grad()
    second, clipfrac, ratio = _independent_objective(mirror, reference, BATCH[3:], config, old_policy=sampler)
    second.backward()
    assert first_clipfrac == 0.0 and (ratio - 1).abs().max() > 0
    assert stats.pg_clipfrac == pytest.approx(clipfrac / 2, rel=1e-3, abs=1e-9)
    for got, want in zip(_grads(policy), _grads(mirror), strict=True):
        assert torch.allclose(got, want, rtol=1e-3, atol=1e-6)


def test_verl_seq_mean_token_mean_is_trustees_weighting():
    # TRUSTEE's verl 0.7 actor, as read: on each of D ranks, every micro-batch of one episode contributes its
    # token mean times 1/g (g micro-batches per rank), and FSDP averages the ranks. verl 0.9.1's
    # seq-mean-token-mean over the same mini-batch of B = D x g episodes, one micro-batch per episode, must give
    # the same total (an aborted episode, all masked, counts in B for both).
    from verl.trainer.ppo.core_algos import agg_loss

    generator = torch.Generator().manual_seed(3)
    ranks, per_rank, width = 2, 4, 12
    losses = torch.randn(ranks * per_rank, width, generator=generator)
    mask = (torch.rand(ranks * per_rank, width, generator=generator) < 0.6).float()
    mask[5] = 0.0
    trustee, verl = [], []
    for rank in range(ranks):
        rows = range(rank * per_rank, (rank + 1) * per_rank)
        trustee.append(sum(float((losses[r] * mask[r]).sum() / mask[r].sum()) / per_rank for r in rows
                           if mask[r].sum()))
        verl.append(sum(float(agg_loss(losses[r:r + 1], mask[r:r + 1], "seq-mean-token-mean", dp_size=ranks,
                                       global_batch_size=ranks * per_rank)) for r in rows))
    assert sum(verl) / ranks == pytest.approx(sum(trustee) / ranks, rel=1e-6)
    token_mean = sum(float(agg_loss(losses[r:r + 1], mask[r:r + 1], "token-mean", dp_size=ranks,
                                    batch_num_tokens=float(mask.sum()))) for r in range(ranks * per_rank)) / ranks
    assert token_mean != pytest.approx(sum(trustee) / ranks, rel=1e-3)  # verl 0.9.1's token-mean is not it
