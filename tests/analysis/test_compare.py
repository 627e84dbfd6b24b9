"""Two runs compared (make_figures --compare): a synthetic pair with a planted difference, checked against an
independent count of the planted outcomes and a bootstrap reference written here from the documented draw
order; and the refusals of runs scored differently.

    .venvs/analysis/bin/python -m pytest tests/analysis/test_compare.py -q
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from toolcanary.analysis.__main__ import main
from toolcanary.analysis.compare import bootstrap_changes, load_compared
from toolcanary.analysis.items import pair_steps
from toolcanary.analysis.settings import AnalysisSettings
from toolcanary.contract.bfcl import AGGREGATES, CATEGORIES, aggregate_value

PASSES = {0: 2, 100: 2, 200: 2}
# Planted at step 200: run A loses ten abstention items, run B one; items whose number is a multiple of 3
# start wrong. In B, irrelevance_5 is correct in one of the two passes at step 200 (repeat noise).
LOST = {"a": {f"{c}_{i}" for c in ("irrelevance", "live_irrelevance") for i in (1, 2, 4, 5, 7)},
        "b": {"irrelevance_1"}}


def planted(run: str):
    def outcome(step, pass_index, category, item):
        correct = int(item.rsplit("_", 1)[1]) % 3 != 0
        if step == 200 and item in LOST[run]:
            correct = False
        if run == "b" and step == 200 and item == "irrelevance_5":
            correct = pass_index == 1
        return ("correct" if correct else "wrong", "calls")
    return outcome


def expected_change(run: str, name: str) -> float:
    """The aggregate at step 200 minus at step 0, from the planted outcomes directly (share of passes correct)."""
    outcome = planted(run)
    aggregate = next(a for a in AGGREGATES if a.name == name)

    def counts(step):
        return {c: (sum(sum(outcome(step, p, c, f"{c}_{i}")[0] == "correct" for p in (1, 2)) / 2
                        for i in range(12)), 12) for c in aggregate.categories}
    return aggregate_value(name, counts(200)) - aggregate_value(name, counts(0))


@pytest.fixture
def results(tmp_path, monkeypatch, item_run):
    def make(name, run, passes=PASSES, **options):
        return item_run(planted(run), passes, name=name, **options)

    make("run-a", "a")
    make("run-b", "b")
    monkeypatch.setenv("TOOLCANARY_RESULTS_DIR", str(tmp_path))
    return tmp_path, make


def test_the_planted_difference_is_found_with_each_runs_change(results, capsys):
    root, _ = results
    assert main(["--compare", "run-a", "run-b", "--bootstrap-replicates", "400"]) == 0
    out = capsys.readouterr().out
    found = json.loads((root / "_compare" / "run-a_vs_run-b" / "tables" / "compare.json").read_text())
    assert found["span"] == [0, 200] and found["common_steps"] == [0, 100, 200]
    for name in ("Abstention required", "Tool call required", "Multi-Turn"):
        row = found["aggregates"][name]
        assert row["a"]["delta_pp"] == pytest.approx(expected_change("a", name), abs=1e-9)
        assert row["b"]["delta_pp"] == pytest.approx(expected_change("b", name), abs=1e-9)
        assert row["difference_pp"] == pytest.approx(expected_change("b", name) - expected_change("a", name),
                                                     abs=1e-9)
    abstention = found["aggregates"]["Abstention required"]
    # A lost 10 of 24 items (-41.67 pp), B 1 and half of one (-6.25 pp): B - A = +35.42 pp
    assert (round(abstention["a"]["delta_pp"], 2), round(abstention["b"]["delta_pp"], 2)) == (-41.67, -6.25)
    assert abstention["paired_categories"] == ["irrelevance", "live_irrelevance"]
    low, high = abstention["difference_interval_pp"]
    assert low <= abstention["difference_pp"] <= high and low > 0
    assert found["aggregates"]["Tool call required"]["difference_pp"] == 0
    assert "## run-a (steps 0, 100, 200)" in out and "| Abstention required |" in out
    assert "B - A = +35.42 pp" in out and "the interval excludes 0" in out
    rows = list(csv.DictReader((root / "_compare" / "run-a_vs_run-b" / "tables" / "compare.csv").open()))
    assert float(rows[0]["difference_pp"]) == pytest.approx(abstention["difference_pp"])
    for suffix in ("png", "pdf"):
        assert (root / "_compare" / "run-a_vs_run-b" / "figures" / f"compare.{suffix}").stat().st_size > 1000


def _reference(paired_a, paired_b, replicates, seed):
    """The documented draw order of `bootstrap_changes`, written again from its docstring."""
    a = {p.category: p for p in paired_a if p.size}
    b = {p.category: p for p in paired_b if p.size}
    rng = np.random.default_rng(seed)
    out = {name: {"a": [], "b": [], "difference": []} for name in ("Abstention required", "Tool call required")}
    for _ in range(replicates):
        counts = {"a": ({}, {}), "b": ({}, {})}
        for category in [c.name for c in CATEGORIES if c.name in a or c.name in b]:
            shared = category in a and category in b and a[category].ids == b[category].ids
            rows = None
            for side, table in (("a", a), ("b", b)):
                if category not in table:
                    continue
                p = table[category]
                if not (shared and side == "b"):
                    rows = rng.integers(0, p.size, size=p.size)
                first = rng.integers(0, p.a.shape[1], size=p.size)
                last = rng.integers(0, p.b.shape[1], size=p.size)
                counts[side][0][category] = (int(p.a[rows, first].sum()), p.size)
                counts[side][1][category] = (int(p.b[rows, last].sum()), p.size)
        for name in out:
            change = {s: aggregate_value(name, counts[s][1]) - aggregate_value(name, counts[s][0]) for s in "ab"}
            out[name]["a"].append(change["a"])
            out[name]["b"].append(change["b"])
            out[name]["difference"].append(change["b"] - change["a"])
    return out


def test_the_bootstrap_follows_its_documented_draw_order(results):
    root, _ = results
    settings = AnalysisSettings(results_dir=root)
    a, b = (load_compared(root, run, settings) for run in ("run-a", "run-b"))
    paired_a, paired_b = pair_steps(a.items, 0, 200), pair_steps(b.items, 0, 200)
    got = bootstrap_changes(paired_a, paired_b, 50, 7)
    want = _reference(paired_a, paired_b, 50, 7)
    for name, sides in want.items():
        for side, values in sides.items():
            np.testing.assert_array_equal(got[name][side], np.array(values))


def test_pairing_by_item_narrows_the_interval_of_the_difference(results):
    """The same items in both runs: the shared difficulty cancels, so the paired interval is narrower than the
    one from drawing each run's items on their own."""
    root, _ = results
    settings = AnalysisSettings(results_dir=root)
    a, b = (load_compared(root, run, settings) for run in ("run-a", "run-b"))
    paired_a, paired_b = pair_steps(a.items, 0, 200), pair_steps(b.items, 0, 200)
    paired = bootstrap_changes(paired_a, paired_b, 600, 0)["Abstention required"]["difference"]
    # Rename B's items so that no category is shared: the same outcomes, drawn independently.
    from dataclasses import replace
    unshared = [replace(p, ids=tuple(f"other-{i}" for i in p.ids)) for p in paired_b]
    independent = bootstrap_changes(paired_a, unshared, 600, 0)["Abstention required"]["difference"]
    assert np.std(paired) < np.std(independent)


@pytest.mark.parametrize(("scoring", "field"), [
    ({"bfcl_eval_version": "2025.12.01"}, "bfcl_eval_version"),
    ({"served_max_model_len": 32768}, "served_max_model_len"),
    ({"categories": ["irrelevance"]}, "categories"),
    ({"sample_size": 5, "sample_seed": 1}, "sample_size"),
    ({"sample_ids": {"irrelevance": ["irrelevance_0"]}}, "sample_ids"),
    ({"temperature": 0.7}, "temperature"),
])
def test_runs_scored_differently_are_refused_naming_the_difference(results, capsys, scoring, field):
    root, make = results
    make("run-c", "b", scoring=scoring)
    assert main(["--compare", "run-a", "run-c"]) == 2
    err = capsys.readouterr().err
    assert f"--compare run-a run-c: {field}" in err and "re-score one run" in err
    assert not (root / "_compare" / "run-a_vs_run-c" / "tables").exists()


def test_runs_without_a_common_later_step_or_the_same_run_twice_are_refused(results, capsys):
    _, make = results
    make("run-d", "b", passes={0: 1, 150: 1})
    assert main(["--compare", "run-a", "run-d"]) == 2
    assert "the baseline and at least one later step scored in both runs" in capsys.readouterr().err
    assert main(["--compare", "run-a", "run-a"]) == 2
    assert "two different runs" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--compare", "run-a", "run-b", "--table"])
