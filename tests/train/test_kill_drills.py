"""Drills: the simulator killed mid-training and restarted; the trainer killed (SIGKILL) mid-step and restarted.

Both compare with a run of the same settings without a fault (`reference`), given its task-key tag: the CPU
run is deterministic (every request samples from its own seeded generator, the simulator's scripted backend
is seeded, and the same tag gives the same task keys), so
steps the fault did not touch must come out equal, row for row and checkpoint for checkpoint.

- Simulator killed while step 3's episodes are in flight (the real service over HTTP, SIGKILL), restarted
  on the same port 2 s later: those episodes abort with cause `upstream` (out of the loss: no policy token
  counted, reward 0), step 4 waits for the simulator and runs whole, no step is missing; steps 1-2 and
  their checkpoints equal the reference (from step 3 on the run trains on what step 3 kept, so it differs).
- Trainer killed twice: mid-rollout of step 3, then right after the trainer state of step 4 is written
  (inside the publish of step 4); restarted with the same run each time. train_metrics.csv holds steps 1-5
  once each, equal to the reference; episodes.jsonl and published.jsonl agree with it; every published
  checkpoint verifies and has the reference's weights.

Bounded: 5 GRPO steps of 2 x 2 episodes on the tiny policy per run, 127.0.0.1 only, each process stopped.
Run: .venvs/train/bin/python -m pytest tests/train/test_kill_drills.py -q
"""

from __future__ import annotations

import signal

import pytest
from drills import (
    SMALL,
    SimulatorProcess,
    episodes,
    metrics_rows,
    published,
    replay_tasks_of,
    same_rows,
    train,
    train_process,
    wait_for,
)

from toolcanary.train.publisher import verify_checkpoint

STEPS = 5
RUN_ARGS = ["--run", "drill", "--steps", str(STEPS), "--save-every", "1", "--simulator-wait-s", "120", *SMALL]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The fault-free run: its own simulator and roots, the same settings."""
    root = tmp_path_factory.mktemp("reference")
    sim = SimulatorProcess(root / "sim").start()
    try:
        done = train(root, *RUN_ARGS, "--simulator-url", sim.url)
    finally:
        sim.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    return root


def _checkpoints_verify(root) -> None:
    for step in published(root):
        verify_checkpoint(root / "checkpoints" / "drill" / f"step_{step:04d}")


@pytest.mark.slow
def test_drill_the_simulator_killed_mid_training_and_restarted(tmp_path, reference, drill):
    replay_tasks_of(reference, tmp_path)
    sim = SimulatorProcess(tmp_path / "sim").start()
    trainer = train_process(tmp_path, *RUN_ARGS, "--simulator-url", sim.url)
    try:
        assert wait_for(lambda: sim.records(3).exists(), 300, process=trainer), (tmp_path / "trainer.log").read_text()
        sim.kill()  # step 3's episodes are in flight: its first task calls were just answered
        killed_at = {s for s in range(1, STEPS + 1) if sim.records(s).exists()}
        wait_for(lambda: False, 2.0)  # past the client's retries (about 1 s): in-flight calls must give up
        sim.start()  # the same port, the same records: answered task keys are reloaded
        assert trainer.wait(timeout=300) == 0, (tmp_path / "trainer.log").read_text()[-3000:]
    finally:
        trainer.kill()
        sim.stop()
    assert killed_at == {1, 2, 3}
    rows, clean = metrics_rows(tmp_path), metrics_rows(reference)
    assert list(rows) == list(range(1, STEPS + 1))  # no step lost
    records = episodes(tmp_path)
    aborted = [e for e in records if e["outcome"] == "aborted"]
    assert aborted and {e["step"] for e in aborted} == {3}, [(e["step"], e["abort_cause"]) for e in aborted]
    assert {e["abort_cause"] for e in aborted} == {"upstream"}
    assert all(e["policy_tokens"] == 0 and e["reward"] == 0.0 for e in aborted)  # out of the loss and the groups
    assert rows[3]["aborted_upstream"] == len(aborted) and rows[3]["aborted_frac"] == len(aborted) / 4
    assert rows[4]["aborted_frac"] == 0 and rows[5]["aborted_frac"] == 0  # step 4 waited for the simulator
    untouched = [s for s in (1, 2) if same_rows(rows[s], clean[s])]
    assert untouched == [1, 2], {s: (rows[s], clean[s]) for s in (1, 2)}
    ours, theirs = published(tmp_path), published(reference)
    assert list(ours) == list(range(0, STEPS + 1))
    assert [s for s in (0, 1, 2) if ours[s] == theirs[s]] == [0, 1, 2]  # the same weights before the fault
    _checkpoints_verify(tmp_path)
    drill("simulator killed mid-training", faults_injected=1, survived=1, steps_lost=0,
          episodes_aborted=f"{len(aborted)} of 4 in step 3, cause upstream",
          steps_equal_to_the_fault_free_run="1-2 and checkpoints 0-2 (every step before the fault)")


@pytest.mark.slow
def test_drill_the_trainer_killed_mid_step_and_restarted(tmp_path, reference, drill):
    replay_tasks_of(reference, tmp_path)
    sim = SimulatorProcess(tmp_path / "sim").start()
    state = tmp_path / "runs" / "drill" / "trainer"
    ledger = tmp_path / "checkpoints" / "drill" / "published.jsonl"
    kills, started = [], []
    try:
        first = train_process(tmp_path, *RUN_ARGS, "--simulator-url", sim.url)
        started.append(first)
        assert wait_for(lambda: sim.records(3).exists(), 300, process=first)
        first.send_signal(signal.SIGKILL)  # in the middle of step 3's rollout
        first.wait(timeout=30)
        kills.append("mid-rollout of step 3")
        second = train_process(tmp_path, *RUN_ARGS, "--simulator-url", sim.url)
        started.append(second)
        assert wait_for(lambda: (state / "state_0004.pt").exists(), 300, process=second)
        second.send_signal(signal.SIGKILL)  # the state of step 4 is saved, its checkpoint being published
        second.wait(timeout=30)
        announced = '"step": 4' in (ledger.read_text() if ledger.exists() else "")
        kills.append("inside the publish of step 4" + ("" if not announced else " (after its announcement)"))
        third = train(tmp_path, *RUN_ARGS, "--simulator-url", sim.url)
        assert third.returncode == 0, third.stderr[-3000:]
    finally:
        for process in started:
            process.kill()
            process.wait(timeout=30)
        sim.stop()
    rows, clean = metrics_rows(tmp_path), metrics_rows(reference)
    assert list(rows) == list(range(1, STEPS + 1))  # no step missing, none twice (the reader refuses repeats)
    differing = [s for s in rows if not same_rows(rows[s], clean[s])]
    assert differing == [], {s: (rows[s], clean[s]) for s in differing}
    records = episodes(tmp_path)
    assert sorted(e["episode_id"] for e in records) == sorted(e["episode_id"] for e in episodes(reference))
    assert len({e["episode_id"] for e in records}) == len(records) == 4 * STEPS
    ours = published(tmp_path)
    assert ours == published(reference)  # steps 0-5, once each, the same weights
    _checkpoints_verify(tmp_path)
    drill("trainer killed mid-step", faults_injected=len(kills), survived=len(kills), kills="; ".join(kills),
          rows=f"{len(rows)} (steps 1-{STEPS} once each, equal to the fault-free run)", rows_lost=0,
          duplicate_rows=0, checkpoints=f"{len(ours)} published once each, weights equal to the fault-free run")
