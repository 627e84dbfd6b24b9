"""What the simulator trained on (`toolcanary.analysis.training_distribution`): a hand-built set of episode
records, written with the contract's writer in the CPU run's single file and in the GPU run's per-step
folders, gives the per-step and per-level tables computed by hand below; the direction line names the
planted direction; a run without records says so; a malformed record stops the command naming its file.

    .venvs/analysis/bin/python -m pytest tests/analysis/test_training_distribution.py -q
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from toolcanary.analysis.__main__ import main
from toolcanary.contract.csv_schemas import TRAIN_METRICS_COLUMNS
from toolcanary.contract.training_files import EPISODES_DIR, EPISODES_FILE, append_episodes, step_episodes


def episode(step: int, task: str, *, level: int, call_expected: bool = True, expected_calls: int | None = 1,
            calls: int = 0, turns: int = 1, reward: float = 0.0, aborted: bool = False, penalty: bool = False,
            split: str = "train", attempt: str | None = None, n: int = 0) -> dict:
    """One EpisodeRecord as a dict: `calls` tool-calling turns out of `turns` assistant turns."""
    return {"step": step, "episode_id": f"{task}-{n}-{split}", "task_key": task, "call_expected": call_expected,
            "expected_calls": expected_calls, "curriculum_level": level, "split": split, "attempt": attempt,
            "outcome": "aborted" if aborted else "ok", "reward": reward, "tool_call_turns": calls,
            "assistant_turns": turns, "no_call_penalty": penalty}


ABSTAIN = {"call_expected": False, "expected_calls": 0}
RECORDS = [
    # step 1, level 1: an abstention task (one decline, one call), a task expecting 2 calls (one penalised
    # decline, one call), a call task left without an expected call (one penalised decline, one aborted)
    episode(1, "a1", level=1, **ABSTAIN, reward=1.0),
    episode(1, "a1", level=1, **ABSTAIN, calls=1, turns=2, reward=-1.0, n=1),
    episode(1, "c1", level=1, expected_calls=2, reward=-1.0, penalty=True),
    episode(1, "c1", level=1, expected_calls=2, calls=2, turns=3, reward=0.8, n=1),
    episode(1, "n1", level=1, expected_calls=0, reward=-1.0, penalty=True),
    episode(1, "n1", level=1, expected_calls=0, turns=0, aborted=True, n=1),
    # step 2, level 1: a call task whose records predate expected_calls, a call task, an abstention task
    # whose first episode aborted (not a decline)
    episode(2, "r2", level=1, expected_calls=None, reward=-0.5),
    episode(2, "r2", level=1, expected_calls=None, calls=1, reward=1.0, n=1),
    episode(2, "c2", level=1, calls=1, turns=2, reward=0.5),
    episode(2, "c2", level=1, calls=1, reward=1.0, n=1),
    episode(2, "a2", level=1, **ABSTAIN, turns=0, aborted=True),
    episode(2, "a2", level=1, **ABSTAIN, reward=0.7, n=1),
    # step 3, level 2: two declines on an abstention task; a no-expected-call task whose first episode aborted
    # before it got its task (expected_calls None) while its mate recorded 0; a task expecting 3 calls
    episode(3, "a3", level=2, **ABSTAIN, reward=0.9),
    episode(3, "a3", level=2, **ABSTAIN, reward=0.6, n=1),
    episode(3, "n3", level=2, expected_calls=None, turns=0, aborted=True),
    episode(3, "n3", level=2, expected_calls=0, reward=-1.0, penalty=True, n=1),
    episode(3, "c3", level=2, expected_calls=3, calls=2, turns=2, reward=1.0),
    episode(3, "c3", level=2, expected_calls=3, calls=1, turns=3, reward=0.2, n=1),
    # step 4, level 2: one call task, one call and one penalised decline
    episode(4, "c4", level=2, calls=1, reward=1.0),
    episode(4, "c4", level=2, reward=-1.0, penalty=True, n=1),
    # held-out validation episodes: declines on abstention tasks, at a level no training episode has
    episode(1, "v1", level=3, **ABSTAIN, reward=1.0, split="val"),
    episode(4, "v4", level=3, **ABSTAIN, reward=1.0, split="val"),
]

# Worked out by hand from RECORDS. Declines count finished episodes with no tool-calling turn; "call" is every
# task with call_expected true (expected calls listed, none listed, or not recorded).
BY_STEP = {
    1: {"curriculum_level": "1", "attempts": 1, "tasks": 3, "episodes": 6, "aborted": 1,
        "abstention_task_share": 1 / 3, "no_expected_call_task_share": 1 / 3, "no_call_task_share": 2 / 3,
        "not_recorded_task_share": 0.0,
        "ok_episodes_abstention": 2, "declines_abstention": 1, "decline_share_abstention": 0.5,
        "decline_reward_abstention": 1.0,
        "ok_episodes_call": 3, "declines_call": 2, "decline_share_call": 2 / 3, "decline_reward_call": -1.0,
        "ok_episodes_no_expected_call": 1, "declines_no_expected_call": 1, "decline_share_no_expected_call": 1.0,
        "decline_reward_no_expected_call": -1.0,
        "declines_penalized": 2, "tool_call_turns": 3, "assistant_turns": 8, "tool_call_share": 3 / 8},
    2: {"curriculum_level": "1", "attempts": 1, "tasks": 3, "episodes": 6, "aborted": 1,
        "abstention_task_share": 1 / 3, "no_expected_call_task_share": 0.0, "no_call_task_share": 1 / 3,
        "not_recorded_task_share": 1 / 3,
        "ok_episodes_abstention": 1, "declines_abstention": 1, "decline_share_abstention": 1.0,
        "decline_reward_abstention": 0.7,
        "ok_episodes_call": 4, "declines_call": 1, "decline_share_call": 0.25, "decline_reward_call": -0.5,
        "ok_episodes_no_expected_call": 0, "declines_no_expected_call": 0, "decline_share_no_expected_call": None,
        "decline_reward_no_expected_call": None,
        "declines_penalized": 0, "tool_call_turns": 3, "assistant_turns": 6, "tool_call_share": 0.5},
    3: {"curriculum_level": "2", "attempts": 1, "tasks": 3, "episodes": 6, "aborted": 1,
        "abstention_task_share": 1 / 3, "no_expected_call_task_share": 1 / 3, "no_call_task_share": 2 / 3,
        "not_recorded_task_share": 0.0,
        "ok_episodes_abstention": 2, "declines_abstention": 2, "decline_share_abstention": 1.0,
        "decline_reward_abstention": 0.75,
        "ok_episodes_call": 3, "declines_call": 1, "decline_share_call": 1 / 3, "decline_reward_call": -1.0,
        "ok_episodes_no_expected_call": 1, "declines_no_expected_call": 1, "decline_share_no_expected_call": 1.0,
        "decline_reward_no_expected_call": -1.0,
        "declines_penalized": 1, "tool_call_turns": 3, "assistant_turns": 8, "tool_call_share": 3 / 8},
    4: {"curriculum_level": "2", "attempts": 1, "tasks": 1, "episodes": 2, "aborted": 0,
        "abstention_task_share": 0.0, "no_expected_call_task_share": 0.0, "no_call_task_share": 0.0,
        "not_recorded_task_share": 0.0,
        "ok_episodes_abstention": 0, "declines_abstention": 0, "decline_share_abstention": None,
        "decline_reward_abstention": None,
        "ok_episodes_call": 2, "declines_call": 1, "decline_share_call": 0.5, "decline_reward_call": -1.0,
        "ok_episodes_no_expected_call": 0, "declines_no_expected_call": 0, "decline_share_no_expected_call": None,
        "decline_reward_no_expected_call": None,
        "declines_penalized": 1, "tool_call_turns": 1, "assistant_turns": 2, "tool_call_share": 0.5},
}
BY_LEVEL = {
    1: {"steps": 2, "first_step": 1, "last_step": 2, "tasks": 6, "episodes": 12, "aborted": 2,
        "abstention_task_share": 2 / 6, "no_expected_call_task_share": 1 / 6, "no_call_task_share": 3 / 6,
        "not_recorded_task_share": 1 / 6,
        "ok_episodes_abstention": 3, "declines_abstention": 2, "decline_share_abstention": 2 / 3,
        "decline_reward_abstention": (1.0 + 0.7) / 2,
        "ok_episodes_call": 7, "declines_call": 3, "decline_share_call": 3 / 7,
        "decline_reward_call": (-1.0 - 1.0 - 0.5) / 3,
        "ok_episodes_no_expected_call": 1, "declines_no_expected_call": 1, "decline_share_no_expected_call": 1.0,
        "decline_reward_no_expected_call": -1.0,
        "declines_penalized": 2, "tool_call_turns": 6, "assistant_turns": 14, "tool_call_share": 6 / 14},
    2: {"steps": 2, "first_step": 3, "last_step": 4, "tasks": 4, "episodes": 8, "aborted": 1,
        "abstention_task_share": 1 / 4, "no_expected_call_task_share": 1 / 4, "no_call_task_share": 2 / 4,
        "not_recorded_task_share": 0.0,
        "ok_episodes_abstention": 2, "declines_abstention": 2, "decline_share_abstention": 1.0,
        "decline_reward_abstention": 0.75,
        "ok_episodes_call": 5, "declines_call": 2, "decline_share_call": 0.4, "decline_reward_call": -1.0,
        "ok_episodes_no_expected_call": 1, "declines_no_expected_call": 1, "decline_share_no_expected_call": 1.0,
        "decline_reward_no_expected_call": -1.0,
        "declines_penalized": 2, "tool_call_turns": 4, "assistant_turns": 10, "tool_call_share": 0.4},
}
WHOLE_RUN = {"tasks": 10, "episodes": 20, "aborted": 3, "abstention_task_share": 0.3,
             "no_expected_call_task_share": 0.2, "no_call_task_share": 0.5, "not_recorded_task_share": 0.1,
             "decline_share_abstention": 4 / 5, "decline_reward_abstention": (1.0 + 0.7 + 0.9 + 0.6) / 4,
             "decline_share_call": 5 / 12, "decline_reward_call": -4.5 / 5, "decline_share_no_expected_call": 1.0,
             "declines_penalized": 4, "tool_call_share": 10 / 24}


def write_cpu_layout(folder: Path, records: list[dict]) -> None:
    append_episodes(folder / EPISODES_FILE, records)


def write_gpu_layout(folder: Path, records: list[dict]) -> None:
    """Each step's records split over two worker files in the step's folder, as verl's workers write them."""
    for number, record in enumerate(records):
        append_episodes(step_episodes(folder / EPISODES_DIR, record["step"]) / f"host-{100 + number % 2}.jsonl",
                        [record])


def write_train_metrics(folder: Path, shares: dict[int, float]) -> None:
    """train_metrics.csv with the given tool_call_share per step (the other columns filler)."""
    with (folder / "train_metrics.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(TRAIN_METRICS_COLUMNS)
        for step, share in shares.items():
            values = {"step": step, "reward_mean": 0.1 * step, "reward_std": 0.3, "curriculum_level": 1,
                      "tool_call_share": repr(share)}
            writer.writerow([values.get(c, 0.5) for c in TRAIN_METRICS_COLUMNS])


def read_table(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def check_row(row: dict[str, str], expected: dict) -> None:
    for column, value in expected.items():
        cell = row[column]
        if value is None:
            assert cell == "", (column, cell)
        elif isinstance(value, str):
            assert cell == value, (column, cell)
        elif isinstance(value, int):
            assert cell == str(value), (column, cell)
        else:
            assert float(cell) == pytest.approx(value, abs=1e-12), (column, cell)


def run_json(capsys, *args: str) -> dict:
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("layout", [write_cpu_layout, write_gpu_layout], ids=["cpu-file", "gpu-step-folders"])
def test_the_tables_match_the_hand_count_in_either_layout(layout, golden, capsys):
    folder = golden(steps=(0, 2, 4), repeats={}, train_steps=4)
    layout(folder, RECORDS)
    found = run_json(capsys, "--data", str(folder), "--findings")["training_distribution"]
    steps = read_table(folder / "tables" / "training_distribution.csv")
    assert [int(r["step"]) for r in steps] == sorted(BY_STEP)
    for row in steps:
        check_row(row, BY_STEP[int(row["step"])])
    levels = read_table(folder / "tables" / "training_distribution_by_level.csv")
    assert [int(r["curriculum_level"]) for r in levels] == sorted(BY_LEVEL)  # no level 3: val only
    for row in levels:
        check_row(row, BY_LEVEL[int(row["curriculum_level"])])
    assert found["not_measurable"] is None and found["val_episodes_left_out"] == 2
    assert (found["steps"], found["step_count"]) == ([1, 4], 4)
    for column, value in WHOLE_RUN.items():
        assert found["whole_run"][column] == pytest.approx(value, abs=1e-12), column
    # the benchmark's abstention sits beside the steps it was scored at, blank at the others
    benchmark = dict(zip(found["benchmark_abstention"]["steps"], found["benchmark_abstention"]["pct"], strict=True))
    assert sorted(benchmark) == [0, 2, 4]
    assert [r["benchmark_abstention_pct"] == "" for r in steps] == [True, False, True, False]
    assert float(steps[3]["benchmark_abstention_pct"]) == pytest.approx(benchmark[4], abs=1e-12)


def test_a_record_outside_its_steps_folder_is_left_out_as_the_trainer_leaves_it(golden, capsys):
    folder = golden(steps=(0, 2, 4), repeats={}, train_steps=4)
    write_gpu_layout(folder, RECORDS)
    stray = episode(4, "c9", level=2, reward=-1.0, penalty=True)
    append_episodes(step_episodes(folder / EPISODES_DIR, 3) / "host-7.jsonl", [stray])
    found = run_json(capsys, "--data", str(folder), "--findings")["training_distribution"]
    assert found["misfiled_episodes_left_out"] == 1
    for row in read_table(folder / "tables" / "training_distribution.csv"):
        check_row(row, BY_STEP[int(row["step"])])


def test_a_step_with_two_dispatch_attempts_is_flagged(golden, capsys):
    folder = golden(steps=(0, 2, 4), repeats={}, train_steps=4)
    records = [{**r, "attempt": "first"} for r in RECORDS]
    records.append(episode(2, "c2-redo", level=1, calls=1, reward=1.0, attempt="second"))
    write_gpu_layout(folder, records)
    assert main(["--data", str(folder), "--table", "--findings"]) == 0
    out = capsys.readouterr().out
    found = json.loads(out[out.index("\n{") + 1:])["training_distribution"]
    assert found["steps_with_several_attempts"] == {"2": 2}
    assert [r["attempts"] for r in read_table(folder / "tables" / "training_distribution.csv")] == ["1", "2", "1", "1"]
    assert "Steps with episodes of several dispatch attempts" in out and ": 2 (2)." in out


def falling_share_records(steps: int) -> tuple[list[dict], dict[int, float]]:
    """Call and abstention tasks at every step; the tool-call share falls from 1.0 at step 1 to 0.4 at 20."""
    records, shares = [], {}
    for step in range(1, steps + 1):
        calls = 10 - step // 3
        records += [episode(step, f"c{step}", level=1 + step // 8, calls=calls, turns=10, reward=1.0),
                    episode(step, f"c{step}", level=1 + step // 8, calls=calls, turns=10, reward=1.0, n=1),
                    episode(step, f"a{step}", level=1 + step // 8, **ABSTAIN, reward=1.0)]
        shares[step] = 2 * calls / 21
    return records, shares


@pytest.mark.parametrize(("abstention_trend", "verdict", "meaning"), [
    (-0.1, "same direction", "the policy calls tools less often in training yet abstains less on the benchmark"),
    (+0.1, "opposite directions", "less tool calling in training, more abstention on the benchmark"),
], ids=["share-falls-abstention-falls", "share-falls-abstention-rises"])
def test_the_cli_writes_the_report_and_states_the_planted_direction(abstention_trend, verdict, meaning, golden,
                                                                     capsys):
    # BFCL abstention moves 0.1 pp per step on both of its categories, no noise: 2 pp over 20 steps
    folder = golden(steps=(0, 10, 20), repeats={}, noise_pp=0.0, shift={}, train_steps=0,
                    trend={"irrelevance": abstention_trend, "live_irrelevance": abstention_trend})
    records, shares = falling_share_records(20)
    write_cpu_layout(folder, records)
    write_train_metrics(folder, shares)
    assert main(["--data", str(folder), "--table", "--findings", "--fig", "all"]) == 0
    out = capsys.readouterr().out
    found = json.loads(out[out.index("\n{") + 1:])["training_distribution"]
    direction = found["direction"]
    assert direction["verdict"] == verdict and direction["mismatch"] is (verdict == "same direction")
    assert direction["slope_verdict"] == verdict
    assert direction["training"]["steps"] == [1, 20]
    assert direction["training"]["first"] == pytest.approx(20 / 21) and direction["training"]["last"] == pytest.approx(8 / 21)
    assert (direction["benchmark"]["delta_pp"] < 0) is (abstention_trend < 0)
    assert f": {verdict}: {meaning}" in out
    assert (folder / "tables" / "findings.txt").read_text().count("Training distribution (60 training episodes") == 1
    # the share computed from the records is train_metrics.csv's own
    assert found["train_metrics_check"]["steps_compared"] == 20 and found["train_metrics_check"]["steps_that_differ"] == []
    for name in ("training_distribution.csv", "training_distribution_by_level.csv"):
        assert (folder / "tables" / name).stat().st_size > 100
    for suffix in ("png", "pdf"):
        assert (folder / "figures" / f"f5_training_distribution.{suffix}").stat().st_size > 5_000


def test_the_demos_command_carries_the_report_without_a_new_flag(item_run, capsys):
    folder = item_run(lambda step, pass_index, category, item: ("correct", "calls"), {0: 2, 10: 1, 20: 1})
    write_cpu_layout(folder, falling_share_records(20)[0])
    assert main(["--data", str(folder), "--table", "--findings", "--fig", "all", "--items", "--stability"]) == 0
    out = capsys.readouterr().out
    assert "Training distribution (60 training episodes of 40 tasks, steps 1-20" in out
    assert (folder / "tables" / "training_distribution.csv").is_file()
    assert (folder / "figures" / "f5_training_distribution.png").is_file()
    # abstention is 100% at every checkpoint: no direction to compare, and the line says why
    assert "not measurable (benchmark abstention does not change (100.00 at checkpoints 0 and 20))" in out
    # item_run's train_metrics.csv is synthetic: the records' share differs from it, and the prose says so
    assert "differs from train_metrics.csv at 20 of 20 steps" in out


def test_a_run_without_episode_records_says_so(golden, capsys):
    folder = golden()
    assert main(["--data", str(folder), "--table", "--findings", "--fig", "all"]) == 0
    out = capsys.readouterr().out
    found = json.loads(out[out.index("\n{") + 1:])["training_distribution"]
    assert found["not_measurable"].startswith(f"no episode records in {folder}")
    assert "direction" not in found and "whole_run" not in found
    assert f"Training distribution: not measurable, no episode records in {folder}" in out
    assert not (folder / "tables" / "training_distribution.csv").exists()
    assert not list((folder / "figures").glob("f5_*"))  # --fig all draws the others
    assert main(["--data", str(folder), "--fig", "f5"]) == 2
    assert "episode records for --fig f5" in capsys.readouterr().err


def test_val_episodes_only_are_no_training_distribution(golden, capsys):
    folder = golden(steps=(0, 2, 4), repeats={}, train_steps=4)
    write_cpu_layout(folder, [r for r in RECORDS if r["split"] == "val"])
    found = run_json(capsys, "--data", str(folder), "--findings")["training_distribution"]
    assert "no training episode in 1 episode file(s)" in found["not_measurable"] and "2 val episodes" in found["not_measurable"]


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.mark.parametrize("layout", [write_cpu_layout, write_gpu_layout], ids=["cpu-file", "gpu-step-folders"])
def test_a_malformed_record_stops_the_command_naming_its_file_and_line(layout, golden, capsys):
    folder = golden(steps=(0, 2, 4), repeats={}, train_steps=4)
    layout(folder, RECORDS[:1])
    bad = folder / EPISODES_FILE if layout is write_cpu_layout else next((folder / EPISODES_DIR).rglob("*.jsonl"))
    # a whole line in the middle (not a torn tail, which the append-only rule skips): the step is not a number
    with bad.open("a") as handle:
        handle.write(json.dumps({**RECORDS[1], "step": "two"}) + "\n")
    append_episodes(bad, RECORDS[2:3])
    before = snapshot(folder)
    assert main(["--data", str(folder), "--table", "--findings", "--fig", "all"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"{bad}: line 2" in captured.err and "EpisodeRecord" in captured.err and "step" in captured.err
    assert snapshot(folder) == before
