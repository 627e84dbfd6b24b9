"""Whether a training series moved beyond its step-to-step noise (`first_last_shift`, the study's training
table): its p-value against scipy's exact permutation test, its false-positive rate on series of a policy that
does not change, and its power on a planted drop in the tool-call share.

    .venvs/analysis/bin/python -m pytest tests/analysis/test_training_shift.py -q
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from toolcanary.analysis.training import first_last_shift


def shares(rng: np.random.Generator, probabilities: np.ndarray, turns: int = 32) -> np.ndarray:
    """The tool-call share of each step: `turns` assistant turns a step, each a call with its step's chance."""
    return rng.binomial(turns, probabilities) / turns


@pytest.mark.parametrize("seed", range(5))
def test_the_p_value_is_scipys_exact_permutation_test(seed):
    values = np.random.default_rng(seed).random(16)
    found = first_last_shift(values, 5, 0.05)
    reference = stats.permutation_test((values[-5:], values[:5]), lambda x, y: np.mean(x) - np.mean(y),
                                       permutation_type="independent", n_resamples=np.inf,
                                       alternative="two-sided")
    assert found["p"] == pytest.approx(reference.pvalue, abs=1e-12)
    assert found["shift"] == pytest.approx(values[-5:].mean() - values[:5].mean())


def test_a_policy_that_does_not_change_moves_at_most_as_often_as_the_level_says():
    rng = np.random.default_rng(0)
    runs = 2000
    moved = sum(first_last_shift(shares(rng, np.full(16, 0.5)), 5, 0.05)["moved"] for _ in range(runs))
    # Exact under exchangeability: at most 5 %, here with three binomial standard errors of slack.
    assert moved / runs <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / runs)


def test_a_planted_drop_in_the_tool_call_share_is_found():
    rng = np.random.default_rng(1)
    falling = np.linspace(0.5, 0.05, 16)
    found = [first_last_shift(shares(rng, falling), 5, 0.05) for _ in range(200)]
    assert np.mean([f["moved"] for f in found]) > 0.95 and all(f["shift"] < 0 for f in found)


def test_too_short_a_series_is_not_measurable_rather_than_unmoved():
    assert first_last_shift(np.array([0.1, 0.2, 0.3]), 5, 0.05)["not_measurable"]
    assert first_last_shift(np.array([0.1, 0.2, 0.3, 0.9]), 5, 0.05)["steps"] == 2
