"""BFCL's credit for unparsed call markup: the table row "Abstention required, no unparsed credit" and the
findings, against a hand computation from the planted outcomes; and "not measured" (never 0) for a CSV
without the column or with empty cells.

    .venvs/analysis/bin/python -m pytest tests/analysis/test_credit.py -q
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from toolcanary.analysis.__main__ import main

ABSTENTION = ("irrelevance", "live_irrelevance")
PASSES = {0: 3, 100: 1, 200: 3}
SIZE = 12
ROW = "Abstention required, no unparsed credit"


def planted(step: int, pass_index: int, category: str, item: str) -> tuple[str, str | None]:
    """Abstention items numbered 1 and 2 answer with unparsed call markup from step 100 on (BFCL: correct),
    item 4 too in pass 2 of step 200; items 5 and 7 fail at step 200."""
    number = int(item.rsplit("_", 1)[1])
    if category not in ABSTENTION:
        return ("correct" if number % 2 else "wrong", "calls")
    if step >= 100 and number in (1, 2):
        return ("correct", "unparsed_call")
    if (step, pass_index, number) == (200, 2, 4):
        return ("correct", "unparsed_call")
    if step == 200 and number in (5, 7):
        return ("irrelevance_error", "calls")
    return ("correct", "text") if number % 3 else ("irrelevance_error", "calls")


def by_hand() -> dict[str, dict[int, float]]:
    """Per step, the mean over passes of pooled abstention accuracy with and without the credit."""
    values: dict[str, dict[int, list[float]]] = {"with": {}, "without": {}}
    for step, passes in PASSES.items():
        for pass_index in range(1, passes + 1):
            answers = [planted(step, pass_index, c, f"{c}_{i}") for c in ABSTENTION for i in range(SIZE)]
            correct = sum(o == "correct" for o, _ in answers)
            unparsed = sum(o == "correct" and a == "unparsed_call" for o, a in answers)
            values["with"].setdefault(step, []).append(100 * correct / (2 * SIZE))
            values["without"].setdefault(step, []).append(100 * (correct - unparsed) / (2 * SIZE))
    return {k: {s: float(np.mean(v)) for s, v in per_step.items()} for k, per_step in values.items()}


def table(capsys, folder) -> dict[str, dict[str, str]]:
    assert main(["--data", str(folder), "--table", "--format", "csv"]) == 0
    return {r["aggregate"]: r for r in csv.DictReader(io.StringIO(capsys.readouterr().out))}


def test_the_no_credit_row_follows_abstention_required(item_run, independent, capsys):
    folder = item_run(planted, PASSES, size=SIZE)
    rows = table(capsys, folder)
    assert list(rows) == ["Abstention required", ROW, "Tool call required", "Non-Live", "Live", "Multi-Turn"]
    hand = by_hand()["without"]
    row = rows[ROW]
    assert float(row["step0"]) == pytest.approx(hand[0], rel=1e-12)
    assert float(row["step_last"]) == pytest.approx(hand[200], rel=1e-12)
    assert float(row["delta_pp"]) == pytest.approx(hand[200] - hand[0], rel=1e-12)
    slope, t, t_hac, _ = independent.trend(list(hand), list(hand.values()), 1)  # floor(4 (3/100)^(2/9)) = 1
    assert float(row["slope_pp_per_10"]) == pytest.approx(10 * slope, rel=1e-9)
    assert float(row["t"]) == pytest.approx(t, rel=1e-9)
    assert float(row["t_hac"]) == pytest.approx(t_hac, rel=1e-9)
    # At step 200, per category: 8 items correct at first, 5 and 7 lost, 1 and 2 credited, and 4 credited in
    # pass 2 only; so BFCL's pass values agree while the values without the credit do not.
    per_pass = [100 * 2 * 4 / 24, 100 * 2 * 3 / 24, 100 * 2 * 4 / 24]
    assert float(row["sd_step200"]) == pytest.approx(float(np.std(per_pass, ddof=1)), rel=1e-12)
    assert float(rows["Abstention required"]["sd_step200"]) == 0.0
    assert main(["--data", str(folder), "--table"]) == 0
    markdown = [line.split("|")[1].strip() for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert markdown[1:3] == ["Abstention required", ROW]


def test_the_findings_split_the_change_into_the_credit_and_the_rest(item_run, capsys):
    folder = item_run(planted, PASSES, size=SIZE)
    assert main(["--data", str(folder), "--findings"]) == 0
    found = json.loads(capsys.readouterr().out)["bfcl"]["abstention_credit"]
    hand = by_hand()
    change_with = hand["with"][200] - hand["with"][0]
    change_without = hand["without"][200] - hand["without"][0]
    assert found["measured"] is True and found["not_measured"] is None
    assert found["with_credit"]["delta_pp"] == pytest.approx(change_with, rel=1e-12)
    assert found["without_credit"]["delta_pp"] == pytest.approx(change_without, rel=1e-12)
    assert found["explained_pp"] == pytest.approx(change_with - change_without, rel=1e-12)
    assert found["explained_share"] == pytest.approx((change_with - change_without) / change_with, rel=1e-12)
    # items 1 and 2 of both categories credited from step 100 (4 of 24), item 4 of both in one of three passes
    assert found["explained_pp"] == pytest.approx(100 * (4 + 2 / 3) / 24, rel=1e-12)
    assert main(["--data", str(folder), "--table"]) == 0
    prose = capsys.readouterr().out
    assert (f"Abstention required: {change_with:+.2f} pp with BFCL's credit for unparsed call markup, "
            f"{change_without:+.2f} pp without it; the credit hides {change_with - change_without:.2f} pp of it (the "
            f"change without the credit is {100 * (change_without / change_with - 1):.1f}% larger).") in prose
    # The planted credit masks part of a loss: BFCL's change and the credit's part have opposite signs.
    assert change_with < 0 < change_with - change_without


def test_a_csv_from_before_the_column_reads_not_measured(item_run, capsys):
    folder = item_run(planted, PASSES, size=SIZE, unparsed_column=False)
    assert ROW not in table(capsys, folder)
    assert main(["--data", str(folder), "--table", "--findings"]) == 0
    out = capsys.readouterr().out
    found = json.loads(out[out.index("\n{") + 1:])["bfcl"]["abstention_credit"]
    assert found["measured"] is False
    assert found["not_measured"] == "bfcl_by_category.csv has no correct_unparsed column (written before contract 1.5)"
    assert found["without_credit"] is None and found["explained_pp"] is None and found["explained_share"] is None
    assert ("with BFCL's credit for unparsed call markup; without it: not measured (bfcl_by_category.csv has no "
            "correct_unparsed column") in out
    assert ROW not in (folder / "tables" / "headline.md").read_text()


def test_empty_cells_name_the_passes_and_leave_the_row_out(item_run, capsys):
    def unclassified_at_step_100(step, pass_index, category, item):
        outcome, answer = planted(step, pass_index, category, item)
        return (outcome, None if step == 100 else answer)

    folder = item_run(unclassified_at_step_100, PASSES, size=SIZE)
    assert ROW not in table(capsys, folder)
    assert main(["--data", str(folder), "--findings"]) == 0
    found = json.loads(capsys.readouterr().out)["bfcl"]["abstention_credit"]
    assert found["measured"] is False and found["explained_pp"] is None
    assert found["not_measured"] == ("correct_unparsed is empty for the abstention categories at step 100 pass 1 "
                                     "(1 of 7 passes: their answers were not classified)")


def test_a_category_outside_abstention_without_the_count_does_not_matter(item_run, capsys):
    def unclassified_tool_calls(step, pass_index, category, item):
        outcome, answer = planted(step, pass_index, category, item)
        return (outcome, answer if category in ABSTENTION else None)

    assert ROW in table(capsys, item_run(unclassified_tool_calls, PASSES, size=SIZE))


def test_a_gain_that_is_all_credit_is_explained_in_full(item_run, capsys):
    """From step 100 abstention items 1 and 2 (of 12 per category) decline with a call the server did not parse:
    BFCL's abstention rises by 2/12 = 16.67 pp, all of it credit."""
    def credited(step, pass_index, category, item):
        number = int(item.rsplit("_", 1)[1])
        if category not in ABSTENTION:
            return ("correct" if number % 2 else "wrong", "calls")
        if number in (1, 2):
            return ("correct", "unparsed_call") if step >= 100 else ("irrelevance_error", "calls")
        return ("correct", "text") if number % 3 else ("irrelevance_error", "calls")

    folder = item_run(credited, PASSES, size=SIZE)
    assert main(["--data", str(folder), "--table"]) == 0
    gain = 100 * 2 / 12
    assert (f"Abstention required: {gain:+.2f} pp with BFCL's credit for unparsed call markup, +0.00 pp without "
            f"it; the credit explains {gain:+.2f} pp (100.0% of the change with it).") in capsys.readouterr().out
