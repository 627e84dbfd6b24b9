"""The paired comparison of two checkpoints (--items) on run folders written item by item with planted gains
and losses: counts against the planted ones, the change against the table's, the permutation test and the
bootstrap interval against references written here from their documented draw orders, McNemar against
statsmodels and scipy where it is reported, and the refusals. Simulated runs without a change check that the
permutation test rejects at its level whatever the two pass counts, where McNemar on majority-folded outcomes
does not; simulated runs with one check that it is found.

    .venvs/analysis/bin/python -m pytest tests/analysis/test_items.py -q
"""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest
from statsmodels.stats.contingency_tables import mcnemar

from toolcanary.analysis.__main__ import main
from toolcanary.analysis.items import (
    PairedCategory,
    mcnemar_exact,
    observed_changes,
    permutation_changes,
    permutation_p,
    tally,
)

ABSTENTION = ["irrelevance", "live_irrelevance"]
AST = ["simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
       "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"]
MULTI_TURN = ["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context"]
ORDER = ["simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
         "irrelevance", "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple",
         "live_irrelevance", "live_relevance", *MULTI_TURN]
GROUPS = {"Abstention required": ABSTENTION, "Tool call required": AST, "Non-Live": AST[:6], "Live": AST[6:],
          "Multi-Turn": MULTI_TURN}
TIE_PP = 1e-9  # the documented tolerance of "as large as the observed change"

# Planted at step 200 against step 0 (3 passes each). Items whose number is a multiple of 3 start wrong.
LOST = {("irrelevance", "irrelevance_1"), ("irrelevance", "irrelevance_2"),
        *(("live_irrelevance", f"live_irrelevance_{i}") for i in (1, 2, 4, 5, 7)),
        ("simple_python", "simple_python_1"), ("multiple", "multiple_2"), ("live_simple", "live_simple_4"),
        ("live_multiple", "live_multiple_5"), ("multi_turn_base", "multi_turn_base_5")}
GAINED = {("irrelevance", "irrelevance_3"), ("live_irrelevance", "live_irrelevance_6"),
          ("parallel", "parallel_0"), ("live_multiple", "live_multiple_9"),
          ("multi_turn_miss_func", "multi_turn_miss_func_3"),
          ("irrelevance", "irrelevance_4")}  # correct in 1 of 3 passes at step 0, then in all
# (step, category, id) -> the passes it is correct in, overriding the rest.
PARTIAL = {(0, "irrelevance", "irrelevance_4"): {1},
           (200, "live_irrelevance", "live_irrelevance_8"): {1, 2},   # 3 of 3, then 2 of 3
           (200, "live_simple", "live_simple_0"): {3}}                # 0 of 3, then 1 of 3
# An item moves when its share of passes correct does, so the two partial items at step 200 move too, where a
# majority fold would have kept them: one lost, one gained.
MOVED_LOST = LOST | {("live_irrelevance", "live_irrelevance_8")}
MOVED_GAINED = GAINED | {("live_simple", "live_simple_0")}


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


def share(passes: list[bool]) -> float:
    return sum(passes) / len(passes)


def changes_from_shares(shares_a: dict[str, float], shares_b: dict[str, float],
                        total: dict[str, int]) -> dict[str, float]:
    """B − A in pp per category and per group, from Σ over items of the share of passes correct."""
    found = {c: 100 * (shares_b[c] - shares_a[c]) / total[c] for c in ORDER}
    before, after = independent_aggregates(shares_a, total), independent_aggregates(shares_b, total)
    found.update({name: after[name] - before[name] for name in GROUPS})
    return found


def reference_bootstrap(folder: Path, step_a: int, step_b: int, replicates: int, seed: int,
                        level: float) -> dict[str, tuple[float, float]]:
    """docs/analysis.md's draw order, written again from the text: per category in BFCL's category order, the
    item rows of every replicate in one call; each drawn item counts with its share of passes correct."""
    at_a, at_b = read_passes(folder, step_a), read_passes(folder, step_b)
    rng = np.random.default_rng(seed)
    shares: dict[str, tuple[list[float], list[float]]] = {}
    total = {}
    for category in ORDER:
        ids = sorted(at_a[category])
        n = total[category] = len(ids)
        rows = rng.integers(0, n, size=(replicates, n))
        shares[category] = ([sum(share(at_a[category][ids[i]]) for i in rows[r]) for r in range(replicates)],
                            [sum(share(at_b[category][ids[i]]) for i in rows[r]) for r in range(replicates)])
    draws: dict[str, list[float]] = {}
    for r in range(replicates):
        found = changes_from_shares({c: s[0][r] for c, s in shares.items()}, {c: s[1][r] for c, s in shares.items()},
                                    total)
        for name, value in found.items():
            draws.setdefault(name, []).append(value)
    tail = (1 - level) / 2
    return {name: (float(np.quantile(v, tail)), float(np.quantile(v, 1 - tail))) for name, v in draws.items()}


def reference_permutation(folder: Path, step_a: int, step_b: int, permutations: int,
                          seed: int) -> dict[str, tuple[float, float]]:
    """name -> (change, p) of the permutation test, from docs/analysis.md's draw order written again here: per
    category in BFCL's category order, one hypergeometric draw per permutation and item correct in some but
    not all of its passes, for how many of its correct passes are dealt to A."""
    at_a, at_b = read_passes(folder, step_a), read_passes(folder, step_b)
    rng = np.random.default_rng(seed)
    observed_a, observed_b, total = {}, {}, {}
    dealt: dict[str, tuple[list[float], list[float]]] = {}
    for category in ORDER:
        ids = sorted(at_a[category])
        total[category] = len(ids)
        k_a, k_b = len(at_a[category][ids[0]]), len(at_b[category][ids[0]])
        observed_a[category] = sum(share(at_a[category][i]) for i in ids)
        observed_b[category] = sum(share(at_b[category][i]) for i in ids)
        together = [sum(at_a[category][i]) + sum(at_b[category][i]) for i in ids]
        mixed = np.array([s for s in together if 0 < s < k_a + k_b], dtype=np.int64)
        to_a = rng.hypergeometric(mixed, k_a + k_b - mixed, k_a, size=(permutations, len(mixed)))
        always = sum(s == k_a + k_b for s in together)
        correct_a = [k_a * always + int(sum(to_a[r])) for r in range(permutations)]
        dealt[category] = ([c / k_a for c in correct_a], [(sum(together) - c) / k_b for c in correct_a])
    observed = changes_from_shares(observed_a, observed_b, total)
    draws: dict[str, list[float]] = {name: [] for name in observed}
    for r in range(permutations):
        found = changes_from_shares({c: d[0][r] for c, d in dealt.items()}, {c: d[1][r] for c, d in dealt.items()},
                                    total)
        for name, value in found.items():
            draws[name].append(value)
    return {name: (observed[name], (1 + sum(abs(t) >= abs(observed[name]) - TIE_PP for t in draws[name]))
                   / (1 + permutations)) for name in observed}


def expected_moves(folder: Path, step_a: int, step_b: int, categories: list[str]) -> dict[str, int]:
    """The counts by share of passes correct, from the pass files read here."""
    at_a, at_b = read_passes(folder, step_a), read_passes(folder, step_b)
    counts = dict.fromkeys(("gained", "lost", "unchanged_correct", "unchanged_wrong", "unchanged_partial"), 0)
    for category in categories:
        for item, a in at_a[category].items():
            b = at_b[category][item]
            if share(b) != share(a):
                counts["gained" if share(b) > share(a) else "lost"] += 1
            elif all(a) and all(b):
                counts["unchanged_correct"] += 1
            elif not any(a) and not any(b):
                counts["unchanged_wrong"] += 1
            else:
                counts["unchanged_partial"] += 1
    return counts


def test_gained_and_lost_items_are_those_whose_share_moved(item_run, capsys):
    folder = item_run(planted, PASSES)
    found = items_json(capsys, folder)
    assert found["steps"] == [0, 200] and found["passes"] == {"a": [1, 2, 3], "b": [1, 2, 3]}
    for category, entry in found["categories"].items():
        assert entry["lost"] == sum(c == category for c, _ in MOVED_LOST), category
        assert entry["gained"] == sum(c == category for c, _ in MOVED_GAINED), category
        assert entry["items"] == 12
        assert entry["net"] == entry["gained"] - entry["lost"]
        assert {k: entry[k] for k in expected_moves(folder, 0, 200, [category])} == expected_moves(
            folder, 0, 200, [category])
    for name, categories in GROUPS.items():
        entry = found["aggregates"][name]
        assert entry["lost"] == sum(c in categories for c, _ in MOVED_LOST)
        assert entry["gained"] == sum(c in categories for c, _ in MOVED_GAINED)
        assert entry["items"] == 12 * len(categories)
        # the rest is unchanged, correct or wrong as the base pattern says
        base_correct = sum(int(i) % 3 != 0 for i in range(12)) * len(categories)
        assert entry["unchanged_correct"] == base_correct - entry["lost"] - sum(
            c in categories for c, i in MOVED_GAINED if int(i.rsplit("_", 1)[1]) % 3 != 0)
        assert entry["unchanged_partial"] == 0
    assert found["left_out"] == {}
    written = list(csv.DictReader((folder / "tables" / "items_step0_step200.csv").open()))
    assert {(r["category"], r["id"], r["change"]) for r in written} == (
        {(c, i, "lost") for c, i in MOVED_LOST} | {(c, i, "gained") for c, i in MOVED_GAINED})
    partial = next(r for r in written if r["id"] == "irrelevance_4")
    assert (float(partial["share_correct_a"]), float(partial["share_correct_b"])) == (1 / 3, 1.0)
    assert (partial["answers_a"], partial["answers_b"]) == ("calls|text", "text")
    less = next(r for r in written if r["id"] == "live_irrelevance_8")
    assert (less["change"], float(less["share_correct_a"]), float(less["share_correct_b"])) == ("lost", 1.0, 2 / 3)
    assert list(written[0]) == ["category", "id", "change", "share_correct_a", "share_correct_b", "answers_a",
                                "answers_b"]


def test_shares_are_compared_not_majorities(item_run, capsys):
    def outcome(step, pass_index, category, item):
        correct = int(item.rsplit("_", 1)[1]) % 3 != 0
        if (category, item) == ("live_irrelevance", "live_irrelevance_1") and step == 200:
            correct = pass_index == 1          # 2 of 2 at A, 1 of 2 at B: lost
        if (category, item) == ("multiple", "multiple_3"):
            correct = step == 200 or pass_index == 2   # 1 of 2 at A, 2 of 2 at B: gained
        if (category, item) == ("parallel", "parallel_4"):
            correct = pass_index == 1          # 1 of 2 at both: unchanged, partly
        return ("correct" if correct else "wrong", "calls")

    found = items_json(capsys, item_run(outcome, {0: 2, 200: 2}))
    assert (found["categories"]["live_irrelevance"]["lost"], found["categories"]["multiple"]["gained"]) == (1, 1)
    assert sum(e["lost"] + e["gained"] for e in found["categories"].values()) == 2
    assert found["categories"]["parallel"]["unchanged_partial"] == 1
    assert found["aggregates"]["Non-Live"]["unchanged_partial"] == 1


def test_equal_shares_over_different_pass_counts_are_unchanged():
    a = np.array([[True, False, False], [True, True, True], [False, False, False]])
    b = np.array([[True, True, False, False, False, False], [True, True, True, True, True, False],
                  [False] * 6])
    counted = tally(PairedCategory("multiple", ("x", "y", "z"), a, b, (), (), 0))
    assert (counted.gained, counted.lost, counted.unchanged_partial, counted.unchanged_wrong) == (0, 1, 1, 1)


@pytest.mark.parametrize("lost, gained", [(0, 0), (0, 5), (7, 7), (3, 11), (30, 10), (500, 430), (1, 0)])
def test_mcnemar_exact_matches_statsmodels_and_scipy(lost, gained):
    p = mcnemar_exact(lost, gained)
    assert p == pytest.approx(mcnemar([[40, lost], [gained, 25]], exact=True).pvalue, rel=1e-12, abs=1e-300)
    if lost + gained:
        assert p == pytest.approx(binomtest(min(lost, gained), lost + gained, 0.5).pvalue, rel=1e-9)
    else:
        assert p == 1.0


def test_mcnemar_is_reported_only_with_equal_pass_counts(item_run, capsys):
    folder = item_run(planted, PASSES)
    found = items_json(capsys, folder)
    for entry in [*found["aggregates"].values(), *found["categories"].values()]:
        table = [[entry["unchanged_correct"], entry["lost"]], [entry["gained"], entry["unchanged_wrong"]]]
        assert entry["mcnemar_p"] == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-12)
    # one pass against three: an item is gained and lost at different rates without a change
    unequal = items_json(capsys, folder, "--steps", "100", "200")
    assert all(e["mcnemar_p"] is None for e in [*unequal["aggregates"].values(), *unequal["categories"].values()])
    code, out, err = run_main(capsys, "--data", str(folder), "--items", "--bootstrap-replicates", "50")
    assert code == 0, err
    assert "McNemar" not in out


def test_the_test_and_the_interval_match_references_from_the_documented_draw_orders(item_run, capsys):
    folder = item_run(planted, PASSES)
    found = items_json(capsys, folder, "--bootstrap-seed", "11", "--interval-level", "0.9")
    interval = reference_bootstrap(folder, 0, 200, replicates=300, seed=11, level=0.9)
    test = reference_permutation(folder, 0, 200, permutations=300, seed=11)
    assert found["bootstrap"] == {"replicates": 300, "seed": 11, "level": 0.9, "interval": "percentile"}
    assert {k: found["permutation"][k] for k in ("permutations", "seed", "sided")} == {
        "permutations": 300, "seed": 11, "sided": "two"}
    for name, entry in [*found["aggregates"].items(), *found["categories"].items()]:
        assert entry["interval_pp"] == pytest.approx(list(interval[name]), rel=1e-12, abs=1e-9), name
        assert entry["delta_pp"] == pytest.approx(test[name][0], rel=1e-12, abs=1e-12), name
        assert entry["permutation_p"] == test[name][1], name
    again = items_json(capsys, folder, "--bootstrap-seed", "11", "--interval-level", "0.9")
    assert again == found
    other = items_json(capsys, folder, "--bootstrap-seed", "12", "--interval-level", "0.9")
    assert other["aggregates"]["Live"]["interval_pp"] != found["aggregates"]["Live"]["interval_pp"]
    assert [e["permutation_p"] for e in other["categories"].values()] != [
        e["permutation_p"] for e in found["categories"].values()]


def test_the_change_is_the_tables_when_every_item_is_paired(item_run, independent, capsys):
    folder = item_run(planted, PASSES)
    found = items_json(capsys, folder)
    means = independent.aggregates(folder / "bfcl_by_category.csv").groupby(level="step").mean()
    for name in GROUPS:
        assert found["aggregates"][name]["delta_pp"] == pytest.approx(means[name][200] - means[name][0], rel=1e-12)


def test_the_change_and_its_test_follow_non_live_as_the_table_builds_it(item_run, independent, capsys):
    # Three simple_python items lost, two parallel items gained, over 3 passes then 2. Pooled, more items are
    # lost than gained; in the table's Non-Live, a mean of Simple (itself a mean of the three simple_*) and
    # three categories, each simple_python item weighs a third of a parallel one: a gain of 100·2/12/4 −
    # 100·3/12/12 = +2.08 pp.
    def outcome(step, pass_index, category, item):
        number = int(item.rsplit("_", 1)[1])
        correct = number % 3 != 0
        if step == 200 and category == "simple_python" and number in (1, 2, 4):
            correct = False
        if step == 200 and category == "parallel" and number in (0, 3):
            correct = True
        return ("correct" if correct else "wrong", "calls")

    folder = item_run(outcome, {0: 3, 200: 2})
    means = independent.aggregates(folder / "bfcl_by_category.csv").groupby(level="step").mean()
    table = means["Non-Live"][200] - means["Non-Live"][0]
    assert table == pytest.approx(100 * 2 / 12 / 4 - 100 * 3 / 12 / 12, rel=1e-12)
    found = items_json(capsys, folder)
    entry = found["aggregates"]["Non-Live"]
    assert (entry["lost"], entry["gained"], entry["net"]) == (3, 2, -1)  # descriptive, pooled
    assert entry["delta_pp"] == pytest.approx(table, rel=1e-12)
    # the statistic the permutation test ranks is that change, computed from the items read here
    at_a, at_b = read_passes(folder, 0), read_passes(folder, 200)
    paired = [PairedCategory(c, tuple(sorted(at_a[c])), np.array([at_a[c][i] for i in sorted(at_a[c])]),
                             np.array([at_b[c][i] for i in sorted(at_a[c])]), (), (), 0) for c in ORDER]
    statistic = observed_changes(paired)["Non-Live"]
    assert statistic == pytest.approx(table, rel=1e-12) and statistic > 0
    dealt = permutation_changes(paired, 300, 0)["Non-Live"]
    assert permutation_p(statistic, dealt) == entry["permutation_p"]
    code, out, err = run_main(capsys, "--data", str(folder), "--items", "--bootstrap-replicates", "300")
    assert code == 0, err
    assert f"; Non-Live +2.08 pp (permutation p={entry['permutation_p']:.2g}, 95% bootstrap interval" in out


# --- the permutation test's level and power, on simulated runs (module functions, no files) ---
# Non-Live's six categories at unequal sizes, so that its mean of category means weighs items unequally.
NON_LIVE_SIZES = {"simple_python": 90, "simple_java": 30, "simple_javascript": 20, "multiple": 60,
                  "parallel": 50, "parallel_multiple": 40}
RUNS, PERMUTATIONS, LEVEL = 300, 199, 0.05
ALLOWED = LEVEL + 3 * math.sqrt(LEVEL * (1 - LEVEL) / RUNS)  # 0.088: the level plus three simulation errors


def simulated(rng: np.random.Generator, passes_a: int, passes_b: int, shift: float = 0.0) -> list[PairedCategory]:
    """Non-Live's categories, each item with its own chance of a correct pass spread uniformly over 0..1 and
    independent passes; at B every chance moved by `shift`."""
    paired = []
    for category, n in NON_LIVE_SIZES.items():
        chance = rng.random(n)
        a = rng.random((n, passes_a)) < chance[:, None]
        b = rng.random((n, passes_b)) < np.clip(chance + shift, 0, 1)[:, None]
        paired.append(PairedCategory(category, tuple(f"{category}_{i}" for i in range(n)), a, b, (), (), 0))
    return paired


def folded_mcnemar(paired: list[PairedCategory], category: str | None = None) -> float:
    """The rule of the item comparison before the permutation test: each item folded to correct when correct
    in more than half of a step's passes (a tie not correct), McNemar on the pooled items."""
    chosen = [p for p in paired if category in (None, p.category)]
    at_a = np.concatenate([2 * p.a.sum(axis=1) > p.a.shape[1] for p in chosen])
    at_b = np.concatenate([2 * p.b.sum(axis=1) > p.b.shape[1] for p in chosen])
    return mcnemar_exact(int((at_a & ~at_b).sum()), int((~at_a & at_b).sum()))


def rejections(passes_a: int, passes_b: int, runs: int, shift: float, seed: int) -> dict[str, float]:
    """The share of simulated runs in which each test rejects at LEVEL, and in which the change was negative."""
    rng = np.random.default_rng(seed)
    rejected = dict.fromkeys(("Non-Live", "simple_python", "folded Non-Live", "folded simple_python",
                              "negative"), 0)
    for run in range(runs):
        paired = simulated(rng, passes_a, passes_b, shift)
        observed, dealt = observed_changes(paired), permutation_changes(paired, PERMUTATIONS, seed=run)
        for name in ("Non-Live", "simple_python"):
            rejected[name] += permutation_p(observed[name], dealt[name]) <= LEVEL
        rejected["folded Non-Live"] += folded_mcnemar(paired) <= LEVEL
        rejected["folded simple_python"] += folded_mcnemar(paired, "simple_python") <= LEVEL
        rejected["negative"] += observed["Non-Live"] < 0
    return {name: count / runs for name, count in rejected.items()}


@pytest.mark.parametrize("passes_a, passes_b", [(3, 2), (2, 1), (1, 1)])
def test_without_a_change_the_test_rejects_at_its_level(passes_a, passes_b):
    rates = rejections(passes_a, passes_b, RUNS, shift=0.0, seed=100 * passes_a + passes_b)
    assert rates["Non-Live"] <= ALLOWED and rates["simple_python"] <= ALLOWED, rates
    if passes_a == passes_b:
        assert rates["folded Non-Live"] <= ALLOWED, rates
    else:
        # the rule it replaced fails the same check: a tie counts as wrong, so the step with more passes (or
        # an even number) looks worse without a change
        assert rates["folded Non-Live"] > ALLOWED and rates["folded simple_python"] > ALLOWED, rates


@pytest.mark.parametrize("passes_a, passes_b", [(3, 2), (2, 1), (1, 1)])
def test_a_planted_change_is_found_with_its_sign(passes_a, passes_b):
    rates = rejections(passes_a, passes_b, runs=40, shift=-0.15, seed=7)
    assert rates["Non-Live"] >= 0.8 and rates["negative"] == 1.0, rates


def test_with_one_pass_each_the_test_is_mcnemars_sign_test():
    # one category: the aggregate is the pooled count, and dealing one pass each flips a discordant item's sign
    rng = np.random.default_rng(3)
    a = rng.random(400) < 0.7
    b = a.copy()
    b[np.flatnonzero(a)[:20]] = False          # lost 20
    b[np.flatnonzero(~a)[:8]] = True           # gained 8
    paired = [PairedCategory("multiple", tuple(f"m{i:03d}" for i in range(400)), a[:, None], b[:, None], (), (), 0)]
    permutations = 4000
    p = permutation_p(observed_changes(paired)["multiple"], permutation_changes(paired, permutations, 0)["multiple"])
    exact = mcnemar_exact(20, 8)
    assert abs(p - exact) < 4 * math.sqrt(exact * (1 - exact) / permutations), (p, exact)


def test_the_cli_prints_the_finding_and_writes_the_changed_items(item_run, capsys):
    folder = item_run(planted, PASSES)
    code, out, err = run_main(capsys, "--data", str(folder), "--items", "--steps", "0", "200",
                              "--bootstrap-replicates", "300")
    assert code == 0, err
    interval = reference_bootstrap(folder, 0, 200, replicates=300, seed=0, level=0.95)
    test = reference_permutation(folder, 0, 200, permutations=300, seed=0)
    clauses = []
    for name, categories in GROUPS.items():
        lost = sum(c in categories for c, _ in MOVED_LOST)
        gained = sum(c in categories for c, _ in MOVED_GAINED)
        (low, high), (change, p) = interval[name], test[name]
        clauses.append(f"{name} {change:+.2f} pp (permutation p={p:.2g}, 95% bootstrap interval [{low:+.2f}, "
                       f"{high:+.2f}] pp; lost {lost} and gained {gained} items)")
    assert out.startswith("Paired by item, step 0 to 200: " + "; ".join(clauses) + ".\n")
    second = out.splitlines()[1]
    for said in ("did the model change on these items", "how far the change would vary over other items like "
                 "these", "lost and gained compare each item's share of passes correct and are descriptive"):
        assert said in second
    assert "uneven" not in second  # 3 passes at each step
    # irrelevance: 1 and 2 lost, 3 and 4 gained (4 from 1 of 3 passes), the other 8 as the base pattern says
    assert "  irrelevance (12 items): change " in out and "; lost 2, gained 2, unchanged 5 correct and 3 wrong" in out
    assert f"wrote {folder / 'tables' / 'items_step0_step200.csv'}" in err
    assert not (folder / "tables" / "findings.json").exists()
    code, out, err = run_main(capsys, "--data", str(folder), "--items", "--steps", "100", "200",
                              "--bootstrap-replicates", "50")
    assert code == 0, err
    assert "(with 1 and 3 passes they are uneven even without a change)" in out.splitlines()[1]


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
    found = json.loads(out)["items"]
    assert found["bootstrap"] == {"replicates": 40, "seed": 3, "level": 0.8, "interval": "percentile"}
    assert (found["permutation"]["permutations"], found["permutation"]["seed"]) == (40, 3)
    code, _, err = run_main(capsys, "--data", str(folder), "--items", "--interval-level", "1.5")
    assert code == 2 and "--interval-level" in err and "TOOLCANARY_ANALYSIS_INTERVAL_LEVEL" in err


def test_with_the_table_the_finding_is_in_the_prose_and_findings_txt(item_run, capsys):
    folder = item_run(planted, PASSES)
    code, out, err = run_main(capsys, "--data", str(folder), "--table", "--items", "--stability",
                              "--bootstrap-replicates", "30")
    assert code == 0, err
    text = (folder / "tables" / "findings.txt").read_text()
    # Abstention: 7 items lost, 2 gained, irrelevance_4 from 1 of 3 passes to 3 and live_irrelevance_8 from 3
    # of 3 to 2: (−7 + 2 + 2/3 − 1/3) / 24 items = −19.44 pp
    for start in ("Paired by item, step 0 to 200: Abstention required -19.44 pp (permutation p=",
                  "Repeat stability: items whose outcome differs"):
        assert start in out and start in text
