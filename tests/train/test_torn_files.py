"""Drill (torn tails, the trainer's files): published.jsonl, episodes.jsonl, train_metrics.csv and a GPU
worker's episode file, each truncated mid-line, appended to by its own writer and read by its own reader:
nothing lost but the torn line, which is reported. The old announce() glued the next step onto a torn line,
after which the ledger could no longer be read.

Run: .venvs/train/bin/python -m pytest tests/train/test_torn_files.py -q
"""

from __future__ import annotations

import logging
import math

import pytest

from toolcanary.contract.csv_schemas import read_train_metrics
from toolcanary.contract.errors import ContractError
from toolcanary.contract.training_files import EpisodeRecord, step_episodes
from toolcanary.train.gpu.verl_hooks import close_step, episode_dir, load_curriculum
from toolcanary.train.publisher import announce, read_published
from toolcanary.train.settings import TrainSettings
from toolcanary.train.step_metrics import (
    UpdateStats,
    append_episodes,
    append_metrics_row,
    drop_steps_after,
    read_episodes,
    step_row,
)

BASE = {"outcome": "ok", "tool_call_turns": 1, "response_turns": 1, "assistant_turns": 2, "tool_turns": 1,
        "user_turns": 0, "tool_rewards": [1.0], "user_rewards": [], "invalid_calls": 0, "calls": 1,
        "response_length": 50, "num_turns": 4, "simulator_tokens": 10, "split": "train", "task_key": "k"}


def record(step: int, n: int, **overrides) -> EpisodeRecord:
    return EpisodeRecord(**{**BASE, "step": step, "episode_id": f"s{step}-e{n}", "reward": 1.0, **overrides})


def tear(path, keep: int) -> str:
    """Cut `path` `keep` bytes into its last line, as a writer killed there would; returns the torn text."""
    data = path.read_bytes()
    start = data.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(data[: start + keep])
    return data[start: start + keep].decode()


def row(step: int) -> dict:
    return step_row(step, [record(step, 0), record(step, 1, outcome="aborted", abort_cause="timeout",
                                                   abort_role="tool", reward=0.0)],
                    level=1, update=UpdateStats(kl=0.01, entropy=1.5), step_seconds=2.5)


def test_drill_each_trainer_file_truncated_mid_line_loses_only_the_torn_line(tmp_path, caplog, drill):
    caplog.set_level(logging.WARNING)
    checkpoints, results = tmp_path / "checkpoints", tmp_path / "results"
    for step in (0, 10, 20):
        announce(checkpoints, step, f"sha-{step}")
    tear(checkpoints / "published.jsonl", 25)
    assert [e.step for e in read_published(checkpoints)] == [0, 10]  # the torn last line: skipped, reported
    announce(checkpoints, 30, "sha-30")
    ledger = [e.step for e in read_published(checkpoints)]

    episodes = results / "episodes.jsonl"
    for step in (1, 2, 3):
        append_episodes(episodes, [record(step, 0), record(step, 1)])
    tear(episodes, 40)
    append_episodes(episodes, [record(4, 0), record(4, 1)])
    kept = [(e.step, e.episode_id) for e in read_episodes(episodes)]

    metrics = results / "train_metrics.csv"
    for step in (1, 2, 3):
        append_metrics_row(metrics, row(step))
    tear(metrics, 30)
    append_metrics_row(metrics, row(4))
    rows = read_train_metrics(metrics)

    settings = TrainSettings.from_env({"TOOLCANARY_CHECKPOINTS_DIR": str(checkpoints), "TOOLCANARY_RESULTS_DIR":
                                       str(results), "TOOLCANARY_RUNS_DIR": str(tmp_path / "runs"),
                                       "TOOLCANARY_TRAIN_RUN": "g"})
    worker = step_episodes(episode_dir(settings), 1) / "host-1.jsonl"
    worker.parent.mkdir(parents=True)
    worker.write_text("".join(record(1, n).model_dump_json() + "\n" for n in range(3)))
    tear(worker, 33)  # the worker was killed writing its third episode; the driver closes the step anyway
    closed = close_step(settings, load_curriculum(settings), 1)

    assert ledger == [0, 10, 30]
    assert kept == [(1, "s1-e0"), (1, "s1-e1"), (2, "s2-e0"), (2, "s2-e1"), (3, "s3-e0"), (4, "s4-e0"), (4, "s4-e1")]
    assert [r["step"] for r in rows] == [1.0, 2.0, 4.0]
    assert rows[-1]["aborted_timeout"] == 1.0 and rows[-1]["aborted_upstream"] == 0.0
    assert closed["aborted_frac"] == 0.0 and closed["reward_mean"] == 1.0  # two whole episodes of three
    reported = [r.getMessage() for r in caplog.records if "is torn" in r.getMessage()]
    fenced = [m for m in reported if "fenced off, the next line starts fresh" in m]
    assert len(fenced) == 3  # published.jsonl, episodes.jsonl, train_metrics.csv; the worker's is the last line
    assert any("host-1.jsonl" in m for m in reported)
    drill("torn tails [published.jsonl, episodes.jsonl, train_metrics.csv, a GPU worker's episodes]",
          faults_injected=4, survived=4, lines_lost="1 per file (the torn one)",
          reported=f"{len(fenced)} fenced by the next writer, {len(reported) - len(fenced)} reader warnings")


def test_a_resume_rewrites_the_files_whole_and_drops_torn_lines_with_the_steps_it_redoes(tmp_path):
    metrics, episodes = tmp_path / "train_metrics.csv", tmp_path / "episodes.jsonl"
    for step in (1, 2, 3):
        append_metrics_row(metrics, row(step))
        append_episodes(episodes, [record(step, 0)])
    tear(metrics, 12)
    tear(episodes, 12)
    drop_steps_after(metrics, episodes, 1)
    assert [r["step"] for r in read_train_metrics(metrics)] == [1.0]
    assert [e.step for e in read_episodes(episodes)] == [1]
    assert metrics.read_text().endswith("\n") and not list(tmp_path.glob(".*.torn"))


def test_a_ledger_line_broken_in_the_middle_is_refused_with_its_number(tmp_path):
    ledger = tmp_path / "published.jsonl"
    ledger.write_text('{"step": 0, "path": "step_0000", "weights_sha256": "a"}\n{"step": 10, "pa'
                      '{"step": 20, "path": "step_0020", "weights_sha256": "c"}\n')  # the old glued append
    with pytest.raises(ContractError, match="published.jsonl: line 2: expected a JSON object"):
        read_published(tmp_path)


def test_step_rows_count_aborts_by_cause_and_refuse_an_unknown_cause():
    records = [record(1, 0), record(1, 1, outcome="aborted", abort_cause="upstream", abort_role="task"),
               record(1, 2, outcome="aborted", abort_cause="too_large", abort_role="tool")]
    counts = step_row(1, records, level=1, step_seconds=math.nan)
    assert (counts["aborted_upstream"], counts["aborted_too_large"], counts["aborted_auth"]) == (1, 1, 0)
    assert counts["aborted_frac"] == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="abort causes \\['gremlins'\\]"):
        step_row(1, [record(1, 0, outcome="aborted", abort_cause="gremlins")], level=1, step_seconds=1.0)
