"""Bad input stops make_figures with an error that names the file, the row and what was expected, and
leaves the run folder exactly as it was: no tables, no figures, no staging folder.

    .venvs/analysis/bin/python -m pytest tests/analysis/test_bad_input.py -q
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from toolcanary.analysis.__main__ import main


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def rewrite(path: Path, edit) -> None:
    with path.open(newline="") as handle:
        rows = list(csv.reader(handle))
    rows = edit(rows)
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)


def set_cell(line: int, column: str, value: str):
    """Edit the cell at a 1-based file line (line 1 is the header)."""
    def edit(rows):
        rows[line - 1][rows[0].index(column)] = value
        return rows
    return edit


def drop_column(column: str):
    def edit(rows):
        index = rows[0].index(column)
        return [row[:index] + row[index + 1:] for row in rows]
    return edit


BFCL_CASES = {
    "missing column": (drop_column("total"), ["header", "'total'", "columns"]),
    "unknown category": (set_cell(5, "category", "live_irrelevence"),
                         ["line 5", "'category'", "BFCL V4 category name", "live_irrelevence",
                          "Did you mean 'live_irrelevance'?"]),
    "non-integer count": (set_cell(7, "correct", "12.5"), ["line 7", "'correct'", "non-negative integer", "12.5"]),
    "negative count": (set_cell(9, "total", "-3"), ["line 9", "'total'", "non-negative integer", "-3"]),
    "a count with an underscore": (set_cell(3, "total", "1_0"), ["line 3", "'total'", "plain digits", "'1_0'"]),
    "a count with spaces": (set_cell(3, "total", " 10"), ["line 3", "'total'", "plain digits", "' 10'"]),
    "a count with a sign": (set_cell(3, "step", "+0"), ["line 3", "'step'", "plain digits", "'+0'"]),
    "a 200 KB field": (set_cell(6, "category", "x" * 200_000), ["line 6", "a CSV row", "field larger"]),
    "correct above total": (set_cell(4, "correct", "100000"), ["line 4", "correct <= total", "correct=100000"]),
    "a pass without every category": (lambda rows: rows[:30] + rows[31:],
                                      ["step 0, pass 2", "all categories", "missing"]),
    "a single step": (lambda rows: [rows[0]] + [r for r in rows[1:] if r[0] == "0"],
                      ["every row (step 0)", "at least two distinct steps"]),
    "an aggregate's category never scored": (lambda rows: [r for r in rows if r[2] != "multi_turn_base"],
                                             ["categories", "multi_turn_base", "five aggregates"]),
    "a category with no items": (lambda rows: set_cell(2, "correct", "0")(set_cell(2, "total", "0")(rows)),
                                 ["step 0, pass 1, category 'simple_python'", "at least one item"]),
}


@pytest.mark.parametrize("case", BFCL_CASES)
def test_bad_bfcl_csv_names_file_row_and_expectation_and_writes_nothing(case, golden, capsys):
    folder = golden()
    csv_path = folder / "bfcl_by_category.csv"
    edit, fragments = BFCL_CASES[case]
    rewrite(csv_path, edit)
    before = snapshot(folder)
    assert main(["--data", str(folder), "--table", "--findings", "--fig", "all"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert str(csv_path) in captured.err and "expected" in captured.err
    for fragment in fragments:
        assert fragment in captured.err, (fragment, captured.err)
    assert snapshot(folder) == before


TRAIN_CASES = {
    "missing column": (drop_column("tool_call_share"), ["header", "tool_call_share"]),
    "non-numeric value": (set_cell(12, "reward_mean", "high"), ["line 12", "'reward_mean'", "a number", "high"]),
    "an overflowing value": (set_cell(12, "reward_mean", "1e999"), ["line 12", "'reward_mean'", "finite", "1e999"]),
    "an infinite value": (set_cell(5, "kl", "-inf"), ["line 5", "'kl'", "finite", "-inf"]),
    "a value with an underscore": (set_cell(5, "entropy", "1_0"), ["line 5", "'entropy'", "finite", "1_0"]),
    "a step with an underscore": (set_cell(5, "step", "1_0"), ["line 5", "'step'", "plain digits", "1_0"]),
    "no value at any step": (lambda rows: [rows[0]] + [r[:1] + [""] + r[2:] for r in rows[1:]],
                             ["'reward_mean'", "a number at one step at least", "no value in any of its 200 rows"]),
}


@pytest.mark.parametrize("case", TRAIN_CASES)
def test_bad_train_metrics_names_file_row_and_expectation(case, golden, capsys):
    folder = golden()
    path = folder / "train_metrics.csv"
    edit, fragments = TRAIN_CASES[case]
    rewrite(path, edit)
    before = snapshot(folder)
    assert main(["--data", str(folder), "--findings", "--fig", "f1"]) == 2
    err = capsys.readouterr().err
    assert str(path) in err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    assert snapshot(folder) == before


@pytest.mark.parametrize("name", ["bfcl_by_category.csv", "train_metrics.csv"])
def test_a_csv_that_is_not_utf8_is_refused_with_its_line(name, golden, capsys):
    folder = golden()
    path = folder / name
    lines = path.read_bytes().split(b"\n")
    lines[3] = lines[3].replace(b"0", b"\xff", 1)
    path.write_bytes(b"\n".join(lines))
    before = snapshot(folder)
    assert main(["--data", str(folder), "--table", "--findings", "--fig", "f1"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: line 4" in err and "UTF-8 text" in err, err
    assert snapshot(folder) == before


def test_missing_train_metrics_is_an_error_only_where_needed(golden, capsys):
    folder = golden(train_steps=0)
    assert main(["--data", str(folder), "--fig", "f1"]) == 2
    assert "train_metrics.csv" in capsys.readouterr().err
    assert not (folder / "figures").exists()
    assert main(["--data", str(folder), "--table", "--fig", "f2"]) == 0
    assert (folder / "figures" / "f2_aggregates.png").stat().st_size > 0


def test_a_failure_while_drawing_leaves_earlier_outputs_untouched(golden, capsys, monkeypatch):
    folder = golden()
    assert main(["--data", str(folder), "--table", "--fig", "f4"]) == 0
    capsys.readouterr()
    before = snapshot(folder)

    def broken(run):
        raise RuntimeError("drawing failed")

    monkeypatch.setattr("toolcanary.analysis.figures_bfcl.f3_categories", broken)
    with pytest.raises(RuntimeError, match="drawing failed"):
        main(["--data", str(folder), "--table", "--format", "csv", "--fig", "f4", "--fig", "f3"])
    assert snapshot(folder) == before
    assert not list(folder.glob(".make_figures-*"))


def test_a_run_whose_step_0_was_never_scored_is_refused_with_the_fix(golden, capsys):
    """The base model is step 0: a run whose first scored step is 10 must not take step 10 as its base quietly."""
    folder = golden(steps=tuple(range(10, 201, 10)), repeats={10: 3, 200: 3})
    before = snapshot(folder)
    assert main(["--data", str(folder), "--table"]) == 2
    err = capsys.readouterr().err
    assert "step 0 scored, the baseline every change is measured from" in err and "first scored step 10" in err
    assert "make eval STEP=0" in err and "--baseline-step 10" in err
    assert snapshot(folder) == before
    assert main(["--data", str(folder), "--table", "--baseline-step", "10"]) == 0
    assert "| step 10 | step 200 |" in capsys.readouterr().out


def test_an_explicit_baseline_leaves_earlier_steps_out(golden, capsys):
    full, cut = golden("full"), golden("cut")  # the same seed: the same rows
    rewrite(cut / "bfcl_by_category.csv", lambda rows: [rows[0]] + [r for r in rows[1:] if int(r[0]) >= 150])
    outputs = []
    for folder in (full, cut):
        assert main(["--data", str(folder), "--table", "--format", "csv", "--baseline-step", "150"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and "sd_step0" not in outputs[0]
    assert main(["--data", str(full), "--table", "--baseline-step", "155"]) == 2
    assert "Name a scored step with --baseline-step" in capsys.readouterr().err
