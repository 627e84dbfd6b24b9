"""Two arms compared (make_figures --compare): a synthetic pair with a planted difference, checked against an
independent count of the planted outcomes and a bootstrap reference written here from the documented draw
order; two runs per arm with a planted spread between them, checked against a t interval computed here; and
the refusals of runs scored differently, at any step they share.

    .venvs/analysis/bin/python -m pytest tests/analysis/test_compare.py -q
"""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest
from scipy import stats

from toolcanary.analysis.__main__ import main
from toolcanary.analysis.compare import between_run_interval, bootstrap_changes, compare_folder, load_compared
from toolcanary.analysis.items import pair_steps
from toolcanary.analysis.settings import AnalysisSettings
from toolcanary.contract.bfcl import AGGREGATES, CATEGORIES, aggregate_value
from toolcanary.contract.manifests import EvalPassManifest

PASSES = {0: 2, 100: 2, 200: 2}
# Planted at step 200: run A loses ten abstention items, run B one; items whose number is a multiple of 3
# start wrong. In B, irrelevance_5 is correct in one of the two passes at step 200 (repeat noise).
LOST = {"a": {f"{c}_{i}" for c in ("irrelevance", "live_irrelevance") for i in (1, 2, 4, 5, 7)},
        "b": {"irrelevance_1"}}
# The 16 abstention items that start correct, in the order the spread runs lose them.
ABSTENTION = [f"{c}_{i}" for i in (1, 2, 4, 5, 7, 8, 10, 11) for c in ("irrelevance", "live_irrelevance")]
ONE_RUN_CAVEAT = "cannot say whether another seed of either recipe would show the same difference"


def planted(run: str):
    def outcome(step, pass_index, category, item):
        correct = int(item.rsplit("_", 1)[1]) % 3 != 0
        if step == 200 and item in LOST[run]:
            correct = False
        if run == "b" and step == 200 and item == "irrelevance_5":
            correct = pass_index == 1
        return ("correct" if correct else "wrong", "calls")
    return outcome


def losing(count: int):
    """A run that loses the first `count` abstention items of ABSTENTION at step 200, and nothing else."""
    def outcome(step, pass_index, category, item):
        correct = int(item.rsplit("_", 1)[1]) % 3 != 0 and not (step == 200 and item in ABSTENTION[:count])
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
    assert found["interval"]["method"] == "items_bootstrap"
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
    # One run per arm: the interval leaves out the spread between training runs, and the output says so beside
    # every "excludes 0".
    assert "B - A = +35.42 pp" in out and ONE_RUN_CAVEAT in out
    verdicts = [line for line in out.splitlines() if "excludes 0" in line]
    assert verdicts and all("these two training runs only" in line for line in verdicts)
    rows = list(csv.DictReader((root / "_compare" / "run-a_vs_run-b" / "tables" / "compare.csv").open()))
    assert float(rows[0]["difference_pp"]) == pytest.approx(abstention["difference_pp"])
    assert rows[0]["interval"] == "items_bootstrap"
    for suffix in ("png", "pdf"):
        assert (root / "_compare" / "run-a_vs_run-b" / "figures" / f"compare.{suffix}").stat().st_size > 1000


def _reference(paired_a, paired_b, replicates, seed):
    """The documented draw order of `bootstrap_changes`, written again from its docstring: each drawn item
    counts with its share of passes correct, summed item by item here."""
    a = {p.category: p for p in paired_a if p.size}
    b = {p.category: p for p in paired_b if p.size}
    rng = np.random.default_rng(seed)
    out = {name: {"a": [], "b": [], "difference": []} for name in ("Abstention required", "Tool call required")}

    def share(row) -> float:
        return sum(bool(x) for x in row) / len(row)

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
                counts[side][0][category] = (sum(share(p.a[i]) for i in rows), p.size)
                counts[side][1][category] = (sum(share(p.b[i]) for i in rows), p.size)
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
            np.testing.assert_allclose(got[name][side], np.array(values), rtol=0, atol=1e-9)
    # B's repeat noise (irrelevance_5, 1 of 2 passes at step 200) enters as a half, never as a drawn pass.
    halves = got["Abstention required"]["b"] * 24 / 100 * 2
    np.testing.assert_allclose(halves, np.round(halves), atol=1e-9)


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


def _t_interval(lost_a, lost_b, level=0.95):
    """By hand: each run's Abstention required change is -100 k / 24 (k of its 24 items lost); pooled two-sample
    t on those changes."""
    a = [-100 * k / 24 for k in lost_a]
    b = [-100 * k / 24 for k in lost_b]
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    df = len(a) + len(b) - 2
    s = math.sqrt((sum((x - mean_a) ** 2 for x in a) + sum((x - mean_b) ** 2 for x in b)) / df)
    half = stats.t.ppf((1 + level) / 2, df) * s * math.sqrt(1 / len(a) + 1 / len(b))
    return mean_b - mean_a, (mean_b - mean_a - half, mean_b - mean_a + half), s


def test_several_runs_per_arm_carry_the_spread_between_runs(tmp_path, monkeypatch, item_run, capsys):
    """Two runs per arm, the same arm means, a small and a large planted spread between seeds: the t interval
    is the one computed here, and the larger spread gives the wider interval."""
    spreads = {"narrow": ((10, 8), (1, 3)), "wide": ((12, 6), (0, 4))}
    for spread, arms in spreads.items():
        for side, lost in zip("ab", arms, strict=True):
            for seed, count in enumerate(lost, 1):
                item_run(losing(count), {0: 1, 100: 1, 200: 1}, name=f"{spread}-{side}{seed}", train_steps=0)
    monkeypatch.setenv("TOOLCANARY_RESULTS_DIR", str(tmp_path))
    found, widths = {}, {}
    for spread, (lost_a, lost_b) in spreads.items():
        arm_a, arm_b = f"{spread}-a1,{spread}-a2", f"{spread}-b1,{spread}-b2"
        assert main(["--compare", arm_a, arm_b]) == 0
        out = capsys.readouterr().out
        folder = tmp_path / "_compare" / f"{spread}-a1+{spread}-a2_vs_{spread}-b1+{spread}-b2"
        found[spread] = json.loads((folder / "tables" / "compare.json").read_text())
        row = found[spread]["aggregates"]["Abstention required"]
        difference, (low, high), s = _t_interval(lost_a, lost_b)
        assert row["difference_pp"] == pytest.approx(difference, abs=1e-9)
        assert row["difference_interval_pp"] == pytest.approx([low, high], abs=1e-9)
        assert row["between_run_sd_pp"] == pytest.approx(s, abs=1e-9)
        assert row["a"]["runs_delta_pp"] == pytest.approx([-100 * k / 24 for k in lost_a], abs=1e-9)
        interval = found[spread]["interval"]
        assert (interval["method"], interval["df"]) == ("between_runs_t", 2)
        assert interval["t_quantile"] == pytest.approx(stats.t.ppf(0.975, 2), abs=1e-12)
        widths[spread] = high - low
        assert "Student t on the runs' changes (2 df" in out and "spread between training runs" in out
        assert ONE_RUN_CAVEAT not in out and f"| {spread}-b2 | B |" in out
        assert (folder / "figures" / "compare.png").stat().st_size > 1000
    assert found["narrow"]["aggregates"]["Abstention required"]["difference_pp"] == pytest.approx(
        found["wide"]["aggregates"]["Abstention required"]["difference_pp"])
    assert widths["wide"] > 2 * widths["narrow"]
    # The narrow spread leaves 0 outside the interval; the wide one, with the same means, does not.
    assert [f["aggregates"]["Abstention required"]["difference_interval_pp"][0] > 0 for f in found.values()] == [
        True, False]
    text = (tmp_path / "_compare" / "narrow-a1+narrow-a2_vs_narrow-b1+narrow-b2" / "tables" / "compare.md")
    assert any(line.startswith("Abstention required:") and line.endswith("(the interval excludes 0).")
               for line in text.read_text().splitlines())
    # Two runs and one: three in all, one degree of freedom.
    assert main(["--compare", "narrow-a1,narrow-a2", "narrow-b1"]) == 0
    capsys.readouterr()
    one = json.loads((tmp_path / "_compare" / "narrow-a1+narrow-a2_vs_narrow-b1" / "tables"
                      / "compare.json").read_text())
    difference, interval, _ = _t_interval((10, 8), (1,))
    assert one["interval"]["df"] == 1
    assert one["aggregates"]["Abstention required"]["difference_interval_pp"] == pytest.approx(interval, abs=1e-9)


@pytest.mark.parametrize("runs", [(2, 2), (2, 1), (3, 3)])
def test_excludes_0_between_runs_holds_its_level_when_the_arms_do_not_differ(runs):
    """"The interval excludes 0" is a verdict: with both arms' runs drawn from one recipe (each run's change =
    the recipe's change + the spread between seeds + its own repeat and item noise), it fires in at most 5 % of
    comparisons, plus simulation error."""
    rng = np.random.default_rng(17)
    trials, fired = 2000, 0
    for _ in range(trials):
        changes = [-3.0 + rng.normal(0.0, 1.2, n) + rng.normal(0.0, 0.4, n) for n in runs]
        low, high = between_run_interval(*changes, 0.95)["difference"]
        fired += low > 0 or high < 0
    assert fired / trials <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / trials)


@pytest.mark.parametrize(("scoring", "field"), [
    ({"bfcl_eval_version": "2025.12.01"}, "bfcl_eval_version"),
    ({"served_max_model_len": 32768}, "served_max_model_len"),
    ({"served_enable_thinking": True}, "served_enable_thinking"),
    ({"contract_version": "1.0"}, "contract_version"),
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


def _rescore(run_dir, step, pass_index, **terms):
    """Rewrite one pass manifest as if that pass had been scored under `terms`."""
    path = run_dir / "passes" / f"step_{step:04d}_pass_{pass_index}" / "manifest.json"
    manifest = EvalPassManifest.model_validate_json(path.read_text())
    path.write_text(manifest.model_copy(update=terms).model_dump_json())


def test_a_thinking_mode_difference_at_a_middle_step_is_refused_naming_it(results, capsys):
    """Not at the span's ends (steps 0 and 200), and in the second run of arm B: every counted pass of every
    run is checked at every common step."""
    root, make = results
    _rescore(make("run-c", "b"), 100, 2, served_enable_thinking=True)
    assert main(["--compare", "run-a", "run-b,run-c"]) == 2
    err = capsys.readouterr().err
    assert "--compare run-a run-b,run-c: served_enable_thinking" in err
    assert "run-a step 0 pass 1 has None (not recorded)" in err and "run-c step 100 pass 2 has True" in err
    assert not (root / "_compare").exists()


def test_a_threads_difference_is_a_warning(results, capsys):
    root, make = results
    _rescore(make("run-c", "b"), 100, 1, threads=16)
    assert main(["--compare", "run-a", "run-c", "--bootstrap-replicates", "50"]) == 0
    captured = capsys.readouterr()
    assert "make_figures: warning: the passes sent different numbers of requests at once" in captured.err
    assert "16 in 1 pass(es), e.g. run-c step 100 pass 1" in captured.err
    found = json.loads((root / "_compare" / "run-a_vs_run-c" / "tables" / "compare.json").read_text())
    assert len(found["warnings"]) == 1 and "Warning: the passes sent" in captured.out


def test_runs_without_a_common_later_step_or_the_same_run_twice_are_refused(results, capsys):
    _, make = results
    make("run-d", "b", passes={0: 1, 150: 1})
    assert main(["--compare", "run-a", "run-d"]) == 2
    assert "the baseline and at least one later step scored in every run" in capsys.readouterr().err
    assert main(["--compare", "run-a,run-b", "run-d"]) == 2
    assert "run-d scored 0, 150" in capsys.readouterr().err
    assert main(["--compare", "run-a", "run-a"]) == 2
    assert "two different runs" in capsys.readouterr().err
    assert main(["--compare", "run-a,run-b", "run-b"]) == 2
    assert "two different runs" in capsys.readouterr().err
    assert main(["--compare", "run-a,", "run-b"]) == 2
    assert "Remove the empty name" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--compare", "run-a", "run-b", "--table"])


def test_the_compare_folder_names_every_run_of_each_arm(tmp_path):
    assert compare_folder(tmp_path, ["a1", "a2"], ["b1"]) == tmp_path / "_compare" / "a1+a2_vs_b1"
    long = [f"seed-{i}-" + "x" * 90 for i in range(3)]
    folder = compare_folder(tmp_path, long, ["b1", "b2"])
    assert len(folder.name.encode()) <= 255 and folder.name.startswith(f"{long[0]}+2more_vs_b1+1more_")
    other = compare_folder(tmp_path, [*long[:2], "seed-9-" + "x" * 90], ["b1", "b2"])
    assert other.name[:-12] == folder.name[:-12] and other != folder


AST_CATEGORIES = ["simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
                  "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"]


def hidden_calls(run: str):
    """Run "hide": at step 200 four abstention items of each category answer with call markup the server did not
    parse (BFCL credits it: still correct) and two call items stop calling; run "show": the same four answer
    with a parsed call (wrong). Every other answer is plain text on abstention items and a call on call items."""
    def outcome(step, pass_index, category, item):
        number = int(item.rsplit("_", 1)[1])
        abstention = category in ("irrelevance", "live_irrelevance")
        moved = step == 200 and number < 4
        if abstention:
            answer = ("unparsed_call" if run == "hide" else "calls") if moved else "text"
            return ("wrong" if answer == "calls" else "correct", answer, answer != "calls")
        answer = "text" if step == 200 and number < 2 and run == "hide" else "calls"
        return ("correct" if answer == "calls" and number % 2 == 0 else "wrong", answer,
                answer == "calls" and number % 2 == 0)
    return outcome


def test_the_behaviour_rows_show_what_bfcls_credit_hides(tmp_path, monkeypatch, item_run, capsys):
    """The no-credit abstention, BFCL's own abstention and the call-attempt shares, each run's change against a
    count of the planted answers written here."""
    for run in ("hide", "show"):
        item_run(hidden_calls(run), {0: 1, 200: 1}, name=run, train_steps=0)
    monkeypatch.setenv("TOOLCANARY_RESULTS_DIR", str(tmp_path))
    assert main(["--compare", "hide", "show"]) == 0
    out = capsys.readouterr().out
    rows = json.loads((tmp_path / "_compare" / "hide_vs_show" / "tables" / "compare.json").read_text())["aggregates"]

    def share(run, step, categories, counted):
        outcome = hidden_calls(run)
        values = [counted(*outcome(step, 1, c, f"{c}_{i}")) for c in categories for i in range(12)]
        return 100 * sum(values) / len(values)

    abstention, calls = ["irrelevance", "live_irrelevance"], AST_CATEGORIES
    expected = {
        "Abstention required": (abstention, lambda outcome, answer, bfcl: outcome == "correct"),
        "Abstention required, no unparsed credit": (
            abstention, lambda outcome, answer, bfcl: outcome == "correct" and answer != "unparsed_call"),
        "Abstention required, as BFCL scores it": (abstention, lambda outcome, answer, bfcl: bfcl),
        "Call attempted, abstention items": (abstention, lambda outcome, answer, bfcl: answer != "text"),
        "Call attempted, tool call items": (calls, lambda outcome, answer, bfcl: answer != "text"),
    }
    for name, (categories, counted) in expected.items():
        for side, run in (("a", "hide"), ("b", "show")):
            change = share(run, 200, categories, counted) - share(run, 0, categories, counted)
            assert rows[name][side]["delta_pp"] == pytest.approx(change, abs=1e-9), (name, run)
    # What the credit hides: run "hide" keeps its abstention score while it attempts calls on a sixth of the items.
    assert rows["Abstention required"]["a"]["delta_pp"] == 0
    assert rows["Abstention required, no unparsed credit"]["a"]["delta_pp"] == pytest.approx(-100 * 8 / 24)
    assert rows["Call attempted, abstention items"]["a"]["delta_pp"] == pytest.approx(100 * 8 / 24)
    assert rows["Call attempted, tool call items"]["a"]["delta_pp"] == pytest.approx(-100 * 20 / 120)
    assert "Call attempted, abstention items: hide changed +33.33 pp" in out


def test_a_behaviour_row_the_passes_do_not_record_is_not_measurable_not_zero(tmp_path, monkeypatch, item_run,
                                                                            capsys):
    for run in ("old-a", "old-b"):
        item_run(lambda step, pass_index, category, item: ("correct", None), {0: 1, 200: 1}, name=run,
                 train_steps=0)
    monkeypatch.setenv("TOOLCANARY_RESULTS_DIR", str(tmp_path))
    assert main(["--compare", "old-a", "old-b"]) == 0
    capsys.readouterr()
    rows = json.loads((tmp_path / "_compare" / "old-a_vs_old-b" / "tables" / "compare.json").read_text())["aggregates"]
    assert "not_measurable" not in rows["Abstention required"]
    for name in ("Abstention required, no unparsed credit", "Call attempted, abstention items",
                 "Abstention required, as BFCL scores it"):
        assert "does not record" in rows[name]["not_measurable"], name
