"""Trainer benchmark: rollout concurrency against a slow simulator, and the cost of one CPU GRPO step.

1. Episodes per second with 64 episodes in flight against a simulator stub that takes 100 ms per call,
   with an instant fake policy, against the ideal (64 / (calls per episode x 100 ms)): how much the
   agent loop, the HTTP client and tokenisation lose to overhead.
2. Seconds per CPU GRPO step for the tiny policy (transformers generation client, real scripted simulator,
   default CPU settings, no warm start), split into rollout and update, against a published
   hand-written small-vocabulary CPU step (about 0.45 s for 4 x 8 x 64 tokens).

    .venvs/train/bin/python bench/train_throughput.py            # writes bench/results/train_throughput.json
    .venvs/train/bin/python bench/train_throughput.py --episodes 128 --grpo-steps 2
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "train"))

from sim_stub import StubBehaviour, StubSimulator  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from toolcanary.contract.hermes import render_tool_call  # noqa: E402
from toolcanary.train.curriculum import Curriculum  # noqa: E402
from toolcanary.train.embedded_simulator import EmbeddedSimulator  # noqa: E402
from toolcanary.train.generation_client import TransformersGenerationClient  # noqa: E402
from toolcanary.train.grpo import GrpoConfig, grpo_update  # noqa: E402
from toolcanary.train.rollout import EpisodeRunner, step_specs  # noqa: E402
from toolcanary.train.settings import TrainSettings  # noqa: E402
from toolcanary.train.tiny_policy import build_tiny_policy, load_policy  # noqa: E402

CALL_LATENCY_S = 0.1
HAND_WRITTEN_STEP_S = 0.45


class InstantPolicy:
    """Calls the stub's tool on the first turn, answers on the second: 3 simulator calls per episode."""

    def __init__(self, tokenizer) -> None:
        end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.turns = [tokenizer.encode(render_tool_call("get_weather", {"city": "Paris"})) + [end],
                      tokenizer.encode("It is sunny.") + [end]]
        self.seen: dict[str, int] = {}

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        turn = self.seen.get(request_id, 0)
        self.seen[request_id] = turn + 1
        ids = self.turns[min(turn, 1)]
        return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids))


def rollout_throughput(tokenizer, episodes: int, in_flight: int) -> dict:
    with StubSimulator(StubBehaviour(delay_s=CALL_LATENCY_S)) as sim:
        runner = EpisodeRunner(tokenizer, InstantPolicy(tokenizer), simulator_url=sim.url, prompt_length=4096,
                               response_length=1024, loop_options={"max_in_flight": in_flight})
        specs = step_specs(Curriculum(epsilon=0.0), step=1, groups=episodes // 8, n=8, rng=random.Random(0),
                           key_prefix="bench")
        started = time.perf_counter()
        outputs = []
        for start in range(0, len(specs), in_flight):
            outputs += asyncio.run(runner.run(specs[start: start + in_flight], progress=True))
        elapsed = time.perf_counter() - started
        calls = sum(len(v) for v in sim.requests.values()) / len(outputs)
    ok = sum(o.extra_fields["episode"]["outcome"] == "ok" for o in outputs)
    ideal = in_flight / (calls * CALL_LATENCY_S)
    measured = len(outputs) / elapsed
    return {"episodes": len(outputs), "ok": ok, "in_flight": in_flight, "calls_per_episode": calls,
            "seconds": round(elapsed, 3), "episodes_per_s": round(measured, 2), "ideal_episodes_per_s": round(ideal, 2),
            "ratio_to_ideal": round(measured / ideal, 3)}


def grpo_step_seconds(steps: int) -> dict:
    settings = TrainSettings()
    torch.set_num_threads(settings.torch_threads)
    with tempfile.TemporaryDirectory() as tmp:
        policy, tokenizer = load_policy(build_tiny_policy(Path(tmp) / "policy"))
        reference = copy.deepcopy(policy).eval()
        optimizer = torch.optim.AdamW(policy.parameters(), lr=settings.lr)
        with EmbeddedSimulator(key_prefix="bench", runs_dir=Path(tmp) / "runs") as url:
            runner = EpisodeRunner(tokenizer, TransformersGenerationClient(policy, tokenizer), simulator_url=url,
                                   prompt_length=settings.prompt_length, response_length=settings.response_length,
                                   loop_options={"max_turn_tokens": settings.max_turn_tokens})
            timings, rng = [], random.Random(0)
            for step in range(1, steps + 1):
                specs = step_specs(Curriculum(), step=step, groups=settings.tasks_per_step,
                                   n=settings.rollouts_per_task, rng=rng, key_prefix="bench",
                                   max_tools=settings.max_tools)
                began = time.perf_counter()
                outputs = asyncio.run(runner.run(specs))
                rolled = time.perf_counter()
                grpo_update(policy, reference, optimizer, outputs, config=GrpoConfig())
                done = time.perf_counter()
                tokens = sum(len(o.prompt_ids) + len(o.response_ids) for o in outputs)
                timings.append({"rollout_s": round(rolled - began, 3), "update_s": round(done - rolled, 3),
                                "step_s": round(done - began, 3), "episodes": len(outputs), "tokens": tokens})
    mean_step = sum(t["step_s"] for t in timings) / len(timings)
    return {"steps": timings, "mean_step_s": round(mean_step, 3), "baseline_step_s": HAND_WRITTEN_STEP_S,
            "ratio_to_baseline": round(mean_step / HAND_WRITTEN_STEP_S, 2),
            "episodes_per_step": settings.tasks_per_step * settings.rollouts_per_task,
            "threads": torch.get_num_threads()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 2)[2],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--grpo-steps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "train_throughput.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        _, tokenizer = load_policy(build_tiny_policy(Path(tmp) / "policy"))
    rollout = rollout_throughput(tokenizer, args.episodes, args.in_flight)
    grpo = grpo_step_seconds(args.grpo_steps)
    print(f"{'measure':<44}{'measured':>12}{'baseline':>12}{'ratio':>8}")
    print(f"{'episodes/s, 64 in flight, 100 ms/call':<44}{rollout['episodes_per_s']:>12}"
          f"{rollout['ideal_episodes_per_s']:>12}{rollout['ratio_to_ideal']:>8}")
    print(f"{'s per CPU GRPO step (tiny, 16 episodes)':<44}{grpo['mean_step_s']:>12}"
          f"{HAND_WRITTEN_STEP_S:>12}{grpo['ratio_to_baseline']:>8}")
    for number, step in enumerate(grpo["steps"], start=1):
        print(f"  step {number}: rollout {step['rollout_s']} s, update {step['update_s']} s, {step['tokens']} tokens")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rollout": rollout, "grpo": grpo}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
