"""`make study` in miniature (`--quick`: two arms, two seeds, two GRPO steps, a few items) end to end on CPU with
the real components; its table against a count of the runs' own files made here.

The count reads each run's `bfcl_by_category.csv` and its pass folders' `outcomes.jsonl` directly, takes each
run's change from the first to the last checkpoint, the arm means, and the Student t interval with the
between-run variance pooled over the arms (its quantile from a printed t table, not from the code under test).

Run: .venvs/dev/bin/python -m pytest tests/demo/test_study.py -q      (several minutes: four runs train and score)
"""

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import processes_mentioning, volume_env

from toolcanary.demo.settings import StudyOptions
from toolcanary.demo.study import study_runs

RUNS = {"a": ["ci-study-baseline-s1", "ci-study-baseline-s2"], "b": ["ci-study-abstain-s1", "ci-study-abstain-s2"]}
ABSTENTION = ("irrelevance", "live_irrelevance")
CALLS = ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
         "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
T_975_2DF = 4.3027  # Student t, 2 degrees of freedom, two-sided 95 % (a printed table's value)


@pytest.mark.parametrize("policy", ["smollm2", "tiny"])
def test_the_runs_differ_only_in_run_id_seed_and_abstention_share(policy, tmp_path):
    runs = study_runs("st", StudyOptions(policy=policy, seeds=[3, 4], no_call_fraction=0.25), tmp_path / "bank.json")
    assert [[r.run for r in runs[side]] for side in "ab"] == [["st-baseline-s3", "st-baseline-s4"],
                                                             ["st-abstain-s3", "st-abstain-s4"]]
    assert [[(r.seed, r.no_call_fraction) for r in runs[side]] for side in "ab"] == [[(3, 0.0), (4, 0.0)],
                                                                                    [(3, 0.25), (4, 0.25)]]
    first = runs["a"][0].model_dump()
    for run in runs["a"][1:] + runs["b"]:
        other = run.model_dump()
        assert {k for k in first if first[k] != other[k]} <= {"run", "seed", "no_call_fraction"}
    # One starting policy for all: its seed is the study's, not the run's.
    assert {r.starting_policy_seed for side in runs.values() for r in side} == {0}
    assert runs["a"][0].checkpoint_steps == [0, 8, 16] and runs["a"][0].repeat_passes == 1


@pytest.mark.parametrize("flags, expected", [
    (["--no-call-fraction", "0"], "expected a share in (0, 1]"), (["--no-call-fraction", "1.5"], "expected a share"),
    (["--seeds", "1"], "expected two different seeds or more"), (["--seeds", "2", "2"], "expected two different")])
def test_a_study_that_could_not_measure_is_refused_before_anything_runs(flags, expected, tmp_path):
    done = subprocess.run([sys.executable, "-m", "toolcanary.demo.study", *flags], capture_output=True, text=True,
                          timeout=60, env=volume_env(tmp_path))
    assert done.returncode == 2 and expected in done.stderr
    assert not (tmp_path / "results").exists()


def test_the_share_and_the_starting_policy_seed_reach_the_trainer(monkeypatch, tmp_path):
    """run_demo hands --no-call-fraction to GRPO only (the starting policy the arms share does not depend on it),
    and the starting policy's seed and the warm start's share to both."""
    import toolcanary.demo.pipeline as pipeline

    commands = []

    class Recorder:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def start(self, *args, **kwargs):
            pass

        def wait_http(self, *args, **kwargs):
            pass

        def stop(self, *args, **kwargs):
            pass

        def run(self, name, command, *args, **kwargs):
            commands.append((name, command))
            if name == "train":
                raise pipeline.ChildFailed("recorded")

    monkeypatch.setattr(pipeline, "ProcessGroup", Recorder)
    for name in ("runs", "results", "checkpoints"):
        monkeypatch.setenv(f"TOOLCANARY_{name.upper()}_DIR", str(tmp_path / name))
    abstain = study_runs("st", StudyOptions(policy="tiny"), tmp_path / "bank.json")["b"][1]
    with pytest.raises(pipeline.ChildFailed):
        pipeline.run_demo(abstain, pipeline.PhaseClock())
    by_name = dict(commands)
    starting, train = by_name["starting policy"], by_name["train"]
    assert "--no-call-fraction" not in starting
    assert train[train.index("--no-call-fraction") + 1] == "0.5"
    for command in (starting, train):
        assert command[command.index("--starting-policy-seed") + 1] == "0"
        assert command[command.index("--seed") + 1] == "2"
        assert command[command.index("--warm-start-no-call-fraction") + 1] == "0.1"


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("volumes")
    done = subprocess.run([sys.executable, "-m", "toolcanary.demo.study", "--quick", "--run", "ci-study"],
                          capture_output=True, text=True, env=volume_env(root), timeout=2400)
    return root, done


def compared(root: Path) -> dict:
    folder = root / "results" / "_compare" / f"{'+'.join(RUNS['a'])}_vs_{'+'.join(RUNS['b'])}"
    return json.loads((folder / "tables" / "compare.json").read_text())


def csv_share(root: Path, run: str, step: int) -> float:
    """Abstention required from the CSV: correct over total, pooled over the two categories."""
    with (root / "results" / run / "bfcl_by_category.csv").open() as handle:
        rows = [r for r in csv.DictReader(handle) if int(r["step"]) == step and r["category"] in ABSTENTION]
    return 100 * sum(int(r["correct"]) for r in rows) / sum(int(r["total"]) for r in rows)


def outcome_share(root: Path, run: str, step: int, categories: tuple[str, ...], counted) -> float:
    path = root / "results" / run / "passes" / f"step_{step:04d}_pass_1" / "outcomes.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows = [r for r in rows if r["category"] in categories]
    return 100 * sum(bool(counted(r)) for r in rows) / len(rows)


@pytest.mark.slow
def test_the_quick_study_ends_with_its_table_its_training_and_its_time_per_phase(study):
    root, done = study
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "ToolCanary study finished in" in out
    for row in ("Abstention required, no unparsed credit", "Abstention required, as BFCL scores it",
                "Call attempted, abstention items", "Call attempted, tool call items", "Tool call required"):
        assert f"| {row} |" in out, row
    assert "Training: did each run's policy move" in out
    for phase in ("item bank", "starting policy", "train", "eval", "compare"):
        assert f"    {phase} " in out, phase
    assert (root / "results" / "_study" / "ci-study" / "study_timings.json").is_file()
    assert not processes_mentioning(str(root))


@pytest.mark.slow
def test_the_table_agrees_with_a_count_of_the_runs_files(study):
    root, _ = study
    found = compared(root)
    assert found["span"] == [0, 2] and found["interval"]["method"] == "between_runs_t"
    counts = {
        "Abstention required": lambda run, step: csv_share(root, run, step),
        "Abstention required, no unparsed credit": lambda run, step: outcome_share(
            root, run, step, ABSTENTION, lambda r: r["outcome"] == "correct" and r["answer"] != "unparsed_call"),
        "Call attempted, abstention items": lambda run, step: outcome_share(
            root, run, step, ABSTENTION, lambda r: r["answer"] in ("calls", "unparsed_call")),
        "Call attempted, tool call items": lambda run, step: outcome_share(
            root, run, step, CALLS, lambda r: r["answer"] in ("calls", "unparsed_call")),
    }
    for name, count in counts.items():
        changes = {side: [count(run, 2) - count(run, 0) for run in runs] for side, runs in RUNS.items()}
        means = {side: sum(c) / len(c) for side, c in changes.items()}
        pooled = math.sqrt(sum((c - means[side]) ** 2 for side in changes for c in changes[side]) / 2)
        half = T_975_2DF * pooled * math.sqrt(1 / 2 + 1 / 2)
        row = found["aggregates"][name]
        assert row["a"]["runs_delta_pp"] == pytest.approx(changes["a"], abs=1e-9), name
        assert row["b"]["runs_delta_pp"] == pytest.approx(changes["b"], abs=1e-9), name
        assert row["difference_pp"] == pytest.approx(means["b"] - means["a"], abs=1e-9), name
        low, high = row["difference_interval_pp"]
        assert (low, high) == pytest.approx((means["b"] - means["a"] - half, means["b"] - means["a"] + half),
                                            abs=1e-3 * max(1.0, half)), name


@pytest.mark.slow
def test_every_run_starts_from_the_one_starting_policy_and_is_scored_by_one_server(study):
    root, _ = study
    starts = set()
    for run in RUNS["a"] + RUNS["b"]:
        ledger = [json.loads(line) for line in (root / "checkpoints" / run / "published.jsonl").read_text().splitlines()]
        starts.add(next(entry["weights_sha256"] for entry in ledger if entry["step"] == 0))
        assert sorted(p.name for p in (root / "results" / run / "serving").iterdir()) == ["step_0000.log"]
    assert len(starts) == 1
    training = compared(root)["training"]
    assert set(training) == set(RUNS["a"] + RUNS["b"]) and all(t["steps"] == 2 for t in training.values())
