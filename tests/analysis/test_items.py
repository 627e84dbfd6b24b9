"""The paired comparison of two checkpoints (--items) on run folders written item by item with planted gains
and losses: counts against the planted ones, McNemar against statsmodels and scipy, the bootstrap interval
against a reference written here from the documented draw order, and the refusals.

    .venvs/analysis/bin/python -m pytest tests/analysis/test_items.py -q
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest
from statsmodels.stats.contingency_tables import mcnemar

from toolcanary.analysis.__main__ import main
from toolcanary.analysis.items import mcnemar_exact

ABSTENTION = ["irrelevance", "live_irrelevance"]
AST = ["simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
       "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"]
MULTI_TURN = ["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context"]
ORDER = ["simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
         "irrelevance", "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple",
         "live_irrelevance", "live_relevance", *MULTI_TURN]
GROUPS = {"Abstention required": ABSTENTION, "Tool call required": AST, "Non-Live": AST[:6], "Live": AST[6:],
          "Multi-Turn": MULTI_TURN}

# Planted at step 200 against step 0 (3 passes each). Items whose number is a multiple of 3 start wrong.
LOST = {("irrelevance", "irrelevance_1"), ("irrelevance", "irrelevance_2"),
        *(("live_irrelevance", f"live_irrelevance_{i}") for i in (1, 2, 4, 5, 7)),
        ("simple_python", "simple_python_1"), ("multiple", "multiple_2"), ("live_simple", "live_simple_4"),
        ("live_multiple", "live_multiple_5"), ("multi_turn_base", "multi_turn_base_5")}
GAINED = {("irrelevance", "irrelevance_3"), ("live_irrelevance", "live_irrelevance_6"),
          ("parallel", "parallel_0"), ("live_multiple", "live_multiple_9"),
          ("multi_turn_miss_func", "multi_turn_miss_func_3"),
          ("irrelevance", "irrelevance_4")}  # correct in 1 of 3 passes at step 0: folded wrong, then correct
# (step, category, id) -> the passes it is correct in, overriding the rest.
PARTIAL = {(0, "irrelevance", "irrelevance_4"): {1},
           (200, "live_irrelevance", "live_irrelevance_8"): {1, 2},   # 2 of 3: still correct, unchanged
           (200, "live_simple", "live_simple_0"): {3}}                # starts wrong, 1 of 3: still wrong


def planted(step: int, pass_index: int, category: str, item: str) -> tuple[str, str | None]:
    correct = int(item.rsplit("_", 1)[1]) % 3 != 0
    if step >= 100 and (category, item) in LOST:
        correct = False
    if step >= 100 and (category, item) in GAINED:
        correct = True
    if (step, category, item) in PARTIAL:
        correct = pass_index in PARTIAL[(step, category, item)]
    abstain = category in ABSTENTION
    answer = ("text" if correct else "calls") if abstain else ("calls" if correct else "text")
    return ("correct" if correct else "wrong_answer", answer)


PASSES = {0: 3, 100: 1, 200: 3}


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def items_json(capsys, folder: Path, *extra: str) -> dict:
    code, out, err = run_main(capsys, "--data", str(folder), "--findings", "--items", "--bootstrap-replicates",
                              "300", *extra)
    assert code == 0, err
    return json.loads(out)["items"]


def read_passes(folder: Path, step: int) -> dict[str, dict[str, list[bool]]]:
    """category -> id -> correct per pass (ascending), read with json alone, not the contract's readers."""
    found: dict[str, dict[str, list[bool]]] = {}
    for pass_dir in sorted((folder / "passes").glob(f"step_{step:04d}_pass_*"), key=lambda p: int(p.name.split("_")[-1])):
        for line in (pass_dir / "outcomes.jsonl").read_text().splitlines():
            item = json.loads(line)
            found.setdefault(item["category"], {}).setdefault(item["id"], []).append(item["outcome"] == "correct")
    return found


def independent_aggregates(correct: dict[str, float], total: dict[str, int]) -> dict[str, float]:
    def pooled(names):
        return 100 * sum(correct[n] for n in names) / sum(total[n] for n in names)

    def acc(name):
        return 100 * correct[name] / total[name]

    simple = (acc("simple_python") + acc("simple_java") + acc("simple_javascript")) / 3
    return {"Abstention required": pooled(ABSTENTION), "Tool call required": pooled(AST),
            "Non-Live": (simple + acc("multiple") + acc("parallel") + acc("parallel_multiple")) / 4,
            "Live": pooled(AST[6:]), "Multi-Turn": sum(acc(n) for n in MULTI_TURN) / 4}


def reference_bootstrap(folder: Path, step_a: int, step_b: int, replicates: int, seed: int,
                        level: float) -> dict[str, tuple[float, float]]:
    """docs/analysis.md's draw order, written again from the text: per replicate, per category in BFCL's
    category order, the item rows, then the passes at A, then the passes at B."""
    at_a, at_b = read_passes(folder, step_a), read_passes(folder, step_b)
    matrices = {}
    for category in ORDER:
        ids = sorted(at_a[category])
        matrices[category] = (np.array([at_a[category][i] for i in ids]), np.array([at_b[category][i] for i in ids]))
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = {}
    for _ in range(replicates):
        correct_a, correct_b, total = {}, {}, {}
        for category in ORDER:
            a, b = matrices[category]
            n = len(a)
            rows = rng.integers(0, n, size=n)
            pass_a = rng.integers(0, a.shape[1], size=n)
            pass_b = rng.integers(0, b.shape[1], size=n)
            correct_a[category] = sum(bool(a[rows[i], pass_a[i]]) for i in range(n))
            correct_b[category] = sum(bool(b[rows[i], pass_b[i]]) for i in range(n))
            total[category] = n
        for category in ORDER:
            draws.setdefault(category, []).append(100 * (correct_b[category] - correct_a[category]) / total[category])
        before, after = independent_aggregates(correct_a, total), independent_aggregates(correct_b, total)
        for name in GROUPS:
            draws.setdefault(name, []).append(after[name] - before[name])
    tail = (1 - level) / 2
    return {name: (float(np.quantile(v, tail)), float(np.quantile(v, 1 - tail))) for name, v in draws.items()}


def test_gained_and_lost_items_are_the_planted_ones(item_run, capsys):
    folder = item_run(planted, PASSES)
    found = items_json(capsys, folder)
    assert found["steps"] == [0, 200] and found["passes"] == {"a": [1, 2, 3], "b": [1, 2, 3]}
    for category, entry in found["categories"].items():
        assert entry["lost"] == sum(c == category for c, _ in LOST), category
        assert entry["gained"] == sum(c == category for c, _ in GAINED), category
        assert entry["items"] == 12
        assert entry["net"] == entry["gained"] - entry["lost"]
    for name, categories in GROUPS.items():
        entry = found["aggregates"][name]
        assert entry["lost"] == sum(c in categories for c, _ in LOST)
        assert entry["gained"] == sum(c in categories for c, _ in GAINED)
        assert entry["items"] == 12 * len(categories)
        # the rest is unchanged, correct or wrong as the base pattern (plus the partial items) says
        base_correct = sum(int(i) % 3 != 0 for i in range(12)) * len(categories)
        assert entry["unchanged_correct"] == base_correct - entry["lost"] - sum(
            c in categories for c, i in GAINED if int(i.rsplit("_", 1)[1]) % 3 != 0)
    assert found["left_out"] == {}
    written = list(csv.DictReader((folder / "tables" / "items_step0_step200.csv").open()))
    assert {(r["category"], r["id"], r["change"]) for r in written} == (
        {(c, i, "lost") for c, i in LOST} | {(c, i, "gained") for c, i in GAINED})
    partial = next(r for r in written if r["id"] == "irrelevance_4")
    assert (float(partial["share_correct_a"]), float(partial["share_correct_b"])) == (1 / 3, 1.0)
    assert (partial["answers_a"], partial["answers_b"]) == ("calls|text", "text")
    assert list(written[0]) == ["category", "id", "change", "share_correct_a", "share_correct_b", "answers_a",
                                "answers_b"]


@pytest.mark.parametrize("lost, gained", [(0, 0), (0, 5), (7, 7), (3, 11), (30, 10), (500, 430), (1, 0)])
def test_mcnemar_exact_matches_statsmodels_and_scipy(lost, gained):
    p = mcnemar_exact(lost, gained)
    assert p == pytest.approx(mcnemar([[40, lost], [gained, 25]], exact=True).pvalue, rel=1e-12, abs=1e-300)
    if lost + gained:
        assert p == pytest.approx(binomtest(min(lost, gained), lost + gained, 0.5).pvalue, rel=1e-9)
    else:
        assert p == 1.0


def test_the_findings_mcnemar_p_is_that_of_the_items_table(item_run, capsys):
    found = items_json(capsys, item_run(planted, PASSES))
    for entry in [*found["aggregates"].values(), *found["categories"].values()]:
        table = [[entry["unchanged_correct"], entry["lost"]], [entry["gained"], entry["unchanged_wrong"]]]
        assert entry["mcnemar_p"] == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-12)


def test_bootstrap_interval_matches_a_reference_from_the_documented_draw_order(item_run, capsys):
    folder = item_run(planted, PASSES)
    found = items_json(capsys, folder, "--bootstrap-seed", "11", "--interval-level", "0.9")
    reference = reference_bootstrap(folder, 0, 200, replicates=300, seed=11, level=0.9)
    assert found["bootstrap"] == {"replicates": 300, "seed": 11, "level": 0.9, "interval": "percentile"}
    for name, entry in [*found["aggregates"].items(), *found["categories"].items()]:
        assert entry["interval_pp"] == pytest.approx(list(reference[name]), rel=1e-12, abs=1e-12), name
    again = items_json(capsys, folder, "--bootstrap-seed", "11", "--interval-level", "0.9")
    assert again == found
    other = items_json(capsys, folder, "--bootstrap-seed", "12", "--interval-level", "0.9")
    assert other["aggregates"]["Live"]["interval_pp"] != found["aggregates"]["Live"]["interval_pp"]


def test_the_change_is_the_tables_when_every_item_is_paired(item_run, independent, capsys):
    folder = item_run(planted, PASSES)
    found = items_json(capsys, folder)
    means = independent.aggregates(folder / "bfcl_by_category.csv").groupby(level="step").mean()
    for name in GROUPS:
        assert found["aggregates"][name]["delta_pp"] == pytest.approx(means[name][200] - means[name][0], rel=1e-12)


def test_a_tie_between_two_passes_counts_as_not_correct(item_run, capsys):
    def outcome(step, pass_index, category, item):
        correct = int(item.rsplit("_", 1)[1]) % 3 != 0
        if (category, item) == ("live_irrelevance", "live_irrelevance_1") and step == 200:
            correct = pass_index == 1          # 1 of 2 at B, 2 of 2 at A: lost
        if (category, item) == ("multiple", "multiple_3") and step == 0:
            correct = pass_index == 2          # 1 of 2 at A: wrong, then 2 of 2 at B (base is wrong: stays)
        if (category, item) == ("multiple", "multiple_3") and step == 200:
            correct = True
        return ("correct" if correct else "wrong", "calls")

    found = items_json(capsys, item_run(outcome, {0: 2, 200: 2}))
    assert (found["categories"]["live_irrelevance"]["lost"], found["categories"]["multiple"]["gained"]) == (1, 1)
    assert sum(e["lost"] + e["gained"] for e in found["categories"].values()) == 2


def test_the_cli_prints_the_finding_and_writes_the_changed_items(item_run, capsys):
    folder = item_run(planted, PASSES)
    code, out, err = run_main(capsys, "--data", str(folder), "--items", "--steps", "0", "200",
                              "--bootstrap-replicates", "300")
    assert code == 0, err
    reference = reference_bootstrap(folder, 0, 200, replicates=300, seed=0, level=0.95)
    clauses = []
    for name, categories in GROUPS.items():
        lost = sum(c in categories for c, _ in LOST)
        gained = sum(c in categories for c, _ in GAINED)
        p = binomtest(min(lost, gained), lost + gained, 0.5).pvalue
        low, high = reference[name]
        clauses.append(f"{name} lost {lost} and gained {gained} items (net {gained - lost:+d}, McNemar p={p:.2g}, "
                       f"95% bootstrap interval of the change [{low:+.2f}, {high:+.2f}] pp)")
    assert out.startswith("Paired by item, step 0 to 200: " + "; ".join(clauses) + ".\n")
    assert "  irrelevance (12 items): lost 2, gained 2" in out
    assert f"wrote {folder / 'tables' / 'items_step0_step200.csv'}" in err
    assert not (folder / "tables" / "findings.json").exists()


def test_the_default_steps_are_the_baseline_and_the_last(item_run, capsys):
    folder = item_run(planted, PASSES)
    assert items_json(capsys, folder)["steps"] == [0, 200]
    assert items_json(capsys, folder, "--baseline-step", "100")["steps"] == [100, 200]
    assert items_json(capsys, folder, "--steps", "100", "200")["passes"] == {"a": [1], "b": [1, 2, 3]}


def test_findings_carry_items_and_stability_under_their_keys(item_run, capsys):
    folder = item_run(planted, PASSES)
    code, out, err = run_main(capsys, "--data", str(folder), "--findings", "--items", "--stability",
                              "--bootstrap-replicates", "50")
    assert code == 0, err
    found = json.loads(out)
    assert set(found) == {"bfcl", "training", "training_distribution", "items", "stability"}
    assert json.loads((folder / "tables" / "findings.json").read_text()) == found
    assert (folder / "tables" / "stability.csv").is_file()


def test_only_the_passes_in_the_csv_count(item_run, capsys):
    folder = item_run(planted, PASSES)
    before = items_json(capsys, folder)
    # a refused or unfinished pass leaves a folder without rows: its outcomes must not count
    extra = folder / "passes" / "step_0200_pass_4"
    shutil.copytree(folder / "passes" / "step_0200_pass_1", extra)
    (extra / "outcomes.jsonl").write_text((extra / "outcomes.jsonl").read_text().replace('"correct"', '"wrong"'))
    shutil.copytree(extra, folder / "passes" / "step_0300_pass_1")
    assert items_json(capsys, folder) == before


def test_a_pass_whose_outcomes_disagree_with_the_csv_is_refused(item_run, capsys):
    folder = item_run(planted, PASSES)
    outcomes = folder / "passes" / "step_0200_pass_2" / "outcomes.jsonl"
    lines = outcomes.read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if '"irrelevance"' in line and '"correct"' in line)
    lines[first] = lines[first].replace('"correct"', '"wrong"')
    outcomes.write_text("\n".join(lines) + "\n")
    code, out, err = run_main(capsys, "--data", str(folder), "--items")
    assert code == 2 and out == ""
    assert str(outcomes) in err and "step 200 pass 2" in err
    assert "irrelevance: outcomes 6/12, CSV 7/12" in err and "must agree" in err
    assert not (folder / "tables").exists()


def test_a_run_without_pass_folders_says_they_are_needed_and_where(item_run, capsys):
    folder = item_run(planted, PASSES)
    shutil.rmtree(folder / "passes")
    for flag in ("--items", "--stability"):
        code, _, err = run_main(capsys, "--data", str(folder), flag)
        assert code == 2
        assert str(folder / "passes") in err and "passes/step_NNNN_pass_P/" in err and "outcomes.jsonl" in err
        assert "no such folder" in err
    assert not (folder / "tables").exists()


def test_a_missing_pass_folder_names_it(item_run, capsys):
    folder = item_run(planted, PASSES)
    shutil.rmtree(folder / "passes" / "step_0200_pass_3")
    code, _, err = run_main(capsys, "--data", str(folder), "--items")
    assert code == 2 and str(folder / "passes" / "step_0200_pass_3" / "request.json") in err


def test_steps_that_were_not_scored_are_refused(item_run, capsys):
    folder = item_run(planted, PASSES)
    code, _, err = run_main(capsys, "--data", str(folder), "--items", "--steps", "0", "50")
    assert code == 2 and "step 50" in err and "0, 100, 200" in err
    code, _, err = run_main(capsys, "--data", str(folder), "--items", "--steps", "100", "100")
    assert code == 2 and "two different scored steps" in err
    with pytest.raises(SystemExit) as exit_:
        main(["--data", str(folder), "--steps", "0", "200", "--table"])
    assert exit_.value.code == 2 and "give --items too" in capsys.readouterr().err


def test_items_outside_a_pass_total_are_left_out_of_the_pairing(item_run, capsys):
    def outcome(step, pass_index, category, item):
        if (step, pass_index, category, item) == (200, 2, "live_multiple", "live_multiple_4"):
            return ("overlong", "text")
        return planted(step, pass_index, category, item)

    folder = item_run(outcome, PASSES, overlong_counted_wrong=False)
    found = items_json(capsys, folder)
    assert found["left_out"] == {"live_multiple": 1}
    assert found["categories"]["live_multiple"]["items"] == 11
    code, out, _ = run_main(capsys, "--data", str(folder), "--items", "--bootstrap-replicates", "20")
    assert code == 0 and "left out (not counted in every pass of both steps): 1 of live_multiple" in out


def test_the_help_shows_the_item_flags_and_an_example(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for flag in ("--items", "--steps A B", "--stability", "--bootstrap-replicates", "--bootstrap-seed",
                 "--interval-level"):
        assert flag in out
    assert "make_figures --data volumes/results/RUN --items --steps 0 150 --stability --findings" in out


def test_the_bootstrap_settings_are_read_from_the_environment(item_run, capsys, monkeypatch):
    folder = item_run(planted, PASSES)
    monkeypatch.setenv("TOOLCANARY_ANALYSIS_BOOTSTRAP_REPLICATES", "40")
    monkeypatch.setenv("TOOLCANARY_ANALYSIS_BOOTSTRAP_SEED", "3")
    code, out, err = run_main(capsys, "--data", str(folder), "--findings", "--items", "--interval-level", "0.8")
    assert code == 0, err
    assert json.loads(out)["items"]["bootstrap"] == {"replicates": 40, "seed": 3, "level": 0.8,
                                                     "interval": "percentile"}
    code, _, err = run_main(capsys, "--data", str(folder), "--items", "--interval-level", "1.5")
    assert code == 2 and "--interval-level" in err and "TOOLCANARY_ANALYSIS_INTERVAL_LEVEL" in err


def test_with_the_table_the_finding_is_in_the_prose_and_findings_txt(item_run, capsys):
    folder = item_run(planted, PASSES)
    code, out, err = run_main(capsys, "--data", str(folder), "--table", "--items", "--stability",
                              "--bootstrap-replicates", "30")
    assert code == 0, err
    text = (folder / "tables" / "findings.txt").read_text()
    for start in ("Paired by item, step 0 to 200: Abstention required lost 7 and gained 3 items",
                  "Repeat stability: items whose outcome differs"):
        assert start in out and start in text
