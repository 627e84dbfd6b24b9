"""Repeat stability (--stability) on run folders with planted flips: flips per step and category, the list,
the concentration measure against the formula computed by hand, the answer kinds of flips, and one or no
repeated step.

    .venvs/analysis/bin/python -m pytest tests/analysis/test_stability.py -q
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from toolcanary.analysis.__main__ import main

PASSES = {0: 3, 100: 1, 150: 2, 200: 3}
# (step, category, id) -> (passes correct, answer kind per pass); everything else is correct in every pass.
FLIPS = {
    (0, "irrelevance", "irrelevance_1"): ({1, 2}, ("text", "text", "unparsed_call")),
    (150, "irrelevance", "irrelevance_1"): ({2}, ("unparsed_call", "text")),
    (200, "irrelevance", "irrelevance_1"): ({1, 3}, ("text", "unparsed_call", "text")),
    (0, "irrelevance", "irrelevance_2"): ({3}, ("calls", "calls", "text")),
    (200, "live_irrelevance", "live_irrelevance_5"): ({2}, ("unparsed_call", "text", "unparsed_call")),
    (150, "simple_python", "simple_python_3"): ({1}, ("calls", "calls")),          # wrong arguments: same kind
    (200, "simple_python", "simple_python_3"): ({1, 2}, ("calls", "calls", "calls")),
    (0, "multi_turn_base", "multi_turn_base_0"): ({1}, (None, None, None)),        # not classified
    # step 100 has one pass: an item there cannot flip
}
SIZE = 12


def planted(step: int, pass_index: int, category: str, item: str) -> tuple[str, str | None]:
    if (step, category, item) in FLIPS:
        correct_in, answers = FLIPS[(step, category, item)]
        return ("correct" if pass_index in correct_in else "wrong", answers[pass_index - 1])
    return ("correct", "text" if category in ("irrelevance", "live_irrelevance") else "calls")


def stability(capsys, folder: Path) -> dict:
    assert main(["--data", str(folder), "--findings", "--stability"]) == 0
    return json.loads(capsys.readouterr().out)["stability"]


def test_flips_per_step_and_category_are_the_planted_ones(item_run, capsys):
    folder = item_run(planted, PASSES, size=SIZE)
    found = stability(capsys, folder)
    assert found["repeated_steps"] == [0, 150, 200]
    for step in (0, 150, 200):
        entry = found["steps"][str(step)]
        assert entry["passes"] == list(range(1, PASSES[step] + 1))
        assert entry["items"] == 17 * SIZE
        planted_here = [k for k in FLIPS if k[0] == step]
        assert entry["flipping"] == len(planted_here)
        assert entry["share"] == pytest.approx(len(planted_here) / (17 * SIZE), rel=1e-12)
        for category, counts in entry["categories"].items():
            assert counts["items"] == SIZE
            assert counts["flipping"] == sum(c == category for _, c, _ in planted_here)
    rows = list(csv.DictReader((folder / "tables" / "stability.csv").open()))
    assert list(rows[0]) == ["step", "category", "id", "passes", "outcomes", "answers"]
    assert {(int(r["step"]), r["category"], r["id"]) for r in rows} == set(FLIPS)
    row = next(r for r in rows if (r["step"], r["id"]) == ("200", "live_irrelevance_5"))
    assert (row["passes"], row["outcomes"], row["answers"]) == (
        "1;2;3", "wrong;correct;wrong", "unparsed_call;text;unparsed_call")
    unclassified = next(r for r in rows if r["category"] == "multi_turn_base")
    assert unclassified["answers"] == "unclassified;unclassified;unclassified"


def test_concentration_against_the_uniform_expectation(item_run, capsys):
    found = stability(capsys, item_run(planted, PASSES, size=SIZE))["concentration"]
    assert found["measurable"] is True and found["repeated_steps"] == 3
    steps = 3
    expected_total = 0.0
    for category in {c for _, c, _ in FLIPS}:
        events = [i for (_, c, i) in FLIPS if c == category]
        q = len(events) / (SIZE * steps)
        expected = SIZE * (1 - (1 - q) ** steps)
        expected_total += expected
        got = found["categories"][category]
        assert (got["items"], got["flip_events"], got["distinct_flipping"]) == (SIZE, len(events), len(set(events)))
        assert got["expected_distinct"] == pytest.approx(expected, rel=1e-12)
        assert got["observed_over_expected"] == pytest.approx(len(set(events)) / expected, rel=1e-12)
    assert found["categories"]["live_relevance"] == {"items": SIZE, "flip_events": 0, "distinct_flipping": 0,
                                                     "expected_distinct": 0.0, "observed_over_expected": None}
    total = found["total"]
    assert (total["flip_events"], total["distinct_flipping"]) == (8, 5)
    assert total["expected_distinct"] == pytest.approx(expected_total, rel=1e-12)
    # irrelevance_1 flips at all three steps: 4 events on 2 items, against 12 (1 - (1 - 4/36)^3) = 3.57
    assert found["categories"]["irrelevance"]["expected_distinct"] == pytest.approx(12 * (1 - (32 / 36) ** 3))


def test_answer_kinds_of_flips(item_run, capsys):
    found = stability(capsys, item_run(planted, PASSES, size=SIZE))["answer_kinds"]
    assert found["categories"]["irrelevance"] == {"changed": 4, "same": 0, "unclassified": 0,
                                                  "seen": {"unparsed_call|text": 3, "calls|text": 1}}
    assert found["categories"]["simple_python"] == {"changed": 0, "same": 2, "unclassified": 0, "seen": {"calls": 2}}
    assert found["categories"]["multi_turn_base"]["unclassified"] == 1
    assert found["total"] == {"changed": 5, "same": 2, "unclassified": 1}


def test_the_prose_states_it_in_two_sentences(item_run, capsys):
    folder = item_run(planted, PASSES, size=SIZE)
    assert main(["--data", str(folder), "--stability"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == ("Repeat stability: items whose outcome differs between passes at step 0: 3 of 204 items "
                        "(1.5%, 3 passes), step 150: 2 of 204 items (1.0%, 2 passes), step 200: 3 of 204 items "
                        "(1.5%, 3 passes).")
    expected = sum(12 * (1 - (1 - n / 36) ** 3) for n in (4, 1, 2, 1))  # 7.5: 5 / 7.5 is below 0.75
    assert lines[1] == (f"  Across 3 repeated steps the 8 flip events fall on 5 distinct items, against {expected:.1f} "
                        "expected if spread uniformly (well below: a few items flip repeatedly); the answer kind"
                        " changed between passes in 5 of 8 flip events (1 not classified).")


def test_items_that_flip_at_every_step_read_as_concentrated(item_run, capsys):
    steps = {0: 2, 100: 2, 200: 2, 300: 2}

    def outcome(step, pass_index, category, item):
        flips = category == "live_irrelevance" and item in ("live_irrelevance_0", "live_irrelevance_1")
        return ("wrong" if flips and pass_index == 2 else "correct", "text")

    folder = item_run(outcome, steps, size=40)
    found = stability(capsys, folder)["concentration"]["categories"]["live_irrelevance"]
    assert (found["flip_events"], found["distinct_flipping"]) == (8, 2)
    assert found["expected_distinct"] == pytest.approx(40 * (1 - (1 - 8 / 160) ** 4))
    assert main(["--data", str(folder), "--stability"]) == 0
    assert "(well below: a few items flip repeatedly)" in capsys.readouterr().out


def test_one_repeated_step_is_not_measurable_across_steps(item_run, capsys):
    folder = item_run(planted, {0: 3, 200: 1}, size=SIZE)
    found = stability(capsys, folder)
    assert found["repeated_steps"] == [0]
    assert found["concentration"]["measurable"] is False
    assert "one repeated step (step 0)" in found["concentration"]["not_measurable"]
    assert found["steps"]["0"]["flipping"] == 3
    assert main(["--data", str(folder), "--stability"]) == 0
    assert "Concentration across steps not measurable (one repeated step (step 0)" in capsys.readouterr().out


def test_no_repeated_step(item_run, capsys):
    folder = item_run(planted, {0: 1, 200: 1}, size=SIZE)
    found = stability(capsys, folder)
    assert found["repeated_steps"] == [] and found["steps"] == {}
    assert found["concentration"]["not_measurable"] == "no step has two or more passes"
    assert main(["--data", str(folder), "--stability"]) == 0
    assert capsys.readouterr().out.startswith("Repeat stability: not measurable, no step has two or more passes.")
    assert (folder / "tables" / "stability.csv").read_text() == "step,category,id,passes,outcomes,answers\n"
