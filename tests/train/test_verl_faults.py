"""The GPU hooks fail fast with the CPU run's code: the pre-flight before the first dispatch of a trainer
process, a bounded wait before later ones, the circuit breaker and the refused-token stop on every closed step.

`CurriculumAgentLoopManager.generate_sequences` is called as verl's trainer calls it, on a manager whose
verl half (the Ray workers) is replaced by a recorder of what would have been dispatched; the simulator is
the programmable stub on 127.0.0.1.

Run: .venvs/train/bin/python -m pytest tests/train/test_verl_faults.py -q
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from omegaconf import OmegaConf
from sim_stub import StubBehaviour, StubSimulator
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ

from toolcanary.common.trustee_checkout import PINNED_COMMIT
from toolcanary.contract.csv_schemas import read_train_metrics
from toolcanary.contract.training_files import step_episodes
from toolcanary.train.faults import TrainingStopped
from toolcanary.train.gpu.verl_hooks import (
    CurriculumAgentLoopManager,
    PublishingCheckpointCallback,
    episode_dir,
)
from toolcanary.train.publisher import read_published
from toolcanary.train.settings import TrainSettings
from toolcanary.train.simulator_check import SimulatorNotReady

BASE = {"outcome": "ok", "tool_call_turns": 1, "response_turns": 1, "assistant_turns": 2, "tool_turns": 1,
        "user_turns": 0, "tool_rewards": [], "user_rewards": [], "invalid_calls": 0, "calls": 1,
        "response_length": 50, "num_turns": 4, "simulator_tokens": 10, "split": "train", "reward": 1.0,
        "episode_id": "e", "task_key": "k"}


@pytest.fixture
def gpu_env(tmp_path, monkeypatch):
    """The trainer's environment as train.sh exports it, and a manager whose dispatches are recorded."""
    for key, value in {"TOOLCANARY_CHECKPOINTS_DIR": "ck", "TOOLCANARY_RESULTS_DIR": "res",
                       "TOOLCANARY_RUNS_DIR": "runs"}.items():
        monkeypatch.setenv(key, str(tmp_path / value))
    monkeypatch.setenv("TOOLCANARY_TRAIN_RUN", f"g-{tmp_path.name}")  # a fresh breaker per test
    monkeypatch.setenv("TOOLCANARY_TRAIN_SIMULATOR_WAIT_S", "2")
    # The mode the stub simulator plays unless a test says otherwise (the recipe's fixtures export trustee's).
    monkeypatch.setenv("TOOLCANARY_TRAIN_MODE", "toolcanary")
    monkeypatch.delenv("TOOLCANARY_TRAIN_TRUSTEE_DIR", raising=False)
    # The session's embedded simulator puts its token in this process's environment while it runs; a worker
    # here starts without one unless a test gives it one.
    monkeypatch.delenv("TOOLCANARY_SIMULATOR_TOKEN", raising=False)
    dispatched: list[int] = []
    monkeypatch.setattr(AgentLoopManagerTQ, "generate_sequences",
                        lambda self, prompts: dispatched.append(int(prompts["global_steps"])))
    manager = CurriculumAgentLoopManager.__new__(CurriculumAgentLoopManager)  # no Ray workers behind it
    return manager, dispatched, monkeypatch


def prompts(step: int, groups: int = 2) -> dict:
    return {"global_steps": step, "uid": np.array([f"u{g}" for g in range(groups)], dtype=object),
            "extra_info": [{} for _ in range(groups)]}


def finish(step: int, dispatched_rows, rewards=None, **overrides) -> None:
    """What the agent loops leave for a dispatched step: one record per row, of its attempt."""
    folder = step_episodes(episode_dir(TrainSettings.from_env()), step)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"worker-{step}.jsonl").open("a") as handle:
        for spec in dispatched_rows:
            handle.write(json.dumps({**BASE, **spec, **overrides}) + "\n")


def dispatch(manager, step: int) -> list[dict]:
    batch = prompts(step)
    CurriculumAgentLoopManager.generate_sequences(manager, batch)
    return batch["extra_info"].tolist()  # the specs the manager wrote into the rows


@pytest.mark.parametrize("behaviour, message", [
    (StubBehaviour(token="right"), "sent no token and it requires one"),
    (StubBehaviour(contract_version="0.9"), "speaks contract 0.9"),
    (StubBehaviour(ready_status=503), "is not ready: simulator unavailable: stub not ready"),
    (StubBehaviour(mode="trustee", trustee_commit=PINNED_COMMIT), "plays mode trustee .* this trainer runs mode "
                                                                   "toolcanary"),
])
def test_the_first_dispatch_of_a_trainer_process_needs_a_simulator_that_passes_the_preflight(
        gpu_env, behaviour, message):
    manager, dispatched, env = gpu_env
    with StubSimulator(behaviour) as sim:
        env.setenv("TOOLCANARY_TRAIN_SIMULATOR_URL", sim.url)
        with pytest.raises(SimulatorNotReady, match=message):
            dispatch(manager, 1)
        validation = {**prompts(1), "validate": True}  # validation before training is a first dispatch too
        with pytest.raises(SimulatorNotReady, match=message):
            CurriculumAgentLoopManager.generate_sequences(manager, validation)
    assert dispatched == []


def test_a_trustee_trainer_dispatches_only_against_a_trustee_simulator_of_its_commit(gpu_env, trustee_checkout,
                                                                                      standin_commit):
    manager, dispatched, env = gpu_env
    env.setenv("TOOLCANARY_TRAIN_MODE", "trustee")  # as train.sh exports it, for the agent loop and the manager
    env.setenv("TOOLCANARY_TRAIN_TRUSTEE_DIR", str(trustee_checkout))
    other = "0123456" + standin_commit[7:]
    for behaviour, message in [(StubBehaviour(mode="toolcanary"), "plays mode toolcanary .* runs mode trustee"),
                               (StubBehaviour(mode="trustee", trustee_commit=other), f"TRUSTEE at commit {other}")]:
        with StubSimulator(behaviour) as sim:
            env.setenv("TOOLCANARY_TRAIN_SIMULATOR_URL", sim.url)
            with pytest.raises(SimulatorNotReady, match=message):
                dispatch(manager, 1)
    assert dispatched == []
    with StubSimulator(StubBehaviour(mode="trustee", trustee_commit=standin_commit)) as sim:
        env.setenv("TOOLCANARY_TRAIN_SIMULATOR_URL", sim.url)
        dispatch(manager, 1)
    assert dispatched == [1]


def test_every_episode_aborting_stops_the_gpu_run_at_the_dispatch_after_k_steps(gpu_env, drill):
    manager, dispatched, env = gpu_env
    with StubSimulator() as sim:
        env.setenv("TOOLCANARY_TRAIN_SIMULATOR_URL", sim.url)
        for step in (1, 2, 3):
            rows = dispatch(manager, step)
            finish(step, rows, outcome="aborted", abort_cause="upstream", abort_role="task", reward=0.0,
                   abort_detail="/v1/task: HTTP 500: stub failure")
        with pytest.raises(TrainingStopped, match=r"circuit breaker: 3 steps in a row .* abort causes: upstream 6 "
                                                  r"\(task 6\)"):
            dispatch(manager, 4)
    assert dispatched == [1, 2, 3]  # step 4 was never dispatched
    rows = read_train_metrics(TrainSettings.from_env().run_results() / "train_metrics.csv")
    assert [(r["step"], r["aborted_upstream"]) for r in rows] == [(1.0, 2.0), (2.0, 2.0), (3.0, 2.0)]
    drill("circuit breaker (GPU hooks)", faults_injected="6 aborted episodes in 3 steps", steps_dispatched=3,
          stopped_before="the dispatch of step 4")


def test_a_refused_token_in_a_closed_step_stops_the_gpu_run_and_a_later_wait_is_bounded(gpu_env):
    manager, dispatched, env = gpu_env
    with StubSimulator() as sim:
        env.setenv("TOOLCANARY_TRAIN_SIMULATOR_URL", sim.url)
        finish(1, dispatch(manager, 1), outcome="aborted", abort_cause="auth", abort_role="tool", reward=0.0,
               abort_detail="/v1/tool: HTTP 401: missing or wrong bearer token")
        with pytest.raises(TrainingStopped, match="step 1: the simulator refused 2 of 2 episodes' calls"):
            dispatch(manager, 2)
    assert dispatched == [1]


def test_a_later_dispatch_waits_for_the_simulator_then_stops_with_the_last_problem(gpu_env):
    manager, dispatched, env = gpu_env
    with StubSimulator() as sim:
        env.setenv("TOOLCANARY_TRAIN_SIMULATOR_URL", sim.url)
        finish(1, dispatch(manager, 1))
        sim.behaviour.ready_status = 503  # the upstream went down and stays down past the 2 s wait
        with pytest.raises(SimulatorNotReady, match="is not ready.*for [0-9]+ s before step 2"):
            dispatch(manager, 2)
    assert dispatched == [1]


def test_a_stop_found_at_a_save_comes_after_the_checkpoint_is_published(gpu_env, tiny_dir, tmp_path):
    manager, dispatched, env = gpu_env
    with StubSimulator() as sim:
        env.setenv("TOOLCANARY_TRAIN_SIMULATOR_URL", sim.url)
        for step in (1, 2, 3):
            finish(step, dispatch(manager, step), outcome="aborted", abort_cause="timeout", abort_role="verify",
                   reward=0.0)
    save = tmp_path / "verl" / "global_step_3"
    shutil.copytree(tiny_dir, save / "actor" / "huggingface")
    config = OmegaConf.create({"data": {"apply_chat_template_kwargs": {"enable_thinking": True}},
                               "actor_rollout_ref": {"model": {"path": "Qwen/Qwen3-4B"}}})
    with pytest.raises(TrainingStopped, match="abort causes: timeout 6 \\(verify 6\\)"):
        PublishingCheckpointCallback(config=config).on_save(trainer=None, global_step=3, checkpoint_dir=str(save))
    assert [e.step for e in read_published(TrainSettings.from_env().run_checkpoints())] == [3]
