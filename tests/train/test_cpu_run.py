"""The CPU embedded run end to end through its CLI: it starts the real scripted simulator itself, trains
2 GRPO steps, publishes loadable checkpoints, writes warm_start.csv, train_metrics.csv and episodes.jsonl,
and resumes.

Run: .venvs/train/bin/python -m pytest tests/train/test_cpu_run.py -q
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from toolcanary.contract.csv_schemas import TRAIN_METRICS_COLUMNS, WARM_START_COLUMNS, read_train_metrics
from toolcanary.contract.errors import ContractError
from toolcanary.train.publisher import read_published, verify_checkpoint
from toolcanary.train.settings import TrainSettings

SMALL = ["--tasks-per-step", "2", "--rollouts-per-task", "2", "--warm-start-tasks", "4", "--warm-start-steps", "3",
         "--max-turn-tokens", "16", "--quiet", "--log-level", "WARNING"]


def _train(tmp_path, *args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    # The CPU run plays the project's rules unless a test says otherwise: the recipe's fixtures export train.sh's
    # trustee environment, which must not reach a trainer whose simulator plays toolcanary.
    inherited = {k: v for k, v in os.environ.items() if k not in ("TOOLCANARY_TRAIN_MODE", "TOOLCANARY_TRAIN_TRUSTEE_DIR")}
    env = {**inherited, "TOOLCANARY_CHECKPOINTS_DIR": str(tmp_path / "checkpoints"),
           "TOOLCANARY_RESULTS_DIR": str(tmp_path / "results"), "TOOLCANARY_RUNS_DIR": str(tmp_path / "runs"),
           **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "toolcanary.train", *args], env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.slow
def test_two_steps_end_to_end_then_resume(tmp_path):
    canary = ["--canary-steps", "1", "--canary-shift", "0.0001"]  # compared from step 2 on, warns on almost any move
    done = _train(tmp_path, "cpu", "--run", "e2e", "--steps", "2", "--save-every", "1", *SMALL, *canary)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["resumed_from"] == 0 and summary["last_step"] == 2

    run_dir = tmp_path / "checkpoints" / "e2e"
    assert [e.step for e in read_published(run_dir)] == [0, 1, 2]
    for entry in read_published(run_dir):
        folder = run_dir / entry.path
        manifest = verify_checkpoint(folder)
        assert manifest.step == entry.step and manifest.weights_sha256 == entry.weights_sha256
        assert AutoModelForCausalLM.from_pretrained(folder).config.architectures == ["Qwen3ForCausalLM"]
        assert "<tool_call>" in AutoTokenizer.from_pretrained(folder).chat_template

    warm = (tmp_path / "results" / "e2e" / "warm_start.csv").read_text().splitlines()
    assert warm[0] == ",".join(WARM_START_COLUMNS) and [int(r.split(",")[0]) for r in warm[1:]] == [1, 2, 3]
    assert all(math.isfinite(float(r.split(",")[1])) for r in warm[1:])

    metrics_csv = tmp_path / "results" / "e2e" / "train_metrics.csv"
    header = metrics_csv.read_text().splitlines()[0].split(",")
    assert tuple(header) == TRAIN_METRICS_COLUMNS
    rows = read_train_metrics(metrics_csv)
    assert [r["step"] for r in rows] == [1.0, 2.0] and all(r["curriculum_level"] >= 1 for r in rows)
    episodes = [json.loads(line) for line in (tmp_path / "results" / "e2e" / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 8 and {e["step"] for e in episodes} == {1, 2}
    for step in (1, 2):
        assert rows[step - 1]["reward_mean"] == pytest.approx(
            sum(e["reward"] for e in episodes if e["step"] == step) / 4)
    # Every group's members faced the same task; the simulator persisted its records for the run.
    by_key: dict[str, set] = {}
    for e in episodes:
        by_key.setdefault(e["task_key"], set()).add(e["task_id"])
    assert all(len(ids) == 1 for ids in by_key.values())
    assert list((tmp_path / "runs" / "e2e" / "simulator").glob("*.jsonl"))

    state_level = json.loads((run_dir / "step_0002" / "manifest.json").read_text())["curriculum_level"]
    resumed = _train(tmp_path, "cpu", "--run", "e2e", "--steps", "3", "--save-every", "1", *SMALL, *canary)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads(resumed.stdout)
    assert summary["resumed_from"] == 2
    rows = read_train_metrics(metrics_csv)
    assert [r["step"] for r in rows] == [1.0, 2.0, 3.0]
    assert rows[2]["curriculum_level"] == state_level  # step 3 starts where step 2's update left the level
    assert [e.step for e in read_published(run_dir)] == [0, 1, 2, 3]
    assert (tmp_path / "results" / "e2e" / "warm_start.csv").read_text().splitlines() == warm  # not redone
    # The tool-call canary: each step's share against step 1's, across the resume, read back from the file.
    shares = [r["tool_call_share"] for r in rows]
    assert math.isnan(rows[0]["tool_call_share_shift"]) and math.isnan(rows[0]["tool_call_canary"])
    for row, share in zip(rows[1:], shares[1:], strict=True):
        assert row["tool_call_share_shift"] == pytest.approx(share - shares[0], abs=1e-5)
        assert row["tool_call_canary"] == float(abs(share - shares[0]) > 0.0001)
    warned = (done.stderr + resumed.stderr).count("tool-call canary at step")
    assert warned == sum(r["tool_call_canary"] == 1.0 for r in rows)


def test_cli_help_has_examples_and_bad_settings_are_explained(tmp_path):
    shown = _train(tmp_path, "cpu", "--help")
    assert shown.returncode == 0 and "examples:" in shown.stdout and "--simulator-url" in shown.stdout
    bad_env = _train(tmp_path, "cpu", "--run", "x", env_extra={"TOOLCANARY_TRAIN_STEPS": "many"})
    assert bad_env.returncode == 2 and "TOOLCANARY_TRAIN_STEPS" in bad_env.stderr and "'many'" in bad_env.stderr
    bad_run = _train(tmp_path, "cpu", "--run", "../escape")
    assert bad_run.returncode == 2 and "--run" in bad_run.stderr
    bad_group = _train(tmp_path, "cpu", "--run", "x", "--rollouts-per-task", "1")
    assert bad_group.returncode == 2 and "GRPO needs a group" in bad_group.stderr


def test_a_named_policy_brings_its_preset_below_environment_and_flags():
    assert TrainSettings.from_env({}).lr == 1e-4 and TrainSettings.from_env({}).policy == "tiny"
    smol = TrainSettings.from_env({}, policy="smollm2")
    assert (smol.lr, smol.torch_threads, smol.max_turn_tokens) == (1e-6, 2, 128)
    assert TrainSettings.from_env({"TOOLCANARY_TRAIN_POLICY": "smollm2"}).lr == 1e-6
    assert TrainSettings.from_env({"TOOLCANARY_TRAIN_LR": "1e-5"}, policy="smollm2").lr == 1e-5
    assert TrainSettings.from_env({}, policy="smollm2", warm_start_steps=3).warm_start_steps == 3
    with pytest.raises(ContractError, match="one of \\['smollm2', 'tiny'\\] or a folder"):
        TrainSettings.from_env({}, policy="gpt-5")
