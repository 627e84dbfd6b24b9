"""Every verdict the findings print, calibrated by simulation on series shaped like ToolCanary's run.

A run here is what `load_bfcl` returns for 21 checkpoints every 10 steps with 3 passes at steps 0, 150 and
200 and one elsewhere (3/1/3), the 17 offline categories at their BFCL sizes. Each category's score wanders
from checkpoint to checkpoint with no trend (a stationary AR(1) at a given lag-1 correlation, or a random
walk), and each pass adds its own repeat noise. The findings are computed by the same functions make_figures
uses (`headline_rows`, `bfcl_findings`), and the rate at which each verdict fires must stay within its level
plus simulation error; the verdicts of the analysis before this calibration fired in 28 % to 70 % of such
series, which this test would catch. A planted change of the reference run's size shows the verdicts move.

    .venvs/analysis/bin/python -m pytest tests/analysis/test_verdicts.py -q
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from toolcanary.analysis.data import BfclRun, StepSeries
from toolcanary.analysis.findings import bfcl_findings
from toolcanary.analysis.settings import AnalysisSettings
from toolcanary.analysis.table import headline_rows
from toolcanary.analysis.verdicts import NULL_RHOS, null_statistics, repeat_noise_test
from toolcanary.contract.bfcl import ABSTENTION, AGGREGATE_NAMES, BY_NAME, OFFLINE_CATEGORIES

STEPS = np.arange(0, 201, 10)
REPEATS = {0: 3, 150: 3, 200: 3}
LEVEL = 0.05
SETTINGS = AnalysisSettings(verdict_level=LEVEL)
SIMULATED = 200
"""Runs per shape: five aggregates each, so 1,000 series per verdict and shape."""
# Shapes of trend-free wander: lag-1 correlation per checkpoint (1.0: a random walk), and its scale in pp.
SHAPES = {"white": (0.0, 1.0), "rho 0.54": (0.54, 1.0), "rho 0.9": (0.9, 1.0), "rho 0.95": (0.95, 1.0),
          "random walk": (1.0, 0.3), "random walk under pass noise": (1.0, 0.1)}
PASS_SD = 0.45
"""Repeat noise of one pass in pp, about the reference run's repeat s.d. of abstention."""


def wander(rho: float, scale: float, rng: np.random.Generator) -> np.ndarray:
    """One trend-free series at the checkpoints: stationary AR(1) with s.d. `scale`, or a random walk whose
    steps have s.d. `scale`."""
    shocks = rng.standard_normal(len(STEPS))
    if rho >= 1.0:
        return scale * np.concatenate([[0.0], np.cumsum(shocks[1:])])
    values = [shocks[0]]
    for shock in shocks[1:]:
        values.append(rho * values[-1] + math.sqrt(1 - rho * rho) * shock)
    return scale * np.array(values)


def simulated_run(rng: np.random.Generator, rho: float, scale: float,
                  planted: dict[str, float] | None = None) -> BfclRun:
    """A run as `load_bfcl` returns it: per category a wander plus `planted` pp from step 0 to step 200 (linear),
    per pass the repeat noise, rounded to whole items."""
    planted = planted or {}
    paths = {c: 70.0 + wander(rho, scale, rng) + planted.get(c, 0.0) * STEPS / STEPS[-1] for c in OFFLINE_CATEGORIES}
    counts = []
    for i, step in enumerate(STEPS):
        passes = []
        for _ in range(REPEATS.get(int(step), 1)):
            cells = {}
            for category in OFFLINE_CATEGORIES:
                total = BY_NAME[category].items
                value = paths[category][i] + rng.normal(0.0, PASS_SD)
                cells[category] = (int(np.clip(round(total * value / 100), 0, total)), total)
            passes.append(cells)
        counts.append(tuple(passes))
    unparsed = tuple(tuple(dict.fromkeys(OFFLINE_CATEGORIES) for _ in step) for step in counts)
    indices = tuple(tuple(range(1, len(step) + 1)) for step in counts)
    return BfclRun(Path("simulated/bfcl_by_category.csv"), STEPS.astype(float), tuple(counts), indices, unparsed,
                   has_unparsed_column=False)


def verdict_rates(runs: int, seed: int, rho: float, scale: float,
                  planted: dict[str, float] | None = None) -> dict[str, float]:
    """How often each verdict fires: per aggregate (a change, a level shift, beyond the repeat noise) and per
    abstention/tool-call split (a difference in sign or in rate)."""
    rng = np.random.default_rng(seed)
    fired = {"change": 0, "level shift": 0, "beyond repeat noise": 0, "sign or rate": 0, "abstention change": 0}
    for _ in range(runs):
        run = simulated_run(rng, rho, scale, planted)
        found = bfcl_findings(run, headline_rows(run, SETTINGS), SETTINGS)
        for name in AGGREGATE_NAMES:
            fired["change"] += found["changes"][name]["changes"]
            fired["level shift"] += found["changes"][name]["verdict"] == "level shift"
            fired["beyond repeat noise"] += bool(found["endpoints"][name]["beyond_repeat_noise"])
        fired["abstention change"] += found["changes"]["Abstention required"]["changes"]
        fired["sign or rate"] += sum(s["verdict"] in ("sign", "rate") for s in found["declines"].values())
    per = {"change": runs * 5, "level shift": runs * 5, "beyond repeat noise": runs * 5, "sign or rate": runs * 3,
           "abstention change": runs}
    return {name: count / per[name] for name, count in fired.items()}


def allowance(trials: int) -> float:
    """The level plus three binomial standard errors of a rate measured on `trials` series."""
    return LEVEL + 3 * math.sqrt(LEVEL * (1 - LEVEL) / trials)


@pytest.mark.parametrize("shape", SHAPES)
def test_no_verdict_fires_more_often_than_its_level_on_trend_free_series(shape):
    rho, scale = SHAPES[shape]
    rates = verdict_rates(SIMULATED, seed=list(SHAPES).index(shape), rho=rho, scale=scale)
    assert rates["change"] <= allowance(SIMULATED * 5), rates
    assert rates["level shift"] <= allowance(SIMULATED * 5), rates
    assert rates["sign or rate"] <= allowance(SIMULATED * 3), rates


def test_beyond_the_repeat_noise_holds_its_level_when_the_checkpoints_do_not_differ():
    """Its null is "the first and the last checkpoint score the same on this bank": no wander at all, only the
    repeat noise of each pass (a wander makes the checkpoints differ, which the verdict then rightly says)."""
    rates = verdict_rates(SIMULATED, seed=5, rho=0.0, scale=0.0)
    assert rates["beyond repeat noise"] <= allowance(SIMULATED * 5), rates
    assert rates["change"] <= allowance(SIMULATED * 5), rates


def test_a_planted_change_moves_the_verdicts():
    """A linear change on both abstention categories. At the reference run's size (-3.74 pp from step 0 to 200
    on 1,124 items) over repeat noise alone, 21 checkpoints detect it in about half of the runs; twice that size
    is detected nearly always. Against a wander as strong as the reference's residuals, 21 checkpoints cannot
    tell it from a random walk, and the verdicts say so rather than claim it."""
    rates = {}
    for label, size, rho, scale, seed in (("reference size", -3.74, 0.0, 0.0, 9), ("twice", -7.48, 0.0, 0.0, 10),
                                          ("reference size, wander", -3.74, 0.54, 1.0, 11)):
        rates[label] = verdict_rates(60, seed=seed, rho=rho, scale=scale, planted=dict.fromkeys(ABSTENTION, size))
    assert rates["twice"]["abstention change"] >= 0.9, rates
    assert 0.2 <= rates["reference size"]["abstention change"] < rates["twice"]["abstention change"], rates
    assert rates["reference size, wander"]["abstention change"] <= rates["reference size"]["abstention change"]
    assert rates["twice"]["beyond repeat noise"] >= 0.2  # the abstention row: one of the five aggregates


def test_the_null_family_follows_its_documented_draw_order():
    """The simulated |t| of `null_statistics` against a loop written from its docstring, for irregular steps."""
    steps = (0.0, 10.0, 20.0, 40.0, 50.0, 80.0, 100.0)
    replicates = 50
    got = null_statistics(steps, 3, replicates, 4)
    x = np.asarray(steps)
    gaps = np.diff(x) / np.median(np.diff(x))
    rng = np.random.default_rng(4)
    for (abs_t, _), rho in zip(got, NULL_RHOS, strict=True):
        first = np.zeros(replicates) if rho == 1.0 else rng.standard_normal(replicates)
        shocks = [rng.standard_normal(replicates) for _ in gaps]
        want = []
        for r in range(replicates):
            y = [first[r]]
            for gap, shock in zip(gaps, shocks, strict=True):
                phi = 1.0 if rho == 1.0 else rho**gap
                y.append(phi * y[-1] + (math.sqrt(gap) if rho == 1.0 else math.sqrt(1 - phi**2)) * shock[r])
            want.append(abs(scipy_stats.linregress(x, y).slope / scipy_stats.linregress(x, y).stderr))
        np.testing.assert_allclose(abs_t, np.sort(want), rtol=1e-9)


def test_the_repeat_noise_test_against_scipy():
    """Pooled over the repeated steps, as a two-sample t with equal variances would pool the two ends alone."""
    passes = (np.array([70.1, 70.9, 70.4]), np.array([71.0]), np.array([68.2, 68.9, 68.4]))
    got = repeat_noise_test(StepSeries(np.array([0.0, 100.0, 200.0]), passes))
    want = scipy_stats.ttest_ind(passes[2], passes[0], equal_var=True)
    assert got.df == 4 and got.t == pytest.approx(want.statistic, rel=1e-12)
    assert got.p == pytest.approx(want.pvalue, rel=1e-12)
    assert repeat_noise_test(StepSeries(np.array([0.0, 200.0]), (np.array([70.0]), np.array([68.0])))) is None
