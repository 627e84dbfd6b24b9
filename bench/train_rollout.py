"""Rollout throughput against a slow simulator: episodes per second as a share of the ideal.

A step's episodes run through verl's agent loop (EpisodeRunner, as the CPU trainer runs them) against a
simulator stub that takes 100 ms per call and gives every episode its own tool results, with an instant fake
policy (a tool call, then an answer). The stub runs in a process of its own, as the simulator does, so its
CPU is not counted against the trainer's. With `--in-flight` episodes running at once as a sliding window and
every call waiting 100 ms, the ideal is in_flight / (calls per episode x 100 ms) episodes per second; the
ratio says how much the agent loop, token rendering and the HTTP client lose to overhead. The reported value
is the median of `--repeats` runs of `--episodes` episodes on one runner (one event loop, one HTTP session),
after one unmeasured warm-up run.

    .venvs/train/bin/python bench/train_rollout.py                  # writes bench/results/train_rollout.json
    .venvs/train/bin/python bench/train_rollout.py --episodes 64 --repeats 1 --out bench/results/rollout_smoke.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from verl.workers.rollout.replica import TokenOutput

from toolcanary.contract.hermes import render_tool_call
from toolcanary.train.cpu.tiny_policy import build_tiny_policy, load_policy
from toolcanary.train.curriculum import Curriculum
from toolcanary.train.rollout import EpisodeRunner, step_specs

HERE = Path(__file__).resolve().parent
STUB = HERE.parent / "tests" / "train" / "sim_stub.py"

CALL_LATENCY_S = 0.1
GROUP_SIZE = 8


class InstantPolicy:
    """Calls the stub's tool on the first turn, answers on the second: 4 simulator calls per episode."""

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


def one_run(runner: EpisodeRunner, *, step: int, episodes: int, in_flight: int) -> dict:
    specs = step_specs(Curriculum(epsilon=0.0), step=step, groups=episodes // GROUP_SIZE, n=GROUP_SIZE,
                       rng=random.Random(step), key_prefix="bench")
    started = time.perf_counter()
    outputs = runner.run_step(specs, progress=True, episodes_in_flight=in_flight)
    elapsed = time.perf_counter() - started
    failed = [o.extra_fields["episode"].abort_cause for o in outputs
              if o.extra_fields["episode"].outcome != "ok"]
    if failed:
        raise SystemExit(f"bench: {len(failed)} of {len(outputs)} episodes failed ({sorted(set(failed))}); the "
                         "measure would be of aborts, not of rollouts")
    return {"seconds": elapsed, "episodes_per_s": len(outputs) / elapsed}


def measure(episodes: int, in_flight: int, repeats: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        _, tokenizer = load_policy(build_tiny_policy(Path(tmp) / "policy"))
    stub = subprocess.Popen([sys.executable, str(STUB), "--delay-s", str(CALL_LATENCY_S), "--per-episode-results"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        url = stub.stdout.readline().strip()
        with EpisodeRunner(tokenizer, InstantPolicy(tokenizer), simulator_url=url, prompt_length=4096,
                           response_length=1024, loop_options={"max_in_flight": in_flight}) as runner:
            warmup = min(episodes, in_flight)
            one_run(runner, step=1, episodes=warmup, in_flight=in_flight)
            runs = [one_run(runner, step=2 + r, episodes=episodes, in_flight=in_flight) for r in range(repeats)]
        stub.stdin.close()
        served = json.loads(stub.stdout.readline())
    finally:
        stub.kill()
        stub.wait(10)
    # The fake policy plays every episode the same way, so every episode makes the same calls.
    calls = sum(served.values()) / (warmup + episodes * repeats)
    ideal = in_flight / (calls * CALL_LATENCY_S)
    for run in runs:
        run["ratio_to_ideal"] = run["episodes_per_s"] / ideal
    median = {key: round(statistics.median(run[key] for run in runs), 3) for key in runs[0]}
    return {"episodes": episodes, "in_flight": in_flight, "call_latency_s": CALL_LATENCY_S, "repeats": repeats,
            "calls_per_episode": calls, "ideal_episodes_per_s": round(ideal, 3),
            "runs": [{key: round(value, 3) for key, value in run.items()} for run in runs], **median}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.rsplit("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=256, help="episodes per run (a multiple of 8)")
    parser.add_argument("--in-flight", type=int, default=64, help="episodes running at once")
    parser.add_argument("--repeats", type=int, default=3, help="runs; the report is their median")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "train_rollout.json")
    args = parser.parse_args()
    if args.episodes < GROUP_SIZE or args.episodes % GROUP_SIZE:
        parser.error(f"--episodes: expected a positive multiple of {GROUP_SIZE} (groups of {GROUP_SIZE}), "
                     f"got {args.episodes}")
    result = measure(args.episodes, args.in_flight, args.repeats)
    print(f"{args.episodes} episodes, {args.in_flight} in flight, {CALL_LATENCY_S * 1000:.0f} ms per simulator "
          f"call, {result['calls_per_episode']:.0f} calls per episode; medians of {args.repeats} runs")
    print(f"{'measure':<24}{'measured':>10}{'ideal':>10}{'ratio':>8}")
    print(f"{'episodes per second':<24}{result['episodes_per_s']:>10.2f}{result['ideal_episodes_per_s']:>10.2f}"
          f"{result['ratio_to_ideal']:>8.3f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
