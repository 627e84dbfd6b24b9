"""The CPU embedded run: GRPO on the tiny policy against the scripted simulator, end to end.

Per step: draw one task setting per GRPO group from the curriculum, run groups x n episodes through the
agent loop with the transformers generation client, apply the GRPO update with verl's core_algos (one optimizer
step per mini-batch of `ppo_mini_batch_size` tasks, `ppo_epochs` times over the step), append
the step's row to `train_metrics.csv` and its episodes to `episodes.jsonl`, move the curriculum, and every
`save_every` steps save the trainer state and publish a checkpoint. A rerun with the same `--run`
resumes from the last saved state. Step 0 (the starting policy, after the warm start) is published too.
`starting_policy` builds that starting policy alone (from the cache when it has it) and can answer held-out
tasks with it (toolcanary.train.cpu.held_out); a later run of the same `--run` starts from it.

Faults (toolcanary.train.faults, the same rules as the GPU hooks): before anything else the simulator is
checked (`preflight.check_simulator`: reachable, same contract version, token accepted, same mode and TRUSTEE
commit, ready) and the run refuses to start otherwise; before every step it waits, at most `simulator_wait_s`,
for a simulator that is down; a step in which the simulator refused the token stops the run before its
update; the circuit breaker stops it after `max_aborted_steps` steps in a row with more than
`max_aborted_frac` aborted. A stop saves the trainer state of the last finished step first, so the rerun with
the same `--run` continues there.

    python -m toolcanary.train cpu --run demo --steps 2 --save-every 1
    python -m toolcanary.train starting-policy --run demo --policy smollm2 --held-out 16
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import random
import time
from pathlib import Path

import torch

from toolcanary.contract.csv_schemas import TRAIN_METRICS, WARM_START, WARM_START_COLUMNS
from toolcanary.contract.training_files import EPISODES_FILE, HELD_OUT_FILE, EpisodeRecord, write_held_out
from toolcanary.train.canary import canary_columns
from toolcanary.train.cpu.embedded_simulator import EmbeddedSimulator
from toolcanary.train.cpu.generation_client import TransformersGenerationClient
from toolcanary.train.cpu.gold_conversations import conversation_mix, gold_conversations, warm_start_requests
from toolcanary.train.cpu.held_out import answer_counts, held_out_answers
from toolcanary.train.cpu.starting_policy_cache import WARM_START_BATCH, recipe_key, restore, store
from toolcanary.train.cpu.tiny_policy import build_base_policy, load_policy
from toolcanary.train.cpu.trainer_state import latest_state, load_state, save_state
from toolcanary.train.cpu.warm_start import encode_conversations, warm_start
from toolcanary.train.curriculum import Curriculum
from toolcanary.train.faults import CircuitBreaker, TrainingStopped, fatal_stop
from toolcanary.train.grpo import GrpoConfig, grpo_update, update_thread_count
from toolcanary.train.publisher import publish_checkpoint, remove_partial
from toolcanary.train.rollout import EpisodeRunner, step_specs
from toolcanary.train.settings import TrainSettings
from toolcanary.train.simulator_check import TrainerRules, check_simulator, wait_ready
from toolcanary.train.step_metrics import (
    append_episodes,
    append_line,
    append_metrics_row,
    drop_steps_after,
    step_row,
)
from toolcanary.train.task_keys import task_key_prefix

logger = logging.getLogger(__name__)


def _starting_policy(settings: TrainSettings, simulator_url: str, progress: bool):
    """(model, tokenizer, base model name): the reference folder if it exists, else built and warm-started."""
    state_dir = settings.run_state()
    reference = state_dir / "reference"
    if (reference / "config.json").exists():
        model, tokenizer = load_policy(reference)
        return model, tokenizer, (reference / "BASE_MODEL").read_text().strip()
    base_name, folder = build_base_policy(settings.policy, state_dir / "base_policy", seed=settings.policy_seed)
    model, tokenizer = load_policy(folder)
    cache, entry = settings.starting_policy_cache if settings.warm_start else None, None
    if settings.warm_start:
        torch.manual_seed(settings.policy_seed)
        # Runs that share a cache ask for the same gold tasks: the cache folder's tag, not the run's.
        prefix = task_key_prefix(cache, "cache") if cache else task_key_prefix(state_dir, settings.run)
        requests = warm_start_requests(key_prefix=prefix, seed=settings.policy_seed, count=settings.warm_start_tasks,
                                       task_pool=settings.task_pool, max_tools=settings.max_tools,
                                       epsilon=settings.epsilon,
                                       no_call_fraction=settings.warm_start_no_call_fraction)
        conversations = asyncio.run(gold_conversations(simulator_url, requests, seed=settings.policy_seed))
        logger.info("warm start on %d gold conversations: %s", len(conversations), conversation_mix(conversations))
        examples = encode_conversations(tokenizer, conversations, settings.enable_thinking)
        # One row per step, so the loss curve is kept and a caller can follow a long warm start.
        record = settings.run_results() / WARM_START
        if cache:
            entry = cache / recipe_key(settings, folder, examples)
            if restore(entry, reference, record):
                logger.info("starting policy from the cache: %s", entry)
                model, tokenizer = load_policy(reference)
                return model, tokenizer, (reference / "BASE_MODEL").read_text().strip()
        record.unlink(missing_ok=True)  # a warm start killed before its reference was saved is redone
        append_line(record, ",".join(WARM_START_COLUMNS) + "\n")
        warm_start(model, tokenizer, examples, steps=settings.warm_start_steps, lr=settings.warm_start_lr,
                   batch_size=WARM_START_BATCH, seed=settings.policy_seed, progress=progress,
                   on_step=lambda step, loss: append_line(record, f"{step},{loss:.6g}\n"))
    model.save_pretrained(reference, safe_serialization=True)
    tokenizer.save_pretrained(reference)
    (reference / "BASE_MODEL").write_text(base_name + "\n")
    if entry is not None:
        store(entry, reference, settings.run_results() / WARM_START)
    return model, tokenizer, base_name


def _simulator(settings: TrainSettings):
    """The simulator the run talks to: the one at `simulator_url`, else a scripted one started for the run."""
    if settings.simulator_url:
        return contextlib.nullcontext(settings.simulator_url)
    return EmbeddedSimulator(settings.run, settings.runs_dir, seed=settings.seed,
                             replay_tasks_of=settings.replay_tasks_of)


def _checked(url: str, settings: TrainSettings) -> str:
    # Before the warm start, which talks to the simulator too.
    health = check_simulator(url, rules=TrainerRules.of(settings))
    logger.info("simulator at %s ready: contract %s, mode %s, backend %s, run %s", url, health.contract_version,
                health.mode, health.backend, health.run)
    return url


def train_cpu(settings: TrainSettings, progress: bool = True) -> dict:
    """Run (or resume) the CPU training; returns a summary of what was done."""
    torch.set_num_threads(max(1, settings.torch_threads))
    checkpoints, results = settings.run_checkpoints(), settings.run_results()
    for stale in remove_partial(checkpoints):
        logger.warning("removed a partial checkpoint left by a killed publish: %s", stale)
    with _simulator(settings) as url:
        return _train(settings, _checked(url, settings), checkpoints, results, progress)


def starting_policy(settings: TrainSettings, held_out: int = 0, progress: bool = True) -> dict:
    """Build the run's starting policy (or take it from the run or the cache), as `train_cpu` would first do,
    and with `held_out` > 0 write the policy's greedy answers on that many held-out tasks (HELD_OUT_FILE)."""
    torch.set_num_threads(max(1, settings.torch_threads))
    with _simulator(settings) as url:
        policy, tokenizer, base_model = _starting_policy(settings, _checked(url, settings), progress)
        summary = {"run": settings.run, "base_model": base_model, "policy": str(settings.run_state() / "reference")}
        if held_out:
            answers = asyncio.run(held_out_answers(
                policy, tokenizer, url, count=held_out, run_prefix=task_key_prefix(settings.run_state(), settings.run),
                seed=settings.seed, max_tools=settings.max_tools,
                max_tokens=settings.max_turn_tokens, enable_thinking=settings.enable_thinking))
            write_held_out(settings.run_results() / HELD_OUT_FILE, answers)
            summary["held_out"] = {"answers": str(settings.run_results() / HELD_OUT_FILE), **answer_counts(answers)}
    return summary


def _train(settings: TrainSettings, url: str, checkpoints: Path, results: Path, progress: bool) -> dict:
    policy, tokenizer, base_model = _starting_policy(settings, url, progress)
    rules = TrainerRules.of(settings)
    reference = copy.deepcopy(policy).eval().requires_grad_(False)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=settings.lr, weight_decay=0.0)
    curriculum = Curriculum(level=settings.level_initial, epsilon=settings.epsilon,
                            no_call_fraction=settings.no_call_fraction, mode=settings.mode)
    rng = random.Random(settings.seed)
    torch.manual_seed(settings.seed)
    metrics_csv, episodes_jsonl = results / TRAIN_METRICS, results / EPISODES_FILE
    start = 0
    saved = latest_state(settings.run_state())
    if saved is not None:
        state = load_state(saved, policy=policy, optimizer=optimizer, curriculum=curriculum, rng=rng)
        start = int(state["step"])
        logger.info("resumed from %s: step %d, curriculum level %d", saved, start, curriculum.level)
        if start and state.get("extra", {}).get("publish", True):
            # A run killed after this state was saved and before its checkpoint was announced: publish it
            # now (nothing happens when it was), else the resumed run would never publish this step.
            publish_checkpoint(policy, tokenizer, checkpoints, run=settings.run, step=start, base_model=base_model,
                               curriculum_level=curriculum.level, enable_thinking=settings.enable_thinking)
    else:
        publish_checkpoint(policy, tokenizer, checkpoints, run=settings.run, step=0, base_model=base_model,
                           curriculum_level=curriculum.level, enable_thinking=settings.enable_thinking)
    drop_steps_after(metrics_csv, episodes_jsonl, start)
    key_prefix = task_key_prefix(settings.run_state(), settings.run)
    client = TransformersGenerationClient(policy, tokenizer, seed=settings.seed, private_prefix=key_prefix)
    runner = EpisodeRunner(tokenizer, client, simulator_url=url, prompt_length=settings.prompt_length,
                           response_length=settings.response_length, enable_thinking=settings.enable_thinking,
                           loop_options=_loop_options(settings))
    grpo = GrpoConfig.of(settings)
    params = {"temperature": settings.temperature, "top_p": settings.top_p}
    update_threads = update_thread_count(settings.update_threads)
    published = []
    breaker = CircuitBreaker(settings.max_aborted_frac, settings.max_aborted_steps)
    last_saved = start

    def save(step: int, publish: bool) -> None:
        nonlocal last_saved
        save_state(settings.run_state(), step=step, policy=policy, optimizer=optimizer, curriculum=curriculum,
                   rng=rng, extra={"publish": publish})
        last_saved = step

    def stopped(err: TrainingStopped, finished: int) -> TrainingStopped:
        """Save the state of the last finished step (unless it is saved), and say where the rerun goes on."""
        if finished > last_saved:
            save(finished, publish=False)
        return TrainingStopped(err.reason, f"{err.fix} (trainer state of step {finished} saved; the rerun "
                                           f"continues at step {finished + 1})")

    with runner:  # one event loop and simulator session for the whole run
        for step in range(start + 1, settings.steps + 1):
            began = time.monotonic()
            level = curriculum.level
            before = rng.getstate(), torch.get_rng_state()
            try:
                wait_ready(url, settings.simulator_wait_s, before=f"step {step}", rules=rules)
                specs = step_specs(curriculum, step=step, groups=settings.tasks_per_step, n=settings.rollouts_per_task,
                                   rng=rng, key_prefix=key_prefix, max_tools=settings.max_tools,
                                   task_pool=settings.task_pool, seed=settings.seed,
                                   pool_seed=settings.policy_seed)
                outputs = runner.run_step(specs, params, progress=progress)
                records: list[EpisodeRecord] = [o.extra_fields["episode"] for o in outputs]
                fatal = fatal_stop(step, records)
                if fatal is not None:
                    raise fatal
            except TrainingStopped as err:
                # Nothing of this step is kept: back to the generators' state before it, as the state file saves them.
                rng.setstate(before[0])
                torch.set_rng_state(before[1])
                raise stopped(err, step - 1) from None
            update = grpo_update(policy, reference, optimizer, outputs, config=grpo, threads=update_threads)
            row = step_row(step, records, level=level, update=update, step_seconds=round(time.monotonic() - began, 3))
            row |= canary_columns(metrics_csv, step, row["tool_call_share"], steps=settings.canary_steps,
                                  threshold=settings.canary_shift)
            append_metrics_row(metrics_csv, row)
            append_episodes(episodes_jsonl, records)
            new_level = curriculum.update(row["reward_mean"])
            logger.info("step %d: reward %.3f (std %.3f), aborted %.2f, calls/turn %.2f, kl %.4g, level %d -> %d, "
                        "derived %s, %.1f s", step, row["reward_mean"], row["reward_std"], row["aborted_frac"],
                        row["tool_call_share"], row["kl"], level, new_level, curriculum.derived().as_dict(),
                        row["step_seconds"])
            if step % settings.save_every == 0 or step == settings.steps:
                save(step, publish=True)
                published.append(publish_checkpoint(
                    policy, tokenizer, checkpoints, run=settings.run, step=step, base_model=base_model,
                    curriculum_level=curriculum.level, enable_thinking=settings.enable_thinking))
            if breaker.observe(step, records) is not None:
                raise stopped(breaker.stop, step)
        return {"run": settings.run, "resumed_from": start, "last_step": settings.steps,
                "curriculum_level": curriculum.level, "published": [str(p) for p in published],
                "train_metrics": str(metrics_csv), "episodes": str(episodes_jsonl)}


def _loop_options(settings: TrainSettings) -> dict:
    return {
        "max_turn_tokens": settings.max_turn_tokens, "max_parallel_calls": settings.max_parallel_calls,
        "max_tool_response_chars": settings.max_tool_response_chars, "http_retries": settings.http_retries,
        "max_in_flight": settings.max_in_flight, "mode": settings.mode,
        "trustee_dir": str(settings.trustee_dir) if settings.trustee_dir else None,
        "trustee_commit": settings.trustee_commit,
        "timeouts": {"task": settings.task_timeout_s, "tool": settings.tool_timeout_s,
                     "user": settings.user_timeout_s, "verify": settings.verify_timeout_s},
    }
