"""The trainer benchmarks still run: one short measurement each, its JSON written with its ratios.

Run: .venvs/train/bin/python -m pytest tests/train/test_benches.py -q
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def run_bench(name: str, *args: str, out: Path) -> dict:
    done = subprocess.run([sys.executable, str(BENCH / name), *args, "--out", str(out)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(out.read_text())


def test_the_rollout_bench_runs_in_its_short_mode_against_a_stub_in_its_own_process(tmp_path):
    result = run_bench("train_rollout.py", "--episodes", "16", "--in-flight", "8", "--repeats", "1",
                       out=tmp_path / "train_rollout.json")
    # task, one tool call, verdict: the fake policy's episode under the curriculum's first level
    assert result["calls_per_episode"] == 3
    assert result["ideal_episodes_per_s"] == pytest.approx(8 / 0.3, rel=1e-3)
    assert 0 < result["ratio_to_ideal"] <= 1.05 and len(result["runs"]) == 1


def test_the_rollout_bench_refuses_episodes_that_do_not_fill_groups(tmp_path):
    done = subprocess.run([sys.executable, str(BENCH / "train_rollout.py"), "--episodes", "12"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "expected a positive multiple of 8" in done.stderr and "got 12" in done.stderr


@pytest.mark.slow
def test_the_grpo_step_bench_runs_in_its_short_mode_and_writes_its_ratios(tmp_path):
    result = run_bench("train_grpo_step.py", "--steps", "1", "--repeats", "1", "--warmup", "0",
                       out=tmp_path / "train_grpo_step.json")
    assert result["ratio"] > 0 and result["hand_step_s"] > 0
    assert result["tokens_per_step"] > 0 and result["generated_tokens_per_step"] > 0
    assert set(result) >= {"rollout_ratio", "update_ratio", "rollout_share", "rollout_threads", "update_threads"}


@pytest.mark.slow
def test_the_warm_start_bench_times_both_steps_on_the_same_batches(tmp_path):
    result = run_bench("train_warm_start.py", "--steps", "1", "--tasks", "2", "--no-build",
                       out=tmp_path / "train_warm_start.json")
    step = result["step_s"]
    assert step["ours_median"] > 0 and step["baseline_median"] > 0
    assert step["ratio"] == pytest.approx(step["ours_median"] / step["baseline_median"])
    assert 0 < result["prompt_tokens_mean"] < result["tokens_mean"] and "build_s" not in result
