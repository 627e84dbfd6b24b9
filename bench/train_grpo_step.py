"""Seconds per CPU GRPO step for the tiny policy, against a hand-written loop doing the same work.

Our step is what `python -m toolcanary.train cpu` does per step with the default settings (no warm start):
tasks_per_step x rollouts_per_task episodes through verl's agent loop (EpisodeRunner) against the real
scripted simulator (EmbeddedSimulator), sampled by TransformersGenerationClient, then `grpo_update` (one
optimizer step per mini-batch of `ppo_mini_batch_size` tasks).

The baseline is re-based on each measured step's own episodes. Every `generate` call of the step is
recorded (prompt ids, tokens generated), and the hand loop then does the same work with none of the
machinery (no agent loop, no simulator, no verl), as plainly as one would write it by hand:

- rollout: for each turn index t, one `model.generate` over the prompts every episode sent at its turn t
  (left-padded, attention mask, sampling at the step's temperature), forced to the largest number of tokens
  any of those calls generated (min_new_tokens = max_new_tokens), as a batched hand loop runs until its
  longest row ends;
- update: the step's final sequences (prompt + response), one per forward; the reference's and the old
  policy's log-probabilities without grad, once, before the first optimizer step; then per mini-batch of
  `ppo_mini_batch_size` tasks (`ppo_epochs` times) the policy's forward with grad, group-normalised advantages,
  PPO's clipped ratio loss plus the low-variance KL times kl_coef, a token mean over the mini-batch's trained
  tokens, backward, gradient clipping and an AdamW step.

Each phase of the hand loop runs on the torch threads our step gives that phase (`torch_threads` for the
rollout, `update_threads` for the update), on a copy of the policy with its own optimizer. The ratio is our
seconds over the hand loop's, summed over a run's steps; the reported value is the median of `--repeats`
runs (after `--warmup` unmeasured steps), each run drawing new tasks.

    .venvs/train/bin/python bench/train_grpo_step.py               # writes bench/results/train_grpo_step.json
    .venvs/train/bin/python bench/train_grpo_step.py --steps 1 --repeats 1 --warmup 0 --out bench/results/grpo_smoke.json
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch

from toolcanary.train.cpu.embedded_simulator import EmbeddedSimulator
from toolcanary.train.cpu.generation_client import TransformersGenerationClient
from toolcanary.train.cpu.tiny_policy import build_tiny_policy, load_policy
from toolcanary.train.curriculum import Curriculum
from toolcanary.train.grpo import GrpoConfig, grpo_update, update_thread_count
from toolcanary.train.rollout import EpisodeRunner, step_specs
from toolcanary.train.settings import TrainSettings

HERE = Path(__file__).resolve().parent


class RecordingClient:
    """Passes every call to the real client and keeps (episode, prompt ids, tokens generated) per generate."""

    def __init__(self, client) -> None:
        self.client = client
        self.calls: list[tuple[str, list[int], int]] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        out = await self.client.generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params, **kwargs)
        self.calls.append((str(request_id), list(prompt_ids), len(out.token_ids)))
        return out

    def __getattr__(self, name):  # episode_started / episode_finished, when the client has them
        return getattr(self.client, name)


# --- the hand loop --------------------------------------------------------------------------------------------


@torch.no_grad()
def hand_rollout(model, calls: list[tuple[str, list[int], int]], pad_id: int, temperature: float) -> int:
    """The recorded calls again, batched by turn index; returns the tokens generated."""
    turns: dict[int, list[tuple[list[int], int]]] = defaultdict(list)
    seen: dict[str, int] = defaultdict(int)
    for episode, prompt, generated in calls:
        turns[seen[episode]].append((prompt, generated))
        seen[episode] += 1
    model.eval()
    total = 0
    for batch in turns.values():
        new = max(generated for _, generated in batch)
        if new == 0:
            continue
        width = max(len(prompt) for prompt, _ in batch)
        ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
        attention = torch.zeros_like(ids)
        for row, (prompt, _) in enumerate(batch):
            ids[row, width - len(prompt):] = torch.tensor(prompt)
            attention[row, width - len(prompt):] = 1
        out = model.generate(input_ids=ids, attention_mask=attention, do_sample=True, temperature=temperature,
                             top_p=1.0, top_k=0, max_new_tokens=new, min_new_tokens=new, pad_token_id=pad_id)
        total += (out.shape[1] - width) * len(batch)
    model.train()
    return total


def hand_update(policy, reference, optimizer, outputs, config: GrpoConfig) -> float:
    """The clipped-ratio policy-gradient steps with KL over the step's sequences, one sequence per forward:
    one optimizer step per mini-batch of `ppo_mini_batch_size` tasks, `ppo_epochs` times, the old
    log-probabilities taken before the first."""
    rows = [o for o in outputs if sum(o.response_mask)]
    if not rows:
        return 0.0
    rewards = torch.tensor([float(o.reward_score or 0.0) for o in rows])
    keys = [o.extra_fields["episode"].task_key for o in rows]
    advantages = torch.zeros(len(rows))
    for key in set(keys):
        members = [i for i, k in enumerate(keys) if k == key]
        group = rewards[members]
        spread = group.std() if len(members) > 1 else torch.tensor(1.0)
        advantages[members] = (group - group.mean()) / (spread + 1e-6)
    order = list(dict.fromkeys(keys))
    size = config.ppo_mini_batch_size or len(order)
    batches = [[i for i, k in enumerate(keys) if k in order[start: start + size]] for start in range(0, len(order), size)]

    def logprobs(model, o):
        ids = torch.tensor([list(o.prompt_ids) + list(o.response_ids)])
        keep = len(o.response_ids) + 1  # the positions that predict a response token, and the last
        logits = model(input_ids=ids, logits_to_keep=keep).logits[0, :-1].log_softmax(-1)
        return logits.gather(-1, ids[0, len(o.prompt_ids):, None]).squeeze(-1)

    policy.train()
    with torch.no_grad():
        ref = [logprobs(reference, o) for o in rows]
        old = {i: logprobs(policy, rows[i]) for batch in batches[1:] for i in batch}
    for _ in range(config.ppo_epochs):
        for batch in batches:
            tokens = sum(sum(rows[i].response_mask) for i in batch)
            optimizer.zero_grad(set_to_none=True)
            for i in batch:
                new = logprobs(policy, rows[i])
                old.setdefault(i, new.detach())
                ratio = torch.exp(new - old[i])
                pg = torch.maximum(-advantages[i] * ratio,
                                   -advantages[i] * ratio.clamp(1 - config.clip_ratio, 1 + config.clip_ratio))
                log_ratio = (ref[i] - new).clamp(-20, 20)
                kl = (torch.exp(log_ratio) - log_ratio - 1).clamp(-10, 10)
                trained = torch.tensor(rows[i].response_mask, dtype=torch.float32)
                (((pg + config.kl_coef * kl) * trained).sum() / tokens).backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm)
            optimizer.step()
    return float(sum(sum(o.response_mask) for o in rows))


# --- measurement ----------------------------------------------------------------------------------------------


def measure_step(step: int, ctx: dict) -> dict:
    """Our step, then the hand loop on the same episodes; seconds of each phase."""
    settings, recorder = ctx["settings"], ctx["recorder"]
    specs = step_specs(ctx["curriculum"], step=step, groups=settings.tasks_per_step, n=settings.rollouts_per_task,
                       rng=ctx["rng"], key_prefix="bench", max_tools=settings.max_tools, task_pool=settings.task_pool,
                       seed=settings.seed)
    recorder.calls.clear()
    ctx["client"].batches = 0
    torch.set_num_threads(settings.torch_threads)
    began = time.perf_counter()
    outputs = ctx["runner"].run_step(specs, ctx["params"])
    rolled = time.perf_counter()
    grpo_update(ctx["policy"], ctx["reference"], ctx["optimizer"], outputs, config=ctx["grpo"],
                threads=ctx["update_threads"])
    updated = time.perf_counter()
    torch.set_num_threads(settings.torch_threads)
    generated = hand_rollout(ctx["hand_policy"], recorder.calls, ctx["pad_id"], settings.temperature)
    hand_rolled = time.perf_counter()
    torch.set_num_threads(ctx["update_threads"])
    hand_update(ctx["hand_policy"], ctx["reference"], ctx["hand_optimizer"], outputs, ctx["grpo"])
    hand_done = time.perf_counter()
    torch.set_num_threads(settings.torch_threads)
    return {"rollout_s": rolled - began, "update_s": updated - rolled, "step_s": updated - began,
            "hand_rollout_s": hand_rolled - updated, "hand_update_s": hand_done - hand_rolled,
            "hand_step_s": hand_done - updated, "generate_calls": len(recorder.calls),
            "generate_batches": ctx["client"].batches, "generated_tokens": sum(c[2] for c in recorder.calls),
            "hand_generated_tokens": generated,
            "tokens": sum(len(o.prompt_ids) + len(o.response_ids) for o in outputs),
            "response_tokens": sum(len(o.response_ids) for o in outputs), "episodes": len(outputs)}


def run_bench(steps: int, repeats: int, warmup: int, tmp: Path) -> dict:
    settings = TrainSettings.from_env()
    update_threads = update_thread_count(settings.update_threads)
    torch.manual_seed(settings.seed)
    policy, tokenizer = load_policy(build_tiny_policy(tmp / "policy", seed=settings.seed))
    client = TransformersGenerationClient(policy, tokenizer, seed=settings.seed)
    recorder = RecordingClient(client)
    ctx = {"settings": settings, "policy": policy, "reference": copy.deepcopy(policy).eval().requires_grad_(False),
           "optimizer": torch.optim.AdamW(policy.parameters(), lr=settings.lr, weight_decay=0.0),
           "hand_policy": copy.deepcopy(policy), "client": client, "recorder": recorder,
           "curriculum": Curriculum(level=settings.level_initial, epsilon=settings.epsilon),
           "rng": random.Random(settings.seed), "params": {"temperature": settings.temperature, "top_p": settings.top_p},
           "grpo": GrpoConfig.of(settings),
           "pad_id": tokenizer.pad_token_id, "update_threads": update_threads}
    ctx["hand_optimizer"] = torch.optim.AdamW(ctx["hand_policy"].parameters(), lr=settings.lr, weight_decay=0.0)
    runs = []
    with EmbeddedSimulator("bench-grpo-step", tmp / "runs", seed=settings.seed) as url:
        ctx["runner"] = EpisodeRunner(tokenizer, recorder, simulator_url=url, prompt_length=settings.prompt_length,
                                      response_length=settings.response_length,
                                      loop_options={"max_turn_tokens": settings.max_turn_tokens,
                                                    "max_parallel_calls": settings.max_parallel_calls,
                                                    "max_tool_response_chars": settings.max_tool_response_chars})
        with ctx["runner"]:
            step = 0
            for _ in range(warmup):
                step += 1
                measure_step(step, ctx)
            for _ in range(repeats):
                rows = []
                for _ in range(steps):
                    step += 1
                    rows.append(measure_step(step, ctx))
                runs.append(summarise(rows))
    return {"policy": "tiny", "episodes_per_step": settings.tasks_per_step * settings.rollouts_per_task,
            "rollout_threads": settings.torch_threads, "update_threads": update_threads,
            "steps_per_run": steps, "repeats": repeats, "warmup_steps": warmup,
            **{key: statistics.median(run[key] for run in runs) for key in runs[0] if key != "steps"},
            "runs": runs}


def summarise(rows: list[dict]) -> dict:
    """A run's totals per step and its ratios."""
    per_step = {key: sum(r[key] for r in rows) / len(rows) for key in rows[0]}
    return {"step_s": round(per_step["step_s"], 4), "rollout_s": round(per_step["rollout_s"], 4),
            "update_s": round(per_step["update_s"], 4), "hand_step_s": round(per_step["hand_step_s"], 4),
            "hand_rollout_s": round(per_step["hand_rollout_s"], 4),
            "hand_update_s": round(per_step["hand_update_s"], 4),
            "ratio": round(per_step["step_s"] / per_step["hand_step_s"], 3),
            "rollout_ratio": round(per_step["rollout_s"] / per_step["hand_rollout_s"], 3),
            "update_ratio": round(per_step["update_s"] / per_step["hand_update_s"], 3),
            "rollout_share": round(per_step["rollout_s"] / per_step["step_s"], 3),
            "tokens_per_step": per_step["tokens"], "response_tokens_per_step": per_step["response_tokens"],
            "generated_tokens_per_step": per_step["generated_tokens"],
            "generate_calls_per_step": per_step["generate_calls"],
            "generate_batches_per_step": per_step["generate_batches"],
            "steps": [{k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()} for r in rows]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.rsplit("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2, help="measured steps per run")
    parser.add_argument("--repeats", type=int, default=3, help="runs; the report is their median")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured steps before the first run")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "train_grpo_step.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = run_bench(args.steps, args.repeats, args.warmup, Path(tmp))
    print(f"tiny policy, {result['episodes_per_step']} episodes, {result['tokens_per_step']:.0f} tokens per step "
          f"({result['generated_tokens_per_step']:.0f} generated in {result['generate_calls_per_step']:.0f} calls, "
          f"{result['generate_batches_per_step']:.0f} batches); threads: rollout {result['rollout_threads']}, "
          f"update {result['update_threads']}; medians of {result['repeats']} runs of {result['steps_per_run']} steps")
    print(f"{'phase':<10}{'ours s':>10}{'hand s':>10}{'ratio':>8}")
    for phase, ours, hand, ratio in (("rollout", "rollout_s", "hand_rollout_s", "rollout_ratio"),
                                     ("update", "update_s", "hand_update_s", "update_ratio"),
                                     ("step", "step_s", "hand_step_s", "ratio")):
        print(f"{phase:<10}{result[ours]:>10.3f}{result[hand]:>10.3f}{result[ratio]:>8.2f}")
    print(f"rollout share of our step: {result['rollout_share']:.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
