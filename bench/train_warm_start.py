"""Seconds per warm-start step of the SmolLM2 starting policy, against the whole-sequence step it replaced, and
the wall time of building the starting policy as `make demo` does.

Both steps train the same batches of the same gold conversations (the smollm2 preset's, from the real scripted
simulator) on their own copy of the base policy with their own AdamW:
- ours: `toolcanary.train.cpu.warm_start.warm_start`, which reads the prompt before the first trained token without
  gradient into a key/value cache and runs forward and backward over the rest only;
- baseline: the same loss with the whole sequence run with gradient (one sequence per forward, logits from the
  first trained position on), as the warm start did before.
The ratio is ours over the baseline's median seconds per step. `build_s` is `starting_policy()` with the smollm2
preset and no cache (gold conversations from a started simulator, the preset's warm start, saving the policy):
what a first `make demo` spends before its first GRPO step.

    .venvs/train/bin/python bench/train_warm_start.py                  # writes bench/results/train_warm_start.json
    .venvs/train/bin/python bench/train_warm_start.py --steps 1 --tasks 2 --no-build --out bench/results/warm_smoke.json
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from toolcanary.train.cpu.embedded_simulator import EmbeddedSimulator
from toolcanary.train.cpu.gold_conversations import gold_conversations, warm_start_requests
from toolcanary.train.cpu.run import starting_policy
from toolcanary.train.cpu.starting_policy_cache import WARM_START_BATCH
from toolcanary.train.cpu.tiny_policy import build_base_policy, load_policy
from toolcanary.train.cpu.warm_start import encode_conversations, warm_start
from toolcanary.train.settings import TrainSettings

HERE = Path(__file__).resolve().parent


def whole_sequence_step(model, optimizer, batch: list[tuple[list[int], list[int]]]) -> None:
    """One warm-start step with every position of every sequence run with gradient."""
    total = sum(sum(mask) for _, mask in batch)
    optimizer.zero_grad(set_to_none=True)
    for tokens, mask in batch:
        first = mask.index(1)
        logits = model(input_ids=torch.tensor([tokens]), use_cache=False,
                       logits_to_keep=len(tokens) - first + 1).logits[0, :-1].float()
        loss = torch.nn.functional.cross_entropy(logits, torch.tensor(tokens[first:]), reduction="none")
        ((loss * torch.tensor(mask[first:], dtype=torch.float32)).sum() / total).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()


def our_steps(model, tokenizer, examples, steps: int, seed: int, lr: float) -> list[float]:
    """Seconds of each step of `warm_start` itself, timed between its `on_step` calls."""
    seconds: list[float] = []
    began = [time.perf_counter()]

    def lap(_step: int, _loss: float) -> None:
        now = time.perf_counter()
        seconds.append(now - began[0])
        began[0] = now

    warm_start(model, tokenizer, examples, steps=steps, lr=lr, batch_size=WARM_START_BATCH, seed=seed,
               progress=False, on_step=lap)
    return seconds


def baseline_steps(model, examples, steps: int, seed: int, lr: float) -> list[float]:
    """Seconds of each whole-sequence step on the batches `warm_start` draws with the same seed."""
    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    seconds = []
    for _ in range(steps):
        batch = [examples[rng.randrange(len(examples))] for _ in range(min(WARM_START_BATCH, len(examples)))]
        began = time.perf_counter()
        whole_sequence_step(model, optimizer, batch)
        seconds.append(time.perf_counter() - began)
    return seconds


def run_bench(steps: int, build: bool, tmp: Path, tasks: int | None = None) -> dict:
    settings = TrainSettings.from_env(policy="smollm2", run="bench-warm-start", runs_dir=tmp / "runs",
                                      checkpoints_dir=tmp / "checkpoints", results_dir=tmp / "results")
    if tasks is not None:
        settings = settings.model_copy(update={"warm_start_tasks": tasks})
    torch.set_num_threads(settings.torch_threads)
    with EmbeddedSimulator("bench-warm-start", tmp / "runs", seed=settings.seed) as url:
        requests = warm_start_requests(key_prefix="bench", seed=settings.seed, count=settings.warm_start_tasks,
                                       task_pool=settings.task_pool, max_tools=settings.max_tools,
                                       epsilon=settings.epsilon, no_call_fraction=settings.warm_start_no_call_fraction)
        conversations = asyncio.run(gold_conversations(url, requests, seed=settings.seed))
    _, folder = build_base_policy(settings.policy, tmp / "base", seed=settings.seed)
    base, tokenizer = load_policy(folder)
    examples = encode_conversations(tokenizer, conversations, settings.enable_thinking)
    # One unmeasured step each first: the first AdamW step allocates its state.
    ours = our_steps(copy.deepcopy(base), tokenizer, examples, steps + 1, settings.seed, settings.warm_start_lr)[1:]
    baseline = baseline_steps(copy.deepcopy(base), examples, steps + 1, settings.seed, settings.warm_start_lr)[1:]
    result = {
        "steps_measured": steps, "conversations": len(examples), "threads": settings.torch_threads,
        "tokens_mean": statistics.fmean(len(t) for t, _ in examples),
        "prompt_tokens_mean": statistics.fmean(m.index(1) for _, m in examples),
        "step_s": {"ours_median": statistics.median(ours), "baseline_median": statistics.median(baseline),
                   "ratio": statistics.median(ours) / statistics.median(baseline)},
        "preset_warm_start_steps": settings.warm_start_steps,
    }
    if build:
        began = time.perf_counter()
        starting_policy(settings.model_copy(update={"run": "bench-build"}), progress=False)
        result["build_s"] = time.perf_counter() - began
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=6, help="measured steps of each method (default 6)")
    parser.add_argument("--tasks", type=int, default=None, help="gold conversations (default: the preset's 48)")
    parser.add_argument("--no-build", dest="build", action="store_false",
                        help="skip timing the whole starting-policy build (about 4 min on 2 cores)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "train_warm_start.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        result = run_bench(args.steps, args.build, Path(tmp), args.tasks)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    step = result["step_s"]
    print(f"warm-start step, {result['conversations']} gold conversations ({result['tokens_mean']:.0f} tokens, "
          f"{result['prompt_tokens_mean']:.0f} before the first trained one), median of {args.steps}: "
          f"ours {step['ours_median']:.2f} s, whole sequence {step['baseline_median']:.2f} s, ratio {step['ratio']:.3f}")
    if "build_s" in result:
        print(f"starting-policy build (smollm2 preset, {result['preset_warm_start_steps']} steps, no cache): "
              f"{result['build_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
