"""The GPU recipe's glue, on CPU: the classes verl loads by name import and resolve, the registry YAML
points at the loop, a verl save is published with the curriculum level, and finished steps fold into
train_metrics.csv and the curriculum.

Run: .venvs/train/bin/python -m pytest tests/train/test_verl_hooks.py -q
"""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path

import pytest
import yaml
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
from verl.trainer.ppo.checkpoint_callback import CheckpointCallback
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ
from verl.utils.import_utils import load_class_from_fqn

from toolcanary.contract.csv_schemas import read_train_metrics
from toolcanary.contract.errors import ContractError
from toolcanary.train.curriculum import Curriculum
from toolcanary.train.publisher import read_published, verify_checkpoint
from toolcanary.train.settings import TrainSettings
from toolcanary.train.verl_hooks import (
    PublishingCheckpointCallback,
    assign_specs,
    close_step,
    episode_dir,
    load_curriculum,
    save_curriculum,
)

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "trustee-qwen3-4b"


def test_recipe_names_classes_that_resolve():
    script = (RECIPE / "train.sh").read_text()
    manager = re.search(r"agent_loop_manager_class=(\S+)", script).group(1)
    callback = re.search(r"checkpoint_callback_class=(\S+)", script).group(1)
    assert issubclass(load_class_from_fqn(manager, "AgentLoopManager"), AgentLoopManagerTQ)
    assert issubclass(load_class_from_fqn(callback, "CheckpointCallback"), CheckpointCallback)
    entry = yaml.safe_load((RECIPE / "agent_loops.yaml").read_text())[0]
    assert entry["name"] in _agent_loop_registry
    assert _agent_loop_registry[entry["name"]]["_target_"] == entry["_target_"]
    for flag in ("rollout.n=8", "train_batch_size=16", "total_training_steps=200", "kl_loss_coef=0.001",
                 "save_freq=10", "strategy=fsdp2", "n_gpus_per_node=\"$GPUS_PER_NODE\""):
        assert flag in script


def test_rollouts_of_one_prompt_share_a_task_key():
    rows = assign_specs(["u1", "u1", "u2", "u1"], Curriculum(level=52, epsilon=0.0), step=7, run="r",
                        rng=random.Random(0))
    keys = [r["task_key"] for r in rows]
    assert keys[0] == keys[1] == keys[3] != keys[2]
    assert len({r["episode_id"] for r in rows}) == 4
    assert all(r["max_assistant_turns"] == 3 and r["curriculum_level"] == 52 and r["step"] == 7 for r in rows)


def _settings(tmp_path) -> TrainSettings:
    return TrainSettings.from_env({"TOOLCANARY_CHECKPOINTS_DIR": str(tmp_path / "ck"),
                                   "TOOLCANARY_RESULTS_DIR": str(tmp_path / "res"),
                                   "TOOLCANARY_RUNS_DIR": str(tmp_path / "runs"), "TOOLCANARY_TRAIN_RUN": "g"})


def test_finished_steps_fold_into_metrics_and_the_curriculum(tmp_path):
    settings = _settings(tmp_path)
    curriculum = load_curriculum(settings)
    folder = episode_dir(settings)
    folder.mkdir(parents=True)
    base = {"outcome": "ok", "tool_call_turns": 1, "response_turns": 1, "assistant_turns": 2, "tool_turns": 1,
            "user_turns": 0, "tool_rewards": [1.0], "user_rewards": [], "invalid_calls": 0, "calls": 1,
            "response_length": 50, "num_turns": 4, "simulator_tokens": 10}
    lines = [dict(base, step=1, reward=1.0), dict(base, step=1, reward=0.0, outcome="aborted"),
             dict(base, step=2, reward=-1.0)]
    for number, line in enumerate(lines):
        (folder / f"worker-{number}.jsonl").write_text(json.dumps(line) + "\n")
    row = close_step(settings, curriculum, 1)
    assert row["reward_mean"] == 0.5 and row["aborted_frac"] == 0.5 and curriculum.level == 4
    assert load_curriculum(settings).level == 4  # persisted for a restart
    rows = read_train_metrics(settings.run_results() / "train_metrics.csv")
    assert [r["step"] for r in rows] == [1.0]
    assert close_step(settings, curriculum, 9) is None


def test_callback_publishes_verls_hf_folder_with_the_curriculum_level(tmp_path, tiny_dir, monkeypatch):
    settings = _settings(tmp_path)
    for key, value in {"TOOLCANARY_CHECKPOINTS_DIR": "ck", "TOOLCANARY_RESULTS_DIR": "res",
                       "TOOLCANARY_RUNS_DIR": "runs"}.items():
        monkeypatch.setenv(key, str(tmp_path / value))
    monkeypatch.setenv("TOOLCANARY_TRAIN_RUN", "g")
    save = tmp_path / "verl" / "global_step_10"
    shutil.copytree(tiny_dir, save / "actor" / "huggingface")
    callback = PublishingCheckpointCallback(config=None)
    with pytest.raises(ContractError, match="curriculum"):
        callback.on_save(trainer=None, global_step=10, checkpoint_dir=str(save))
    save_curriculum(settings, Curriculum(level=40))
    callback.on_save(trainer=None, global_step=10, checkpoint_dir=str(save))
    published = settings.run_checkpoints()
    manifest = verify_checkpoint(published / "step_0010")
    assert manifest.curriculum_level == 40 and manifest.step == 10
    assert read_published(published)[0]["path"] == "step_0010"
    (save / "actor" / "huggingface" / "model.safetensors").unlink()
    with pytest.raises(ContractError, match="hf_model"):
        callback.on_save(trainer=None, global_step=20, checkpoint_dir=str(save))
