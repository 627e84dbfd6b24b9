"""The BFCL V4 category table and the five aggregate definitions, on hand-computed examples.

Run: .venvs/dev/bin/python -m pytest tests/contract/test_aggregates.py -q
"""

import pytest

from toolcanary.contract import AGGREGATES, BY_NAME, OFFLINE_CATEGORIES, ContractError, compute_aggregates
from toolcanary.contract.bfcl import aggregate_value


def full_counts(correct_fraction=0.5):
    return {
        name: (int(BY_NAME[name].items * correct_fraction), BY_NAME[name].items)
        for name in OFFLINE_CATEGORIES
    }


def test_the_table_matches_bfcl_v4_item_counts():
    assert len(OFFLINE_CATEGORIES) == 17
    items = {a.name: a.items for a in AGGREGATES}
    assert items["Abstention required"] == 1124
    assert items["Tool call required"] == 2501
    assert sum(BY_NAME[c].items for c in OFFLINE_CATEGORIES) == 3641 + 800


def test_abstention_is_pooled_not_averaged():
    counts = full_counts()
    counts["irrelevance"] = (240, 240)  # 100 %
    counts["live_irrelevance"] = (442, 884)  # 50 %
    # pooled: (240 + 442) / 1124; an unweighted mean would give 75 %.
    assert aggregate_value("Abstention required", counts) == pytest.approx(100 * 682 / 1124)


def test_non_live_averages_simple_first_then_the_other_three():
    counts = full_counts()
    counts.update(
        simple_python=(400, 400),
        simple_java=(50, 100),
        simple_javascript=(0, 50),
        multiple=(100, 200),
        parallel=(200, 200),
        parallel_multiple=(0, 200),
    )
    simple = (100 + 50 + 0) / 3
    assert aggregate_value("Non-Live", counts) == pytest.approx((simple + 50 + 100 + 0) / 4)


def test_live_is_pooled_over_the_four_live_ast_categories():
    counts = full_counts()
    counts.update(
        live_simple=(258, 258),
        live_multiple=(0, 1053),
        live_parallel=(16, 16),
        live_parallel_multiple=(0, 24),
    )
    assert aggregate_value("Live", counts) == pytest.approx(100 * (258 + 16) / (258 + 1053 + 16 + 24))


def test_tool_call_required_pools_all_ten_ast_categories():
    counts = {name: (0, BY_NAME[name].items) for name in OFFLINE_CATEGORIES}
    counts["live_multiple"] = (1053, 1053)
    assert aggregate_value("Tool call required", counts) == pytest.approx(100 * 1053 / 2501)


def test_multi_turn_is_the_unweighted_mean_of_four():
    counts = full_counts()
    counts.update(
        multi_turn_base=(10, 20),
        multi_turn_miss_func=(0, 200),
        multi_turn_miss_param=(200, 200),
        multi_turn_long_context=(1, 4),
    )
    assert aggregate_value("Multi-Turn", counts) == pytest.approx((50 + 0 + 100 + 25) / 4)


def test_a_missing_category_is_refused_not_counted_as_zero():
    counts = full_counts()
    del counts["live_irrelevance"]
    with pytest.raises(ContractError, match="live_irrelevance"):
        compute_aggregates(counts)
    partial = compute_aggregates(counts, skip_incomplete=True)
    assert "Abstention required" not in partial and "Live" in partial


def test_relevance_does_not_enter_any_aggregate():
    counts = full_counts()
    before = compute_aggregates(counts)
    counts["live_relevance"] = (0, 16)
    assert compute_aggregates(counts) == before
