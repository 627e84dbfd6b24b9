"""A clean library and clean tasks flag no BFCL item, and the recomputed aggregates then equal the analysis's.

The analysis computes each aggregate per (step, pass) with the contract's `compute_aggregates` over the rows
of `bfcl_by_category.csv`, averages a step's passes, and reports last minus first step; this test does the
same from rows written with the contract's appender and compares with the audit's robustness outputs.

    .venvs/eval/bin/python -m pytest tests/audit/test_clean_run.py -q
"""

from __future__ import annotations

import csv

import pytest

from toolcanary.contract.bfcl import AGGREGATE_NAMES, compute_aggregates
from toolcanary.contract.csv_schemas import BfclRow, append_bfcl_rows, read_bfcl_by_category

RUN = "clean"
PASSES = {(0, 1): 11, (0, 2): 12, (10, 1): 13, (20, 1): 14, (20, 2): 15}


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory, fx):
    root = tmp_path_factory.mktemp("clean")
    runs, results = root / "runs", root / "results"
    library = fx.write_library(root / "library.json", fx.CLEAN_TOOLS)
    aquarium = fx.CLEAN_TOOLS["home"]["Aquarium"]
    fx.write_steps(
        runs,
        RUN,
        {
            step: [
                fx.task_record(RUN, f"t{step}-{n}", q, i, aquarium, step)
                for n, (q, i) in enumerate(fx.CLEAN_QUERIES)
            ]
            for step in (1, 2)
        },
    )
    for (step, pass_index), seed in PASSES.items():
        outcomes = fx.make_outcomes(seed)
        counted_wrong = pass_index == 1  # the second passes leave overlong items out of the total
        fx.write_pass(results, RUN, step, pass_index, outcomes, counted_wrong)
        append_bfcl_rows(
            results / RUN / "bfcl_by_category.csv",
            [BfclRow(step, pass_index, c, a, b) for c, (a, b) in fx.count(outcomes, counted_wrong).items()],
        )
    folder = fx.audit_run(library, runs, results, RUN)
    return {
        "folder": folder,
        "csv": results / RUN / "bfcl_by_category.csv",
        "audit": list(csv.DictReader((folder / "audit.csv").open())),
        "robustness": list(csv.DictReader((folder / "robustness.csv").open())),
        "md": (folder / "audit.md").read_text(),
    }


def analysis_values(path):
    """Aggregates per (step, pass) the way the analysis computes them from the CSV."""
    grouped: dict[tuple[int, int], dict[str, tuple[int, int]]] = {}
    for row in read_bfcl_by_category(path):
        grouped.setdefault((row.step, row.pass_index), {})[row.category] = (row.correct, row.total)
    return {key: compute_aggregates(counts) for key, counts in grouped.items()}


def test_a_clean_library_and_clean_tasks_flag_nothing(clean_run):
    rows = clean_run["audit"]
    assert len(rows) == 4441, "one row per item of the 17 offline categories"
    assert [r["id"] for r in rows if r["flagged"] != "0"] == []
    assert "## Flagged items\n\nNone." in clean_run["md"]
    # The measures did run: neighbours sharing some term were found, all far below the thresholds.
    assert sum(bool(r["schema_tool"]) for r in rows) > 4000
    assert sum(bool(r["query_task"]) for r in rows) > 1000
    assert max(float(r["schema_score"] or 0) for r in rows) < 0.5
    assert max(float(r["query_score"] or 0) for r in rows) < 0.3


def test_recomputed_aggregates_equal_the_analysis_on_every_pass(clean_run):
    expected = analysis_values(clean_run["csv"])
    got = {(int(r["step"]), int(r["pass"]), r["aggregate"]): r for r in clean_run["robustness"]}
    assert len(got) == len(PASSES) * len(AGGREGATE_NAMES)
    for (step, pass_index), values in expected.items():
        for name, value in values.items():
            row = got[(step, pass_index, name)]
            assert float(row["full"]) == pytest.approx(value, abs=5e-5)
            assert float(row["unflagged"]) == pytest.approx(value, abs=5e-5)
            assert row["items"] == row["items_unflagged"]


def test_first_to_last_deltas_match_the_analysis_in_audit_md(clean_run):
    values = analysis_values(clean_run["csv"])
    for name in AGGREGATE_NAMES:
        first = sum(values[(0, p)][name] for p in (1, 2)) / 2
        last = sum(values[(20, p)][name] for p in (1, 2)) / 2
        line = next(line for line in clean_run["md"].splitlines() if line.startswith(f"| {name} |"))
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[1:] == [f"{first:.2f}", f"{last:.2f}", f"{last - first:.2f}"] * 2


def test_no_problem_is_reported_when_outcomes_and_csv_agree(clean_run):
    assert "left out" not in clean_run["md"] and "differ from" not in clean_run["md"]
