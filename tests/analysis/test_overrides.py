"""Answers cut at the output cap and items over the served context: the table's "Abstention required, as BFCL
scores it" beside ToolCanary's "Abstention required", the findings' per-step counts and the report page, each
against a count made here from the planted outcomes; and "not measured" (never 0) where the CSV cannot say.

    .venvs/analysis/bin/python -m pytest tests/analysis/test_overrides.py -q
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from report_browser import inspect_page

from toolcanary.analysis.__main__ import main
from toolcanary.contract.manifests import PublishedCheckpoint, append_published

ABSTENTION = ("irrelevance", "live_irrelevance")
AST = ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
       "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
CUT_CALLS = ("simple_python", "live_simple")
PASSES = {0: 3, 100: 1, 200: 3}
SIZE = 12
CAP = 4096
AS_BFCL, OURS, NO_CREDIT = ("Abstention required, as BFCL scores it", "Abstention required",
                            "Abstention required, no unparsed credit")


def planted(step: int, pass_index: int, category: str, item: str) -> tuple[str, str, bool, int | None]:
    """(outcome, answer kind, BFCL's own verdict, output tokens). From step 100, abstention items 1 and 2 are
    cut at the cap with nothing but reasoning (BFCL: a correct abstention); at step 200 item 4 is cut after a
    call in pass 1 (BFCL: wrong), item 8 is over the served context in pass 2 (BFCL credits the HTTP 400), item
    10 answers with a reasoning trace alone (BFCL: correct), and items 3 and 6 of two call categories are cut
    (BFCL would have passed 3)."""
    number = int(item.rsplit("_", 1)[1])
    if category in ABSTENTION:
        if step >= 100 and number in (1, 2):
            return ("truncated", "empty", True, CAP)
        if (step, pass_index, number) == (200, 1, 4):
            return ("truncated", "calls", False, CAP)
        if (step, pass_index, number) == (200, 2, 8):
            return ("overlong", "empty", True, None)
        if step == 200 and number == 10:
            return ("correct", "empty", True, 300)
        return ("correct", "text", True, 40) if number % 3 else ("irrelevance_error", "calls", False, 25)
    if category in CUT_CALLS and step == 200 and number in (3, 6):
        return ("truncated", "calls", number == 3, CAP)
    return ("correct", "calls", True, 50) if number % 2 else ("wrong_values", "calls", False, 50)


def items(step: int, pass_index: int, categories: tuple[str, ...]) -> list[tuple[str, str, bool, int | None]]:
    return [planted(step, pass_index, c, f"{c}_{i}") for c in categories for i in range(SIZE)]


def by_hand(overlong_counted_wrong: bool = True) -> dict[str, dict[int, float]]:
    """Per step, the mean over passes of pooled abstention accuracy: BFCL's own verdict on every item, and
    ToolCanary's (truncated wrong, overlong wrong or out of the total)."""
    values: dict[str, dict[int, list[float]]] = {"bfcl": {}, "ours": {}}
    for step, passes in PASSES.items():
        for pass_index in range(1, passes + 1):
            answers = items(step, pass_index, ABSTENTION)
            values["bfcl"].setdefault(step, []).append(100 * sum(v for _, _, v, _ in answers) / len(answers))
            counted = [o for o, *_ in answers if o != "overlong" or overlong_counted_wrong]
            values["ours"].setdefault(step, []).append(100 * counted.count("correct") / len(counted))
    return {k: {s: float(np.mean(v)) for s, v in per_step.items()} for k, per_step in values.items()}


def counts_by_hand() -> dict[int, dict[str, int]]:
    """Per step, summed over its passes: the truncated and overlong items of each group with BFCL's verdict,
    and the correct abstentions whose answer was empty although tokens came back."""
    found = {}
    for step, passes in PASSES.items():
        tally = dict.fromkeys([f"{g}.{k}" for g in ("abstention", "tool_call") for k in (
            "truncated", "truncated_bfcl_correct", "overlong", "overlong_bfcl_correct", "correct_empty_reasoning")], 0)
        for pass_index in range(1, passes + 1):
            for group, categories in (("abstention", ABSTENTION), ("tool_call", AST)):
                for outcome, answer, bfcl, tokens in items(step, pass_index, categories):
                    if outcome in ("truncated", "overlong"):
                        tally[f"{group}.{outcome}"] += 1
                        tally[f"{group}.{outcome}_bfcl_correct"] += bfcl
                    tally[f"{group}.correct_empty_reasoning"] += outcome == "correct" and answer == "empty" and tokens > 0
        found[step] = tally
    return found


def table(capsys, folder: Path) -> dict[str, dict[str, str]]:
    assert main(["--data", str(folder), "--table", "--format", "csv"]) == 0
    return {r["aggregate"]: r for r in csv.DictReader(io.StringIO(capsys.readouterr().out))}


def findings(capsys, folder: Path) -> dict:
    assert main(["--data", str(folder), "--findings"]) == 0
    return json.loads(capsys.readouterr().out)["bfcl"]["abstention_credit"]


def test_the_counts_by_hand_are_what_the_planted_outcomes_say():
    # step 200, three passes: items 1 and 2 of both categories cut in every pass, item 4 in pass 1 only.
    assert counts_by_hand()[200] == {
        "abstention.truncated": 14, "abstention.truncated_bfcl_correct": 12, "abstention.overlong": 2,
        "abstention.overlong_bfcl_correct": 2, "abstention.correct_empty_reasoning": 6,
        "tool_call.truncated": 12, "tool_call.truncated_bfcl_correct": 6, "tool_call.overlong": 0,
        "tool_call.overlong_bfcl_correct": 0, "tool_call.correct_empty_reasoning": 0}


def test_bfcls_own_number_sits_beside_toolcanarys_in_the_table(item_run, capsys):
    folder = item_run(planted, PASSES, size=SIZE, verdict_columns=True)
    rows = table(capsys, folder)
    assert list(rows)[:4] == [AS_BFCL, OURS, NO_CREDIT, "Tool call required"]
    hand = by_hand()
    for name, key in ((AS_BFCL, "bfcl"), (OURS, "ours")):
        assert float(rows[name]["step0"]) == pytest.approx(hand[key][0], rel=1e-12), name
        assert float(rows[name]["step_last"]) == pytest.approx(hand[key][200], rel=1e-12), name
    # Nothing was cut at step 0: the two agree there; at step 200 the cut items BFCL credits open a gap.
    assert rows[AS_BFCL]["step0"] == rows[OURS]["step0"]
    assert hand["bfcl"][200] - hand["ours"][200] == pytest.approx(100 * (12 + 2) / 3 / 24, rel=1e-12)


def test_overlong_items_left_out_of_the_total_are_back_in_bfcls(item_run, capsys):
    folder = item_run(planted, PASSES, size=SIZE, verdict_columns=True, overlong_counted_wrong=False)
    rows = table(capsys, folder)
    hand = by_hand(overlong_counted_wrong=False)
    assert float(rows[OURS]["step_last"]) == pytest.approx(hand["ours"][200], rel=1e-12)
    assert float(rows[AS_BFCL]["step_last"]) == pytest.approx(hand["bfcl"][200], rel=1e-12)
    assert hand["bfcl"] == by_hand(overlong_counted_wrong=True)["bfcl"]  # BFCL's own count has no such rule


def test_the_findings_give_the_change_as_bfcl_scores_it_and_the_counts_per_step(item_run, capsys):
    folder = item_run(planted, PASSES, size=SIZE, verdict_columns=True)
    found = findings(capsys, folder)
    hand, counts = by_hand(), counts_by_hand()
    as_bfcl = found["as_bfcl_scores"]
    assert as_bfcl["measured"] is True and as_bfcl["not_measured"] is None
    assert as_bfcl["delta_pp"] == pytest.approx(hand["bfcl"][200] - hand["bfcl"][0], rel=1e-12)
    assert found["with_credit"]["delta_pp"] == pytest.approx(hand["ours"][200] - hand["ours"][0], rel=1e-12)
    steps = found["per_step"]["steps"]
    assert [s["step"] for s in steps] == [0, 100, 200] and [s["passes"] for s in steps] == [3, 1, 3]
    for step in steps:
        flat = {f"{g}.{k}": v for g in ("abstention", "tool_call") for k, v in step[g].items()}
        assert flat == counts[step["step"]], step["step"]
    assert main(["--data", str(folder), "--table"]) == 0
    prose = capsys.readouterr().out
    d_bfcl, d_ours = hand["bfcl"][200] - hand["bfcl"][0], hand["ours"][200] - hand["ours"][0]
    assert (f"{AS_BFCL}: {d_bfcl:+.2f} pp ({hand['bfcl'][0]:.2f} -> {hand['bfcl'][200]:.2f}; truncated and overlong "
            f"items as BFCL's own scoring counts them, overlong ones in the total), {OURS} {d_ours:+.2f} pp "
            "(truncated answers counted wrong, overlong items by the pass's rule).") in prose
    c100, c200 = counts[100], counts[200]
    assert (f"summed over each step's passes: step 100: abstention {c100['abstention.truncated']} truncated "
            f"({c100['abstention.truncated_bfcl_correct']} correct by BFCL); step 200: abstention "
            f"{c200['abstention.truncated']} truncated ({c200['abstention.truncated_bfcl_correct']} correct by BFCL), "
            f"{c200['abstention.overlong']} overlong ({c200['abstention.overlong_bfcl_correct']} correct by BFCL); "
            f"tool call {c200['tool_call.truncated']} truncated ({c200['tool_call.truncated_bfcl_correct']} correct by "
            "BFCL); none at the other scored step.") in prose
    assert (f"a reasoning trace alone (correct_empty_reasoning: BFCL credits them, and all three abstention rows "
            f"count them correct): {c200['abstention.correct_empty_reasoning']} at step 200; none at the other 2 "
            "scored steps.") in prose


def test_a_csv_from_before_contract_1_10_has_no_bfcl_row_and_says_why(item_run, capsys):
    folder = item_run(planted, PASSES, size=SIZE, unparsed_column=False)
    assert AS_BFCL not in table(capsys, folder)
    found = findings(capsys, folder)
    reason = ("bfcl_by_category.csv has no truncated, truncated_bfcl_correct, overlong, overlong_bfcl_correct "
              "columns (written before contract 1.10)")
    assert found["as_bfcl_scores"] == {"measured": False, "not_measured": reason, "first": None, "last": None,
                                       "delta_pp": None}
    assert found["per_step"]["measured"] is False and found["per_step"]["steps"] is None
    assert main(["--data", str(folder), "--table"]) == 0
    assert f"{AS_BFCL}: not measured ({reason})." in capsys.readouterr().out


def test_empty_cells_name_the_passes_and_leave_the_row_out(item_run, capsys):
    folder = item_run(planted, PASSES, size=SIZE)  # the 1.10 columns in the header, every cell empty
    assert AS_BFCL not in table(capsys, folder)
    found = findings(capsys, folder)["as_bfcl_scores"]
    assert found["measured"] is False and found["delta_pp"] is None
    assert found["not_measured"] == (
        "truncated, truncated_bfcl_correct, overlong, overlong_bfcl_correct empty for the abstention categories at "
        "step 0 pass 1, step 0 pass 2, step 0 pass 3, step 100 pass 1, step 200 pass 1, step 200 pass 2 and 1 more "
        "(7 of 7 passes): BFCL's verdict on their truncated and overlong items was not recorded")


def test_overlong_items_of_a_pass_whose_rule_cannot_be_read_leave_the_row_out(item_run, capsys):
    folder = item_run(planted, PASSES, size=SIZE, verdict_columns=True)
    (folder / "passes" / "step_0200_pass_2" / "request.json").unlink()
    assert AS_BFCL not in table(capsys, folder)
    assert findings(capsys, folder)["as_bfcl_scores"]["not_measured"] == (
        "step 200 pass 2 has overlong items and no request.json in its pass folder to tell whether its total holds "
        "them")


def test_the_report_page_shows_the_truncated_counts_and_bfcls_number_beside_the_projects(item_run, tmp_path,
                                                                                          capsys):
    folder = item_run(planted, PASSES, size=SIZE, verdict_columns=True)
    for step in PASSES:
        append_published(tmp_path / "checkpoints" / folder.name,
                         PublishedCheckpoint(step=step, path=f"step_{step:04d}", weights_sha256="0" * 64))
    code = main(["--data", str(folder), "--checkpoints-dir", str(tmp_path / "checkpoints"), "--report"])
    assert code == 0, capsys.readouterr().err
    # kept for people to look at under make test (TOOLCANARY_TEST_OUTPUT), like the report page tests' shots
    shots = Path(os.environ["TOOLCANARY_TEST_OUTPUT"]) / "report-pages" if "TOOLCANARY_TEST_OUTPUT" in os.environ \
        else tmp_path / "shots"
    seen = inspect_page(folder / "report" / "index.html", shots / "truncated_run.png")
    assert seen["errors"] == [] and seen["outside_requests"] == []
    assert list(seen["headline"])[:3] == [AS_BFCL, OURS, NO_CREDIT]
    hand = by_hand()
    for name, key in ((AS_BFCL, "bfcl"), (OURS, "ours")):
        (first, first_value), (last, last_value) = seen["headline"][name][:2]
        assert (first, last) == (f"{hand[key][0]:.2f}", f"{hand[key][200]:.2f}"), name
        assert float(last_value) == pytest.approx(hand[key][200], rel=1e-12), name
    counts = counts_by_hand()
    shown = {step: cells for step, cells in seen["overrides"]}
    assert sorted(shown) == sorted(PASSES)
    for step, cells in shown.items():
        # Every column the page shows, as the count made here; reasoning-only credit is an abstention column.
        assert cells == {k: str(v) for k, v in counts[step].items() if k != "tool_call.correct_empty_reasoning"}, step
    assert "Truncated and overlong items per step" in seen["text"]
    assert f"{AS_BFCL}: {hand['bfcl'][200] - hand['bfcl'][0]:+.2f} pp" in seen["text"]


def test_counts_empty_at_every_pass_read_not_measured_and_some_empty_read_n_a(item_run, capsys):
    found = findings(capsys, item_run(planted, PASSES, size=SIZE, name="empty"))["per_step"]
    assert found == {"measured": False, "steps": None, "empty_cells": None, "not_measured": (
        "truncated, truncated_bfcl_correct, overlong, overlong_bfcl_correct, correct_empty_reasoning empty at every "
        "pass: no pass recorded them")}
    # One pass whose answers were not classified: its reasoning-only count is empty, the step's sum n/a.
    def unclassified_at_step_100(step, pass_index, category, item):
        outcome, answer, bfcl, tokens = planted(step, pass_index, category, item)
        return (outcome, None if step == 100 else answer, bfcl, tokens)

    folder = item_run(unclassified_at_step_100, PASSES, size=SIZE, verdict_columns=True, name="partly")
    found = findings(capsys, folder)["per_step"]
    assert found["measured"] is True and found["empty_cells"] == "step 100 pass 1 (1 of 7 passes)"
    at_100 = found["steps"][1]["abstention"]
    assert at_100["correct_empty_reasoning"] is None and at_100["truncated"] == 4
