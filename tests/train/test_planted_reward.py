"""A planted reward moves the policy the way it pays, through the real CPU trainer: on abstention tasks only,
declining is paid 1 and any call attempt -1 (malformed ones too), so within a few GRPO steps the tiny policy
calls tools less often in training and earns more. A sign error in the reward or the advantage, or a verifier
that pays a garbled call as a decline, fails it; and the tool-call canary fires on the shift.

Run: .venvs/train/bin/python -m pytest tests/train/test_planted_reward.py -q
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from statistics import fmean

import pytest

from toolcanary.contract.csv_schemas import read_train_metrics


@pytest.mark.slow
def test_paying_declines_lowers_the_training_tool_call_share(tmp_path):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TOOLCANARY_TRAIN_")},
           "TOOLCANARY_CHECKPOINTS_DIR": str(tmp_path / "checkpoints"),
           "TOOLCANARY_RESULTS_DIR": str(tmp_path / "results"), "TOOLCANARY_RUNS_DIR": str(tmp_path / "runs")}
    done = subprocess.run(
        [sys.executable, "-m", "toolcanary.train", "cpu", "--run", "planted", "--steps", "6", "--save-every", "6",
         "--seed", "1", "--no-call-fraction", "1.0", "--task-pool", "0", "--tasks-per-step", "4",
         "--rollouts-per-task", "4", "--canary-steps", "2", "--canary-shift", "0.1", "--quiet",
         "--log-level", "WARNING"], env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    results = tmp_path / "results" / "planted"
    episodes = [json.loads(line) for line in (results / "episodes.jsonl").read_text().splitlines()]
    finished = [e for e in episodes if e["outcome"] == "ok"]
    assert finished and all(not e["call_expected"] for e in episodes)
    # The planted reward, read back from what the trainer learned from: -1 for any attempt, 1 for a decline.
    assert {e["reward"] for e in finished if e["tool_call_turns"] > 0} == {-1.0}
    assert {e["reward"] for e in finished if e["tool_call_turns"] == 0} == {1.0}
    rows = read_train_metrics(results / "train_metrics.csv")
    shares, rewards = [r["tool_call_share"] for r in rows], [r["reward_mean"] for r in rows]
    assert fmean(shares[3:]) < fmean(shares[:2]) - 0.1, shares
    assert fmean(rewards[3:]) > fmean(rewards[:2]), rewards
    assert max(r["kl"] for r in rows) > 0.01  # the weights moved away from the starting policy
    assert any(r["tool_call_canary"] == 1.0 for r in rows) and "tool-call canary at step" in done.stderr
