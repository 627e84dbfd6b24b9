"""The training-side tool-call canary: its reading against a hand computation, its warning on a planted shift
and silence on a flat series, and its columns in train_metrics.csv through the GPU recipe's step closing (the CPU
run's are checked in test_cpu_run.py).

Run: .venvs/train/bin/python -m pytest tests/train/test_canary.py -q
"""

from __future__ import annotations

import json
import logging
import math
import random

import pytest

from toolcanary.contract.csv_schemas import read_train_metrics
from toolcanary.contract.training_files import step_episodes
from toolcanary.train.canary import read_canary
from toolcanary.train.gpu.verl_hooks import close_step, episode_dir, load_curriculum
from toolcanary.train.settings import TrainSettings


def test_a_planted_shift_fires_and_a_flat_series_does_not():
    rng = random.Random(3)
    flat = [0.6 + rng.gauss(0, 0.02) for _ in range(40)]
    falling = [0.6 + rng.gauss(0, 0.02) - (0.01 * (step - 10) if step > 10 else 0.0) for step in range(40)]
    fired_flat = [read_canary(flat[:n], steps=5, threshold=0.15) for n in range(6, 41)]
    assert not any(r.fired for r in fired_flat)
    readings = [read_canary(falling[:n], steps=5, threshold=0.15) for n in range(6, 41)]
    first_fired = next(n for n, r in zip(range(6, 41), readings, strict=True) if r.fired)
    assert 25 <= first_fired <= 32  # the planted fall passes 0.15 about 15 steps after it starts
    last = readings[-1]
    assert last.first == pytest.approx(sum(falling[:5]) / 5) and last.recent == pytest.approx(sum(falling[-5:]) / 5)
    assert last.shift == pytest.approx(last.recent - last.first) and last.shift < -0.15


def test_it_waits_for_steps_enough_and_skips_steps_without_a_share():
    assert read_canary([0.5, 0.5, 0.5], steps=3, threshold=0.1) is None
    reading = read_canary([0.5, math.nan, 0.5, 0.5, 0.9], steps=3, threshold=0.1)
    assert reading.first == pytest.approx(0.5) and reading.recent == pytest.approx((0.5 + 0.5 + 0.9) / 3)


def test_the_gpu_recipes_step_closing_writes_the_canary_and_warns(tmp_path, caplog):
    settings = TrainSettings.from_env({"TOOLCANARY_CHECKPOINTS_DIR": str(tmp_path / "ck"),
                                       "TOOLCANARY_RESULTS_DIR": str(tmp_path / "res"),
                                       "TOOLCANARY_RUNS_DIR": str(tmp_path / "runs"), "TOOLCANARY_TRAIN_RUN": "g",
                                       "TOOLCANARY_TRAIN_CANARY_STEPS": "2", "TOOLCANARY_TRAIN_CANARY_SHIFT": "0.2"})
    base = {"outcome": "ok", "response_turns": 1, "assistant_turns": 4, "tool_turns": 1, "user_turns": 0,
            "tool_rewards": [], "user_rewards": [], "invalid_calls": 0, "calls": 1, "response_length": 50,
            "num_turns": 4, "simulator_tokens": 10, "episode_id": "e", "task_key": "k", "reward": 1.0}
    calls = {1: 3, 2: 3, 3: 3, 4: 1, 5: 0}  # tool-calling turns of 4: shares 0.75, 0.75, 0.75, 0.25, 0
    curriculum = load_curriculum(settings)
    for step, turns in calls.items():
        step_episodes(episode_dir(settings), step).mkdir(parents=True)
        (step_episodes(episode_dir(settings), step) / "host-1.jsonl").write_text(
            json.dumps(dict(base, step=step, tool_call_turns=turns)) + "\n")
        with caplog.at_level(logging.WARNING, logger="toolcanary.train.canary"):
            close_step(settings, curriculum, step)
    rows = read_train_metrics(settings.run_results() / "train_metrics.csv")
    shifts = [r["tool_call_share_shift"] for r in rows]
    assert math.isnan(shifts[0]) and math.isnan(shifts[1])  # two steps make the start, a third is compared
    assert shifts[2:] == pytest.approx([0.0, (0.75 + 0.25) / 2 - 0.75, 0.25 / 2 - 0.75])
    assert [r["tool_call_canary"] for r in rows[2:]] == [0.0, 1.0, 1.0]
    warnings = [r.getMessage() for r in caplog.records if "tool-call canary" in r.getMessage()]
    assert len(warnings) == 2 and "at step 4" in warnings[0] and "-0.250" in warnings[0]
