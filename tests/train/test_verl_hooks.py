"""The GPU recipe's glue, on CPU: the classes verl loads by name import and resolve, the registry YAML
points at the loop, finished steps fold into train_metrics.csv and the curriculum (the last one too,
at its save), a restart that redoes steps rolls back, and a verl save is published in bf16 with the
curriculum level after its step and the thinking mode the recipe trains in.

Run: .venvs/train/bin/python -m pytest tests/train/test_verl_hooks.py -q
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import socket
from pathlib import Path

import pytest
import torch
import yaml
from conftest import GoldClient, fetch_task, run_episodes
from omegaconf import OmegaConf
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
from verl.trainer.ppo.checkpoint_callback import CheckpointCallback
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ
from verl.utils.import_utils import load_class_from_fqn

from toolcanary.contract.csv_schemas import read_train_metrics
from toolcanary.contract.errors import ContractError
from toolcanary.contract.training_files import step_episodes
from toolcanary.simulator.scripted import gold_trajectory
from toolcanary.train.curriculum import Curriculum
from toolcanary.train.gpu.verl_hooks import (
    PublishingCheckpointCallback,
    assign_specs,
    begin_step,
    close_step,
    episode_dir,
    load_curriculum,
    save_curriculum,
)
from toolcanary.train.publisher import read_published, verify_checkpoint
from toolcanary.train.rollout import step_specs
from toolcanary.train.settings import TrainSettings

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "trustee-qwen3-4b"


def test_recipe_names_classes_that_resolve():
    script = (RECIPE / "trustee_qwen3_4b.yaml").read_text()
    manager = re.search(r"agent_loop_manager_class: (\S+)", script).group(1)
    callback = re.search(r"checkpoint_callback_class: (\S+)", script).group(1)
    assert issubclass(load_class_from_fqn(manager, "AgentLoopManager"), AgentLoopManagerTQ)
    assert issubclass(load_class_from_fqn(callback, "CheckpointCallback"), CheckpointCallback)
    entry = yaml.safe_load((RECIPE / "agent_loops.yaml").read_text())[0]
    assert entry["name"] in _agent_loop_registry
    assert _agent_loop_registry[entry["name"]]["_target_"] == entry["_target_"]
    for flag in ("n: 8", "train_batch_size: 16", "total_training_steps: 200", "kl_loss_coef: 0.001",
                 "save_freq: 10", "strategy: fsdp2", "n_gpus_per_node: ${oc.decode:${oc.env:GPUS_PER_NODE,4}}"):
        assert flag in script


def test_rollouts_of_one_prompt_share_a_task_key():
    rows = assign_specs(["u1", "u1", "u2", "u1"], Curriculum(level=52, epsilon=0.0), step=7,
                        key_prefix="r-0123456789abcdef", rng=random.Random(0))
    keys = [r["task_key"] for r in rows]
    assert keys[0] == keys[1] == keys[3] != keys[2]
    assert len({r["episode_id"] for r in rows}) == 4
    assert rows[2]["episode_id"] == keys[2]  # verl appends each rollout's number to it
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
            "response_length": 50, "num_turns": 4, "simulator_tokens": 10, "episode_id": "e", "task_key": "k"}
    lines = [dict(base, step=1, reward=1.0), dict(base, step=1, reward=0.0, outcome="aborted"),
             dict(base, step=2, reward=-1.0)]
    for number, line in enumerate(lines):
        step_folder = step_episodes(folder, line["step"])
        step_folder.mkdir(exist_ok=True)
        (step_folder / f"worker-{number}.jsonl").write_text(json.dumps(line) + "\n")
    row = close_step(settings, curriculum, 1)
    assert row["reward_mean"] == 0.5 and row["aborted_frac"] == 0.5 and curriculum.level == 4
    assert load_curriculum(settings).level == 4  # persisted for a restart
    rows = read_train_metrics(settings.run_results() / "train_metrics.csv")
    assert [r["step"] for r in rows] == [1.0]
    assert close_step(settings, curriculum, 9) is None


def test_closing_a_step_reads_that_steps_episode_files_only(tmp_path, monkeypatch):
    """Closing step 200 must not re-read the 199 steps before it: their files are not opened (a broken one in
    an earlier step's folder does not matter), so a step closes in the same time at the end of a run."""
    import toolcanary.train.gpu.verl_hooks as hooks

    settings = _settings(tmp_path)
    folder = episode_dir(settings)
    base = {"outcome": "ok", "tool_call_turns": 1, "response_turns": 1, "assistant_turns": 2, "tool_turns": 1,
            "user_turns": 0, "tool_rewards": [], "user_rewards": [], "invalid_calls": 0, "calls": 1,
            "response_length": 50, "num_turns": 4, "simulator_tokens": 10, "episode_id": "e", "task_key": "k"}
    for step in (1, 2, 3):
        step_episodes(folder, step).mkdir(parents=True)
        (step_episodes(folder, step) / "host-1.jsonl").write_text(json.dumps(dict(base, step=step, reward=1.0)) + "\n")
    (step_episodes(folder, 1) / "host-2.jsonl").write_text("not a record\n{}\n")
    opened, read = [], hooks.read_episodes
    monkeypatch.setattr(hooks, "read_episodes", lambda path: opened.append(path) or read(path))
    row = close_step(settings, load_curriculum(settings), 3)
    assert row["reward_mean"] == 1.0
    assert opened == [step_episodes(folder, 3) / "host-1.jsonl"]


def test_the_agent_loop_files_each_episode_under_its_step_and_the_step_closes_from_there(
        tmp_path, tokenizer, scripted_url, rng):
    """The worker's side of the layout: a gold episode of step 7, played through the agent loop with the recipe's
    episode_log_dir, lands in episodes/step_0007/<host>-<pid>.jsonl, and closing step 7 finds it there."""
    settings = _settings(tmp_path)
    spec = step_specs(Curriculum(), step=7, groups=1, n=1, rng=rng, key_prefix="g-0123456789abcdef")[0]
    client = GoldClient(tokenizer, {spec.episode_id: gold_trajectory(fetch_task(scripted_url, spec))})
    run_episodes(tokenizer, client, scripted_url, [spec], episode_log_dir=str(episode_dir(settings)))
    files = sorted(p.relative_to(episode_dir(settings)).as_posix() for p in episode_dir(settings).rglob("*.jsonl"))
    assert files == [f"step_0007/{socket.gethostname()}-{os.getpid()}.jsonl"]
    row = close_step(settings, load_curriculum(settings), 7)
    assert row is not None and row["reward_mean"] == 1.0


def _recipe_config(thinking=True):
    return OmegaConf.create({"data": {"apply_chat_template_kwargs": {"enable_thinking": thinking}},
                             "actor_rollout_ref": {"model": {"path": "Qwen/Qwen3-4B"}}})


@pytest.fixture
def hook_env(tmp_path, monkeypatch) -> TrainSettings:
    for key, value in {"TOOLCANARY_CHECKPOINTS_DIR": "ck", "TOOLCANARY_RESULTS_DIR": "res",
                       "TOOLCANARY_RUNS_DIR": "runs"}.items():
        monkeypatch.setenv(key, str(tmp_path / value))
    monkeypatch.setenv("TOOLCANARY_TRAIN_RUN", "g")
    return _settings(tmp_path)


def test_callback_publishes_verls_hf_folder_with_the_curriculum_level(tmp_path, tiny_dir, hook_env):
    settings = hook_env
    save = tmp_path / "verl" / "global_step_10"
    shutil.copytree(tiny_dir, save / "actor" / "huggingface")
    callback = PublishingCheckpointCallback(config=_recipe_config())
    with pytest.raises(ContractError, match="curriculum"):
        callback.on_save(trainer=None, global_step=10, checkpoint_dir=str(save))
    save_curriculum(settings, Curriculum(level=40))
    callback.on_save(trainer=None, global_step=10, checkpoint_dir=str(save))
    published = settings.run_checkpoints()
    manifest = verify_checkpoint(published / "step_0010")
    assert manifest.curriculum_level == 40 and manifest.step == 10 and manifest.enable_thinking is True
    assert read_published(published)[0].path == "step_0010"
    (save / "actor" / "huggingface" / "model.safetensors").unlink()
    with pytest.raises(ContractError, match="hf_model"):
        callback.on_save(trainer=None, global_step=20, checkpoint_dir=str(save))
    with pytest.raises(ContractError, match="enable_thinking"):
        PublishingCheckpointCallback(config=_recipe_config(None)).on_save(
            trainer=None, global_step=30, checkpoint_dir=str(save))


def _finish_episodes(settings: TrainSettings, step: int, attempt: str, rewards: list[float]) -> None:
    """What the agent loops of one step leave behind: one record line per episode."""
    folder = step_episodes(episode_dir(settings), step)
    folder.mkdir(parents=True, exist_ok=True)
    base = {"outcome": "ok", "tool_call_turns": 1, "response_turns": 1, "assistant_turns": 2, "tool_turns": 1,
            "user_turns": 0, "tool_rewards": [], "user_rewards": [], "invalid_calls": 0, "calls": 1,
            "response_length": 50, "num_turns": 4, "simulator_tokens": 10, "split": "train", "episode_id": "e",
            "task_key": "k"}
    with (folder / f"worker-{step}-{attempt}.jsonl").open("a") as handle:
        for reward in rewards:
            handle.write(json.dumps(dict(base, step=step, attempt=attempt, reward=reward)) + "\n")


def test_every_step_closes_before_the_next_dispatch_and_the_last_at_its_save(tmp_path, tiny_dir, hook_env):
    settings = hook_env
    levels = []
    for step in (1, 2, 3):
        curriculum, attempt = begin_step(settings, step)
        levels.append(curriculum.level)
        _finish_episodes(settings, step, attempt, [1.0, 1.0])  # every step earns reward: the level climbs
    assert levels == [1, 4, 7]  # each draw sees the level after the step before it
    save = tmp_path / "verl" / "global_step_3"
    shutil.copytree(tiny_dir, save / "actor" / "huggingface")
    PublishingCheckpointCallback(config=_recipe_config()).on_save(trainer=None, global_step=3,
                                                                  checkpoint_dir=str(save))
    rows = read_train_metrics(settings.run_results() / "train_metrics.csv")
    assert [r["step"] for r in rows] == [1.0, 2.0, 3.0]  # the last step reached the CSV at its save
    assert [r["curriculum_level"] for r in rows] == [1.0, 4.0, 7.0]
    assert verify_checkpoint(settings.run_checkpoints() / "step_0003").curriculum_level == 10 == \
        load_curriculum(settings).level  # the level after step 3, not before it


def test_a_restart_that_redoes_steps_rolls_back_and_folds_only_the_new_attempt(hook_env):
    settings = hook_env
    for step in (1, 2):
        _, attempt = begin_step(settings, step)
        _finish_episodes(settings, step, attempt, [1.0, 1.0])
    begin_step(settings, 3)  # closes step 2: level 1 -> 4 -> 7, then the trainer is killed
    # verl restarts from the checkpoint of step 1 and redoes step 2, which this time earns nothing
    curriculum, attempt = begin_step(settings, 2)
    assert curriculum.level == 4  # the level after step 1, as the checkpoint saw it
    _finish_episodes(settings, 2, attempt, [-1.0, -1.0])
    curriculum, _ = begin_step(settings, 3)
    rows = read_train_metrics(settings.run_results() / "train_metrics.csv")
    assert [(r["step"], r["reward_mean"]) for r in rows] == [(1.0, 1.0), (2.0, -1.0)]  # no duplicate, no stale row
    assert curriculum.level == 1


def test_verls_fp32_hf_save_is_published_in_bf16(tmp_path, tiny_dir, hook_env):
    """verl's hf_model save writes FSDP's fp32 master weights under a config that says bfloat16."""
    settings = hook_env
    source = tmp_path / "verl" / "global_step_10" / "actor" / "huggingface"
    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
    model.save_pretrained(source, state_dict={k: v.float() for k, v in model.state_dict().items()})
    config = json.loads((source / "config.json").read_text())
    (source / "config.json").write_text(json.dumps({**config, "dtype": "bfloat16"}))
    shutil.copy(tiny_dir / "tokenizer.json", source)
    assert {t.dtype for t in load_file(source / "model.safetensors").values()} == {torch.float32}
    save_curriculum(settings, Curriculum(level=7))
    PublishingCheckpointCallback(config=_recipe_config()).on_save(trainer=None, global_step=10,
                                                                  checkpoint_dir=str(source.parent.parent))
    published = settings.run_checkpoints() / "step_0010"
    manifest = verify_checkpoint(published)
    tensors = load_file(published / "model.safetensors")
    assert {t.dtype for t in tensors.values()} == {torch.bfloat16} and manifest.dtype == "bfloat16"
    assert (published / "model.safetensors").stat().st_size < 0.6 * (source / "model.safetensors").stat().st_size
    reloaded = AutoModelForCausalLM.from_pretrained(published)
    assert reloaded.dtype == torch.bfloat16
    torch.testing.assert_close(tensors["model.norm.weight"].float(),
                               model.state_dict()["model.norm.weight"].bfloat16().float())
