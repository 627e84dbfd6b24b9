"""Every value of the headline table, on golden datasets, against pandas + statsmodels, to 1e-9.

    .venvs/analysis/bin/python -m pytest tests/analysis/test_table_golden.py -q
"""

from __future__ import annotations

import csv
import io
import math

import pytest

from toolcanary.analysis.__main__ import main

DATASETS = {
    "toolcanary shape": {},
    "level shift": {"trend": {}, "shift": {"live_irrelevance": (80, -6.0), "irrelevance": (80, -6.0)},
                    "noise_pp": 0.3},
    "trends, no noise": {"trend": {"live_multiple": 0.01, "multi_turn_miss_param": -0.03, "irrelevance": -0.05,
                                   "parallel": 0.02},
                         "shift": {}, "noise_pp": 0.0, "seed": 11},
    "uneven repeats": {"repeats": {0: 3, 100: 2, 200: 4}, "noise_pp": 2.0, "seed": 3},
}
FIXED = ["aggregate", "step0", "step_last", "rel_delta_pct", "delta_pp", "slope_pp_per_10", "t", "t_hac", "rho",
         "p_change"]
REPLICATES = 300
"""--null-replicates of these tests: the reference simulates each null series on its own, one at a time."""


def table_csv(capsys, folder, *extra: str) -> list[dict[str, str]]:
    assert main(["--data", str(folder), "--table", "--format", "csv", "--null-replicates", str(REPLICATES),
                 *extra]) == 0
    return list(csv.DictReader(io.StringIO(capsys.readouterr().out)))


@pytest.mark.parametrize("dataset", DATASETS)
def test_every_table_value_matches_statsmodels(dataset, golden, independent, capsys):
    folder = golden(**DATASETS[dataset])
    rows = table_csv(capsys, folder)
    # maxlags: floor(4 (21/100)^(2/9)) = 2
    expected = independent.table(folder / "bfcl_by_category.csv", maxlags=2, replicates=REPLICATES)
    assert [r["aggregate"] for r in rows] == [
        "Abstention required", "Tool call required", "Non-Live", "Live", "Multi-Turn"]
    for row in rows:
        want = expected[row["aggregate"]]
        assert set(row) - {"aggregate"} == set(want)
        for column, value in want.items():
            assert float(row[column]) == pytest.approx(value, rel=1e-9, abs=1e-9), (row["aggregate"], column)


def test_csv_has_exactly_the_issue_columns_with_one_sd_per_repeated_step(golden, capsys):
    folder = golden(repeats={0: 3, 100: 2, 200: 4})
    assert main(["--data", str(folder), "--table", "--format", "csv"]) == 0
    header = capsys.readouterr().out.splitlines()[0].split(",")
    assert header == [*FIXED, "sd_step0", "sd_step100", "sd_step200"]


def test_csv_keeps_full_precision(golden, capsys, independent):
    folder = golden()
    rows = table_csv(capsys, folder)
    # repr of a float round-trips exactly; 2-decimal rounding would miss 1e-9 by far
    digits = [len(r["step0"].split(".")[1]) for r in rows]
    assert max(digits) >= 12


def test_hac_lags_follow_the_flag(golden, independent, capsys):
    folder = golden(noise_pp=1.5)
    rows = table_csv(capsys, folder, "--hac-maxlags", "5")
    expected = independent.table(folder / "bfcl_by_category.csv", maxlags=5, replicates=REPLICATES)
    for row in rows:
        assert float(row["t_hac"]) == pytest.approx(expected[row["aggregate"]]["t_hac"], rel=1e-9)
        assert float(row["t"]) == pytest.approx(expected[row["aggregate"]]["t"], rel=1e-9)


def test_two_steps_give_a_slope_without_t(golden, independent, capsys):
    folder = golden(steps=(0, 200), repeats={0: 2, 200: 2})
    rows = table_csv(capsys, folder)
    frame = independent.aggregates(folder / "bfcl_by_category.csv").groupby(level="step").mean()
    for row in rows:
        name = row["aggregate"]
        assert float(row["slope_pp_per_10"]) == pytest.approx(
            10 * (frame[name].iloc[1] - frame[name].iloc[0]) / 200, rel=1e-9, abs=1e-12)
        assert math.isnan(float(row["t"])) and math.isnan(float(row["t_hac"]))
        assert math.isnan(float(row["rho"])) and math.isnan(float(row["p_change"]))


def test_markdown_and_latex_carry_the_same_rows(golden, capsys):
    folder = golden()
    assert main(["--data", str(folder), "--table"]) == 0
    markdown = capsys.readouterr().out
    table_lines = [line for line in markdown.splitlines() if line.startswith("| ")]
    assert table_lines[0].split("|")[2].strip() == "step 0"
    assert [line.split("|")[1].strip() for line in table_lines[1:]] == [
        "Abstention required", "Tool call required", "Non-Live", "Live", "Multi-Turn"]
    assert "so no ratio or sign is claimed" in markdown or "difference in sign" in markdown or "rate" in markdown
    assert main(["--data", str(folder), "--table", "--format", "latex"]) == 0
    latex = capsys.readouterr().out
    assert latex.startswith(r"\begin{tabular}{l" + "r" * 12 + "}")
    assert latex.count(r" \\") == 6 and r"\%" in latex
    assert (folder / "tables" / "headline.tex").read_text() == latex
