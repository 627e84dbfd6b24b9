"""GRPO with verl's own math: the advantage estimator both trainers use, and one update on CPU.

`grpo_advantage` is verl's group-normalised outcome advantage with aborted episodes (an all-zero response
mask: the simulator failed them, the policy did not) each in a group of its own, so an abort adds nothing
to the loss and leaves its task group's mean and standard deviation as they would be without it, as
TRUSTEE's tgrpo estimator does. It is registered with verl as `toolcanary_grpo` (the GPU recipe's
`algorithm.adv_estimator`); the CPU update below calls the same function. The rest of the CPU update is
verl's too: clipped policy loss, low-variance KL to a frozen reference, and verl's loss aggregation over the
whole batch: `seq-mean-token-mean` by default (each episode's token mean, averaged over every episode of the
batch, aborted ones counted in the divisor), which is TRUSTEE's weighting (its actor takes a token mean per
micro-batch of one episode and scales it by 1/gradient accumulation); `token-mean` weighs each token alike.

    stats = grpo_update(policy, reference, optimizer, outputs, config=GrpoConfig())
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput
from verl.trainer.ppo.core_algos import (
    agg_loss,
    compute_grpo_outcome_advantage,
    compute_policy_loss_vanilla,
    kl_penalty,
    register_adv_est,
)
from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits_naive, masked_mean

ADVANTAGE_ESTIMATOR = "toolcanary_grpo"


@register_adv_est(ADVANTAGE_ESTIMATOR)
def grpo_advantage(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: np.ndarray,
                   epsilon: float = 1e-6, norm_adv_by_std_in_grpo: bool | None = None, config=None,
                   **_: object) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns) as verl's GRPO computes them, aborted rows out of every group's statistics.

    verl calls it with `config` (the algorithm section, whose `norm_adv_by_std_in_grpo` it follows) and
    `index` (the rows' uids); without either, the advantage is std-normalised, verl's default.
    """
    if norm_adv_by_std_in_grpo is None:
        norm_adv_by_std_in_grpo = bool(getattr(config, "norm_adv_by_std_in_grpo", True))
    aborted = (response_mask.sum(dim=-1) == 0).tolist()
    groups = np.array([f"aborted-{row}" if aborted[row] else str(key) for row, key in enumerate(index)],
                      dtype=object)
    return compute_grpo_outcome_advantage(token_level_rewards, response_mask, groups, epsilon=epsilon,
                                          norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo)


@dataclass(frozen=True)
class GrpoConfig:
    clip_ratio: float = 0.2
    kl_coef: float = 0.001
    kl_type: str = "low_var_kl"
    loss_agg_mode: str = "seq-mean-token-mean"
    max_grad_norm: float = 1.0


@dataclass
class Batch:
    sequences: list[list[int]]
    prompt_lengths: list[int]
    response_mask: torch.Tensor
    token_rewards: torch.Tensor
    index: np.ndarray


def build_batch(outputs: list[AgentLoopOutput]) -> Batch:
    """Right-padded response masks with each episode's reward on its last response token, plus task keys."""
    width = max(max(len(o.response_ids) for o in outputs), 1)
    mask = torch.zeros((len(outputs), width), dtype=torch.float32)
    rewards = torch.zeros_like(mask)
    index = []
    for row, out in enumerate(outputs):
        length = len(out.response_ids)
        mask[row, :length] = torch.tensor(out.response_mask, dtype=torch.float32)
        episode = out.extra_fields["episode"]
        if length and episode["outcome"] != "aborted":
            rewards[row, length - 1] = float(out.reward_score or 0.0)
        index.append(episode["task_key"])
    return Batch([list(o.prompt_ids) + list(o.response_ids) for o in outputs], [len(o.prompt_ids) for o in outputs],
                 mask, rewards, np.array(index, dtype=object))


def sequence_logprobs(model, sequence: list[int], prompt_length: int, width: int, with_entropy: bool = False):
    """Log-probabilities (and entropies) of one sequence's response tokens, right-padded to `width`.

    One sequence per forward: without padding, attention needs no mask and stays cheap on CPU. Logits are
    computed only for the positions that predict a response token: the prompt's would be thrown away, and the
    output layer over a 49k vocabulary is a fifth of a small model's work per position.
    """
    ids = torch.tensor([sequence])
    predicting = len(sequence) - prompt_length
    logits = model(input_ids=ids, use_cache=False, logits_to_keep=predicting + 1).logits[0, :-1].float()
    response = ids[0, prompt_length:]
    logprobs = logprobs_from_logits_naive(logits, response)
    pad = width - response.shape[0]
    logprobs = torch.nn.functional.pad(logprobs, (0, pad))
    if not with_entropy:
        return logprobs, None
    return logprobs, torch.nn.functional.pad(entropy_from_logits(logits), (0, pad))


def update_thread_count(threads: int) -> int:
    """`threads`, or with 0 every core this process may run on."""
    if threads > 0:
        return threads
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def grpo_update(policy, reference, optimizer, outputs: list[AgentLoopOutput], *, config: GrpoConfig,
                threads: int | None = None) -> dict[str, float]:
    """One optimizer step on the episodes of a step; returns loss, kl, entropy, grad norm and clip stats.

    `threads` sets torch's CPU threads for this update and restores the caller's afterwards (None: as they are).
    """
    if threads is None or threads == torch.get_num_threads():
        return _update(policy, reference, optimizer, outputs, config)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return _update(policy, reference, optimizer, outputs, config)
    finally:
        torch.set_num_threads(before)


def _update(policy, reference, optimizer, outputs: list[AgentLoopOutput], config: GrpoConfig) -> dict[str, float]:
    batch = build_batch(outputs)
    advantages, _ = grpo_advantage(batch.token_rewards, batch.response_mask, batch.index)
    tokens = float(batch.response_mask.sum())
    if tokens == 0:
        return {"loss": float("nan"), "kl": float("nan"), "entropy": float("nan"), "grad_norm": 0.0,
                "trained_tokens": 0.0, "updated": 0.0}
    width = batch.response_mask.shape[1]
    loss_config = OmegaConf.create({"clip_ratio": config.clip_ratio, "clip_ratio_low": config.clip_ratio,
                                    "clip_ratio_high": config.clip_ratio, "clip_ratio_c": 3.0,
                                    "global_batch_info": {"batch_num_tokens": tokens, "dp_size": 1,
                                                          "global_batch_size": len(outputs)}})
    policy.train()
    optimizer.zero_grad(set_to_none=True)
    totals = {"loss": 0.0, "pg_loss": 0.0, "kl": 0.0, "entropy": 0.0, "pg_clipfrac": 0.0}
    for row, (sequence, prompt_length) in enumerate(zip(batch.sequences, batch.prompt_lengths, strict=True)):
        mask = batch.response_mask[row: row + 1]
        if mask.sum() == 0:
            continue  # aborted or empty: nothing of it is trained
        with torch.no_grad():
            ref, _ = sequence_logprobs(reference, sequence, prompt_length, width)
        new, entropy = sequence_logprobs(policy, sequence, prompt_length, width, with_entropy=True)
        # One update per step, on the weights that generated the step: the "old" log-probabilities verl would
        # recompute are these very numbers, so they are taken from this forward instead of a second one.
        old = new.detach()
        new, old, ref, entropy = new[None], old[None], ref[None], entropy[None]
        pg_loss, pg_metrics = compute_policy_loss_vanilla(old, new, advantages[row: row + 1], mask,
                                                          config.loss_agg_mode, loss_config)
        kl_loss = agg_loss(kl_penalty(new, ref, config.kl_type), mask, config.loss_agg_mode,
                           batch_num_tokens=tokens, global_batch_size=len(outputs))
        loss = pg_loss + config.kl_coef * kl_loss
        loss.backward()
        share = float(mask.sum()) / tokens
        totals["loss"] += float(loss.detach())
        totals["pg_loss"] += float(pg_loss.detach())
        totals["kl"] += float(kl_loss.detach())
        totals["entropy"] += float(masked_mean(entropy.detach(), mask)) * share
        totals["pg_clipfrac"] += pg_metrics["actor/pg_clipfrac"] * share
    grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm)
    optimizer.step()
    return {**totals, "grad_norm": float(grad_norm), "trained_tokens": tokens, "updated": 1.0,
            "advantage_abs_mean": float(masked_mean(advantages.abs(), batch.response_mask))}
