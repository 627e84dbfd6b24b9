"""GRPO with verl's own math: the advantage estimator both trainers use, and the update of a step on CPU.

`grpo_advantage` is verl's group-normalised outcome advantage with aborted episodes (an all-zero response
mask: the simulator failed them, the policy did not) each in a group of its own, so an abort adds nothing
to the loss and leaves its task group's mean and standard deviation as they would be without it, as
TRUSTEE's tgrpo estimator does. It is registered with verl as `toolcanary_grpo` (the GPU recipe's
`algorithm.adv_estimator`); the CPU update below calls the same function. The rest of the CPU update is
verl's too: clipped policy loss, low-variance KL to a frozen reference, and verl's loss aggregation over a
mini-batch: `seq-mean-token-mean` by default (each episode's token mean, averaged over every episode of the
mini-batch, aborted ones counted in the divisor), which is TRUSTEE's weighting (its actor takes a token mean
per micro-batch of one episode and scales it by 1/gradient accumulation); `token-mean` weighs each token alike.

The update is verl's actor loop: the step's episodes are split into mini-batches of `ppo_mini_batch_size`
tasks (whole GRPO groups), and `ppo_epochs` times over them one optimizer step per mini-batch. The "old"
log-probabilities are those of the weights that sampled the step, taken once before the first optimizer step,
so from the second optimizer step on the ratio moves away from 1 and `clip_ratio` clips. With one mini-batch
and one epoch the ratio stays 1 and the loss is the plain policy gradient.

    stats = grpo_update(policy, reference, optimizer, outputs, config=GrpoConfig(ppo_mini_batch_size=1))
    stats.pg_clipfrac
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from statistics import fmean
from typing import TYPE_CHECKING

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

from toolcanary.contract.training_files import EpisodeRecord
from toolcanary.train.step_metrics import UpdateStats

if TYPE_CHECKING:
    from toolcanary.train.settings import TrainSettings

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
    ppo_epochs: int = 1
    # Tasks (whole GRPO groups) per optimizer step; 0: the whole step in one.
    ppo_mini_batch_size: int = 0

    @classmethod
    def of(cls, settings: TrainSettings) -> GrpoConfig:
        return cls(clip_ratio=settings.clip_ratio, kl_coef=settings.kl_coef, kl_type=settings.kl_type,
                   loss_agg_mode=settings.loss_agg_mode, ppo_epochs=settings.ppo_epochs,
                   ppo_mini_batch_size=settings.ppo_mini_batch_size)


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
        episode: EpisodeRecord = out.extra_fields["episode"]
        if length and episode.outcome != "aborted":
            rewards[row, length - 1] = float(out.reward_score or 0.0)
        index.append(episode.task_key)
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


def mini_batches(index: np.ndarray, tasks_per_mini_batch: int) -> list[list[int]]:
    """Row numbers of each mini-batch: `tasks_per_mini_batch` whole task groups each, in the order the tasks
    first appear (verl splits its batch in order, and a GRPO group never straddles two mini-batches); 0: one."""
    groups: dict[str, list[int]] = {}
    for row, key in enumerate(index):
        groups.setdefault(str(key), []).append(row)
    members = list(groups.values())
    size = tasks_per_mini_batch if tasks_per_mini_batch > 0 else len(members)
    return [[row for group in members[start: start + size] for row in group] for start in range(0, len(members), size)]


def grpo_update(policy, reference, optimizer, outputs: list[AgentLoopOutput], *, config: GrpoConfig,
                threads: int | None = None) -> UpdateStats:
    """The optimizer steps of one training step on its episodes; returns their statistics (`UpdateStats`).

    `threads` sets torch's CPU threads for this update and restores the caller's afterwards (None: as they are).
    """
    if config.ppo_epochs < 1 or config.ppo_mini_batch_size < 0:
        raise ValueError(f"GrpoConfig: expected ppo_epochs >= 1 and ppo_mini_batch_size >= 0, got "
                         f"{config.ppo_epochs} and {config.ppo_mini_batch_size}; fix the trainer's settings")
    if threads is None or threads == torch.get_num_threads():
        return _update(policy, reference, optimizer, outputs, config)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return _update(policy, reference, optimizer, outputs, config)
    finally:
        torch.set_num_threads(before)


def _update(policy, reference, optimizer, outputs: list[AgentLoopOutput], config: GrpoConfig) -> UpdateStats:
    batch = build_batch(outputs)
    advantages, _ = grpo_advantage(batch.token_rewards, batch.response_mask, batch.index)
    if float(batch.response_mask.sum()) == 0:
        return UpdateStats()  # aborted or empty episodes only: nothing is trained, nothing measured
    width = batch.response_mask.shape[1]
    splits = mini_batches(batch.index, config.ppo_mini_batch_size)
    policy.train()
    with torch.no_grad():
        ref = {row: sequence_logprobs(reference, batch.sequences[row], batch.prompt_lengths[row], width)[0]
               for split in splits for row in split if batch.response_mask[row].sum() > 0}
        # The old log-probabilities of rows the first optimizer step does not train; those of the first
        # mini-batch are its own forward's, before that step, so they cost no second forward.
        old = {row: sequence_logprobs(policy, batch.sequences[row], batch.prompt_lengths[row], width)[0]
               for split in splits[1:] for row in split if row in ref}
    updates = [_optimizer_step(policy, optimizer, batch, advantages, rows, ref, old, config)
               for _ in range(config.ppo_epochs) for rows in splits]
    updates = [u for u in updates if u is not None]
    # Means over the optimizer steps of the step, as verl reduces its actor metrics.
    return UpdateStats(**{name: fmean(u[name] for u in updates) for name in updates[0]},
                       advantage_abs_mean=float(masked_mean(advantages.abs(), batch.response_mask)))


def _optimizer_step(policy, optimizer, batch: Batch, advantages: torch.Tensor, rows: list[int],
                    ref: dict[int, torch.Tensor], old: dict[int, torch.Tensor], config: GrpoConfig) -> dict | None:
    """One optimizer step on the episodes `rows`; None (no step) when none of them has a trained token."""
    tokens = float(batch.response_mask[rows].sum())
    if tokens == 0:
        return None
    width = batch.response_mask.shape[1]
    loss_config = OmegaConf.create({"clip_ratio": config.clip_ratio, "clip_ratio_low": config.clip_ratio,
                                    "clip_ratio_high": config.clip_ratio, "clip_ratio_c": 3.0,
                                    "global_batch_info": {"batch_num_tokens": tokens, "dp_size": 1,
                                                          "global_batch_size": len(rows)}})
    optimizer.zero_grad(set_to_none=True)
    totals = {"pg_loss": 0.0, "kl": 0.0, "entropy": 0.0, "pg_clipfrac": 0.0}
    for row in rows:
        if row not in ref:
            continue  # aborted or empty: nothing of it is trained (it still counts in the divisor)
        mask = batch.response_mask[row: row + 1]
        new, entropy = sequence_logprobs(policy, batch.sequences[row], batch.prompt_lengths[row], width,
                                         with_entropy=True)
        if row not in old:  # the first optimizer step: these weights sampled the step
            old[row] = new.detach()
        pg_loss, pg_metrics = compute_policy_loss_vanilla(old[row][None], new[None], advantages[row: row + 1], mask,
                                                          config.loss_agg_mode, loss_config)
        kl_loss = agg_loss(kl_penalty(new[None], ref[row][None], config.kl_type), mask, config.loss_agg_mode,
                           batch_num_tokens=tokens, global_batch_size=len(rows))
        (pg_loss + config.kl_coef * kl_loss).backward()
        share = float(mask.sum()) / tokens
        totals["pg_loss"] += float(pg_loss.detach())
        totals["kl"] += float(kl_loss.detach())
        totals["entropy"] += float(masked_mean(entropy.detach()[None], mask)) * share
        totals["pg_clipfrac"] += pg_metrics["actor/pg_clipfrac"] * share
    grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm)
    optimizer.step()
    return {**totals, "grad_norm": float(grad_norm)}
