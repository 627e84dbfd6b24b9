"""Two CPU runs of one seed are the same run: the same train_metrics.csv rows, the same checkpoint weights, the
same starting-policy cache key, on two volume roots (two machines), and again when one replays the other's tasks.

Each run has its own private task-key tag (toolcanary.train.task_keys), so their keys differ; what a task is comes
from its draw (the seed and its place), and sampling from the episode id after the private prefix.

Run: .venvs/train/bin/python -m pytest tests/train/test_reproducible_runs.py -q
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolcanary.contract.csv_schemas import TRAIN_METRICS_COLUMNS
from toolcanary.contract.training_files import read_episodes
from toolcanary.train.publisher import read_published

SMALL = ["--steps", "2", "--save-every", "1", "--tasks-per-step", "2", "--rollouts-per-task", "2",
         "--warm-start-tasks", "4", "--warm-start-steps", "3", "--max-turn-tokens", "16", "--seed", "3",
         "--quiet", "--log-level", "WARNING"]
# The wall-clock time of a step is the one column that is not a function of the run's inputs.
TIMED = TRAIN_METRICS_COLUMNS.index("step_seconds")


def _run(root: Path, run: str, *extra: str) -> dict:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("TOOLCANARY_TRAIN_")}
    env = {**inherited, "TOOLCANARY_CHECKPOINTS_DIR": str(root / "checkpoints"),
           "TOOLCANARY_RESULTS_DIR": str(root / "results"), "TOOLCANARY_RUNS_DIR": str(root / "runs")}
    done = subprocess.run([sys.executable, "-m", "toolcanary.train", "cpu", "--run", run, *SMALL,
                           "--starting-policy-cache", str(root / "cache"), *extra],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = root / "results" / run
    rows = [line.split(",") for line in (results / "train_metrics.csv").read_text().splitlines()]
    return {
        "rows": [row[:TIMED] + row[TIMED + 1:] for row in rows],
        "weights": {e.step: e.weights_sha256 for e in read_published(root / "checkpoints" / run)},
        "cache_keys": sorted(p.name for p in (root / "cache").iterdir() if p.is_dir()),
        "episodes": [(r.step, r.task_id, r.reward, json.dumps(r.transcript)) for r in read_episodes(results / "episodes.jsonl")],
        "keys": {r.task_key for r in read_episodes(results / "episodes.jsonl")},
    }


@pytest.mark.slow
def test_two_fresh_runs_of_one_seed_and_a_replay_of_one_give_the_same_rows_and_weights(tmp_path):
    first = _run(tmp_path / "machine-a", "rep-a")
    second = _run(tmp_path / "machine-b", "rep-b")
    assert first["keys"].isdisjoint(second["keys"])  # private keys: nothing in common but what they name
    assert len(first["rows"]) == 3 and first["rows"] == second["rows"]
    assert sorted(first["weights"]) == [0, 1, 2] and first["weights"] == second["weights"]
    assert len(first["cache_keys"]) == 1 and first["cache_keys"] == second["cache_keys"]
    assert first["episodes"] == second["episodes"]

    replayed = _run(tmp_path / "machine-a", "rep-c", "--replay-tasks-of", "rep-a")
    assert replayed["rows"] == first["rows"] and replayed["weights"] == first["weights"]
    assert replayed["episodes"] == first["episodes"]
    # Every task of the replaying run was answered from rep-a's records (none was authored afresh, none refused).
    records = [json.loads(line) for path in (tmp_path / "machine-a" / "runs" / "rep-c" / "simulator").glob("step_*.jsonl")
               for line in path.read_text().splitlines()]
    tasks = [r for r in records if r["role"] == "task"]
    assert tasks and all(r["outcome"] == "ok" and r["request"]["draw"] for r in tasks)


def test_a_replay_needs_the_simulator_the_run_starts(tmp_path):
    done = subprocess.run([sys.executable, "-m", "toolcanary.train", "cpu", "--run", "r", "--replay-tasks-of", "a",
                           "--simulator-url", "http://127.0.0.1:9"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TOOLCANARY_RUNS_DIR": str(tmp_path)})
    assert done.returncode != 0
    assert "--replay-tasks-of" in done.stderr and "Start that simulator with --replay-tasks-of" in done.stderr
