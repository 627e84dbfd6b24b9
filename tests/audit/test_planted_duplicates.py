"""Planted duplicates are found, each by the measure meant for it, and nothing else is flagged.

Plants (on top of the clean library and tasks):
- exact name: `Math.Factorial`, a different tool under BFCL's `math.factorial` name (simple_python_1);
- renamed near-duplicate schema: BFCL's `uber.ride` (live_simple_2-2-0) under the name `rides.request_car`;
- paraphrased query: a task that rewords live_simple_4-3-0 (Tel Aviv weather in Fahrenheit);
- a tool only a generated task offers (not in the library): BFCL's `validateUserInput` name.

    .venvs/eval/bin/python -m pytest tests/audit/test_planted_duplicates.py -q
"""

from __future__ import annotations

import copy
import csv

import pytest

from toolcanary.audit.bfcl_items import load_category
from toolcanary.contract.bfcl import AGGREGATE_NAMES, compute_aggregates

RUN = "planted"
PARAPHRASE = (
    "Hey, what are the current weather conditions over in Tel Aviv? Could you give them to me in "
    "Fahrenheit please.",
    "The user wants today's weather in Tel Aviv, reported in Fahrenheit.",
)


def bfcl_function(category: str, item_id: str) -> dict:
    item = next(i for i in load_category(category) if i.id == item_id)
    function = item.functions[0]
    return {
        "type": "function",
        "function": {
            "name": function.name,
            "description": function.description,
            "parameters": copy.deepcopy(function.parameters),
        },
    }


@pytest.fixture(scope="module")
def planted(tmp_path_factory, fx):
    root = tmp_path_factory.mktemp("planted")
    runs, results = root / "runs", root / "results"
    toolsets = copy.deepcopy(fx.CLEAN_TOOLS)
    renamed = bfcl_function("live_simple", "live_simple_2-2-0")
    renamed["function"]["name"] = "rides.request_car"
    toolsets["travel"] = {
        "Rides": [renamed],
        "Maths": [fx.tool("Math.Factorial", "Returns n! for a whole number.", n="whole number")],
    }
    library = fx.write_library(root / "library.json", toolsets)
    aquarium = fx.CLEAN_TOOLS["home"]["Aquarium"]
    task_only = fx.tool("validateUserInput", "Check what was typed into a form box.", box="box id")
    fx.write_steps(
        runs,
        RUN,
        {
            1: [
                fx.task_record(RUN, f"clean-{n}", q, i, aquarium) for n, (q, i) in enumerate(fx.CLEAN_QUERIES)
            ]
            + [fx.other_role_record(RUN)],
            2: [
                fx.task_record(RUN, "paraphrase", *PARAPHRASE, aquarium, step=2),
                fx.task_record(
                    RUN,
                    "offers-a-new-tool",
                    "Is the value in box 7 fine?",
                    "Check box 7.",
                    [task_only],
                    step=2,
                ),
            ],
        },
    )
    outcomes = {step: fx.make_outcomes(seed) for step, seed in ((0, 1), (30, 2))}
    for step, rows in outcomes.items():
        fx.write_pass(results, RUN, step, 1, rows)
    folder = fx.audit_run(library, runs, results, RUN)
    rows = {r["id"]: r for r in csv.DictReader((folder / "audit.csv").open())}
    return {
        "rows": rows,
        "md": (folder / "audit.md").read_text(),
        "outcomes": outcomes,
        "robustness": list(csv.DictReader((folder / "robustness.csv").open())),
    }


def flags(row: dict) -> set[str]:
    return {f for f in ("exact_name", "near_duplicate_schema", "query_overlap") if row[f] == "1"}


def test_an_exact_name_under_other_case_and_separators_is_flagged(planted):
    row = planted["rows"]["simple_python_1"]
    assert "exact_name" in flags(row)
    assert row["exact_name_tools"] == "math.factorial -> travel/Maths/Math.Factorial"


def test_a_renamed_copy_of_a_bfcl_schema_is_a_near_duplicate(planted):
    row = planted["rows"]["live_simple_2-2-0"]
    assert flags(row) == {"near_duplicate_schema"}, "the rename must not be caught by name"
    assert row["schema_tool"] == "travel/Rides/rides.request_car"
    assert float(row["schema_score"]) >= 0.8


def test_a_paraphrased_question_is_a_query_overlap(planted):
    row = planted["rows"]["live_simple_4-3-0"]
    assert "query_overlap" in flags(row)
    assert (row["query_task"], row["query_turn"]) == ("paraphrase", "turn 1")
    assert float(row["query_verbatim"]) < 0.5, "a paraphrase, not a copy: few 3-grams are verbatim"


def test_a_tool_only_a_generated_task_offered_counts_as_training(planted):
    row = planted["rows"]["simple_javascript_0"]
    assert "exact_name" in flags(row)
    assert "task:offers-a-new-tool/validateUserInput" in row["exact_name_tools"]


def test_every_flag_points_at_a_plant(planted):
    plants = ("Math.Factorial", "rides.request_car", "task:offers-a-new-tool", "paraphrase")
    flagged = {i: r for i, r in planted["rows"].items() if r["flagged"] == "1"}
    assert {"simple_python_1", "live_simple_2-2-0", "live_simple_4-3-0", "simple_javascript_0"} <= set(
        flagged
    )
    for item, row in flagged.items():
        evidence = " ".join(row[c] for c in ("exact_name_tools", "schema_tool", "query_task"))
        assert any(p in evidence for p in plants), (item, row)
        if "query_overlap" in flags(row):
            assert row["query_task"] == "paraphrase", item
        if "near_duplicate_schema" in flags(row):
            assert row["schema_tool"] == "travel/Rides/rides.request_car", item


def test_audit_md_lists_the_flagged_items_with_their_neighbours(planted):
    md = planted["md"]
    assert "- `live_simple_2-2-0` (live_simple): near_duplicate_schema" in md
    assert "`uber.ride` ~ `travel/Rides/rides.request_car` (cosine" in md
    assert "~ task `paraphrase`" in md and "Tel Aviv" in md
    total = next(line for line in md.splitlines() if line.startswith("| **all** |"))
    flagged_count = sum(r["flagged"] == "1" for r in planted["rows"].values())
    assert total.split("|")[6].strip() == str(flagged_count)
    assert "6 distinct tasks from 2 files" in md and "1 records of other roles" in md


def test_unflagged_aggregates_leave_exactly_the_flagged_items_out(planted, fx):
    flagged = {(r["category"], i) for i, r in planted["rows"].items() if r["flagged"] == "1"}
    got = {(int(r["step"]), r["aggregate"]): r for r in planted["robustness"]}
    for step, outcomes in planted["outcomes"].items():
        full = compute_aggregates(fx.count(outcomes))
        kept_counts = fx.count(outcomes, leave_out=flagged)
        kept = compute_aggregates(kept_counts)
        for name in AGGREGATE_NAMES:
            assert float(got[(step, name)]["full"]) == pytest.approx(full[name], abs=5e-5)
            assert float(got[(step, name)]["unflagged"]) == pytest.approx(kept[name], abs=5e-5)
        assert int(got[(step, "Live")]["items_unflagged"]) == sum(t for _, t in kept_counts.values())
        assert int(got[(step, "Live")]["items"]) - len(flagged) == sum(t for _, t in kept_counts.values())
