"""The findings JSON against independent computations: declines and their ratio, item losses, the Live and
Non-Live splits, endpoints against the repeat s.d.s, residual autocorrelation, the level-shift check, and
the training side.

    .venvs/analysis/bin/python -m pytest tests/analysis/test_findings.py -q
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from toolcanary.analysis.__main__ import main

LIVE_AST = ["live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"]
NON_LIVE_AST = ["simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple"]


def findings(capsys, folder, *extra: str) -> dict:
    assert main(["--data", str(folder), "--findings", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def pooled_by_step(csv_path, names: list[str]) -> pd.Series:
    frame = pd.read_csv(csv_path)
    frame = frame[frame.category.isin(names)].groupby(["step", "pass"])[["correct", "total"]].sum()
    return (100 * frame.correct / frame.total).groupby(level="step").mean()


def test_declines_ratio_items_and_splits(golden, independent, capsys):
    folder = golden(trend={"live_irrelevance": -0.02, "irrelevance": -0.01, "live_multiple": -0.004,
                           "multiple": 0.003})
    found = findings(capsys, folder, "--null-replicates", "300")["bfcl"]["declines"]
    assert {s["verdict"] for s in found.values()} >= {"abstention_only"}
    csv_path = folder / "bfcl_by_category.csv"
    splits = {
        "overall": (["irrelevance", "live_irrelevance"], NON_LIVE_AST + LIVE_AST, 1124, 2501),
        "live": (["live_irrelevance"], LIVE_AST, 884, 1351),
        "non_live": (["irrelevance"], NON_LIVE_AST, 240, 1150),
    }
    for key, (abstention, tool_call, items_a, items_b) in splits.items():
        a, b = pooled_by_step(csv_path, abstention), pooled_by_step(csv_path, tool_call)
        delta_a, delta_b = a.iloc[-1] - a.iloc[0], b.iloc[-1] - b.iloc[0]
        got = found[key]
        assert got["abstention"]["delta_pp"] == pytest.approx(delta_a, rel=1e-9)
        assert got["tool_call"]["delta_pp"] == pytest.approx(delta_b, rel=1e-9)
        assert (got["abstention"]["items"], got["tool_call"]["items"]) == (items_a, items_b)
        assert got["abstention"]["items_lost"] == pytest.approx(-delta_a * items_a / 100, rel=1e-9)
        assert got["tool_call"]["items_lost"] == pytest.approx(-delta_b * items_b / 100, rel=1e-9)
        assert got["ratio"] == pytest.approx(delta_a / delta_b, rel=1e-9)
        assert got["same_sign"] == (np.sign(delta_a) == np.sign(delta_b))
        changes = []
        for side, series in (("abstention", a), ("tool_call", b)):
            p = independent.p_change(series.index.to_numpy(), series.to_numpy(),
                                     independent.trend(series.index, series, 2)[1], 300)
            assert got[side]["p_change"] == pytest.approx(p, rel=1e-12)
            changes.append(p <= 0.05)
        # a ratio or a sign is claimed only when both groups change beyond a trend-free wander
        want = ("rate" if got["same_sign"] else "sign") if all(changes) else (
            "abstention_only" if changes[0] else "tool_call_only" if changes[1] else "neither")
        assert got["verdict"] == want
    # Live's tool-call side is the Live aggregate itself; Non-Live's is pooled, not BFCL's mean of means
    assert found["non_live"]["tool_call"]["categories"] == NON_LIVE_AST


def test_endpoints_against_the_pooled_repeat_noise(golden, independent, capsys):
    """First against last checkpoint with the repeat variance pooled over every repeated step, as a t test on the
    pass values whose variance pools the three steps (scipy's OLS with step dummies gives the same)."""
    from scipy import stats

    folder = golden(noise_pp=1.0)
    found = findings(capsys, folder)["bfcl"]["endpoints"]
    aggregates = independent.aggregates(folder / "bfcl_by_category.csv")
    for name in aggregates.columns:
        per_pass = aggregates[name]
        means, sds = per_pass.groupby(level="step").mean(), per_pass.groupby(level="step").std(ddof=1)
        delta = means.iloc[-1] - means.iloc[0]
        repeated = [per_pass.xs(s, level="step").to_numpy() for s in (0, 150, 200)]
        pooled = np.sqrt(sum(((v - v.mean()) ** 2).sum() for v in repeated) / 6)
        t = delta / (pooled * np.sqrt(1 / 3 + 1 / 3))
        got = found[name]
        assert got["delta_pp"] == pytest.approx(delta, rel=1e-9)
        assert {int(s): v for s, v in got["repeat_sd"].items()} == pytest.approx({s: sds[s] for s in (0, 150, 200)})
        assert (got["pooled_sd"], got["df"]) == (pytest.approx(pooled, rel=1e-12), 6)
        assert got["t"] == pytest.approx(t, rel=1e-9)
        assert got["p"] == pytest.approx(2 * stats.t.sf(abs(t), 6), rel=1e-9)
        assert got["beyond_repeat_noise"] == (got["p"] <= 0.05)


def test_a_run_without_repeats_says_once_why_there_is_no_noise_floor(golden, capsys):
    folder = golden(repeats={})
    assert main(["--data", str(folder), "--table"]) == 0
    out = capsys.readouterr().out
    assert out.count("No step was scored more than once") == 1
    assert "n/a s.d." not in out and "repeat noise (" not in out


def test_residual_autocorrelation_matches_statsmodels_acf(golden, independent, capsys):
    from statsmodels.tsa.stattools import acf

    folder = golden(noise_pp=1.2, seed=5)
    everything = findings(capsys, folder)["bfcl"]
    assert everything["hac"] == {"kernel": "bartlett", "maxlags": 2, "small_sample_correction": True}
    found = everything["residual_lag1_autocorrelation"]
    means = independent.aggregates(folder / "bfcl_by_category.csv").groupby(level="step").mean()
    for name in means.columns:
        *_, ols = independent.trend(means.index, means[name], 2)
        assert found[name] == pytest.approx(acf(ols.resid, nlags=1)[1], rel=1e-9, abs=1e-12)


def brute_force_breakpoint(y: np.ndarray, min_segment: int = 3) -> int:
    costs = {k: np.var(y[:k]) * k + np.var(y[k:]) * (len(y) - k) for k in range(min_segment, len(y) - min_segment + 1)}
    return min(costs, key=costs.get)


def test_a_step_change_is_found_and_not_called_a_trend(golden, independent, capsys):
    folder = golden(trend={}, shift={"live_irrelevance": (80, -6.0), "irrelevance": (80, -6.0)}, noise_pp=0.3)
    found = findings(capsys, folder)["bfcl"]
    shift = found["level_shift"]["Abstention required"]
    assert found["changes"]["Abstention required"]["verdict"] == "level shift"
    assert found["changes"]["Abstention required"]["p_shift"] < found["changes"]["Abstention required"]["p_trend"]
    means = independent.aggregates(folder / "bfcl_by_category.csv").groupby(level="step").mean()
    y, steps = means["Abstention required"].to_numpy(), means.index.to_numpy()
    k = brute_force_breakpoint(y)
    assert (shift["last_step_before"], shift["first_step_after"]) == (70, 80) == (steps[k - 1], steps[k])
    assert shift["level_before"] == pytest.approx(y[:k].mean(), rel=1e-12)
    assert shift["level_after"] == pytest.approx(y[k:].mean(), rel=1e-12)
    assert shift["prefers_shift"] is True
    for side, xs, ys in (("before", steps[:k], y[:k]), ("after", steps[k:], y[k:])):
        slope, t, t_hac, _ = independent.trend(xs, ys, math.floor(4 * (len(xs) / 100) ** (2 / 9)))
        assert shift[side]["slope_per_10_steps"] == pytest.approx(10 * slope, rel=1e-9, abs=1e-12)
        assert shift[side]["t"] == pytest.approx(t, rel=1e-9, abs=1e-9)
        assert shift[side]["t_hac"] == pytest.approx(t_hac, rel=1e-9, abs=1e-9)
    # the whole-run line is steep and significant, which is exactly the misreading the check prevents
    assert found["endpoints"]["Abstention required"]["delta_pp"] < -4
    assert main(["--data", str(folder), "--table"]) == 0
    prose = capsys.readouterr().out
    assert ("a level shift (p change <0.001" in prose
            and "The step fits better than a line (BIC): best breakpoint after step 70" in prose)


def test_a_steady_trend_is_not_called_a_step(golden, capsys):
    folder = golden(trend={"live_irrelevance": -0.03, "irrelevance": -0.03}, shift={}, noise_pp=0.2)
    found = findings(capsys, folder)["bfcl"]
    shift = found["level_shift"]["Abstention required"]
    assert found["changes"]["Abstention required"]["verdict"] == "trend"
    assert shift["prefers_shift"] is False
    assert shift["bic_line"] < shift["bic_shift"]


def test_training_side(golden, independent, capsys):
    folder = golden(share_break=40)
    training = findings(capsys, folder)["training"]
    frame = pd.read_csv(folder / "train_metrics.csv")
    at_ceiling = frame.loc[frame.curriculum_level >= 100, "step"]
    assert training["curriculum"]["first_step"] == at_ceiling.min() == 67
    assert training["curriculum"]["held_steps"] == 200 - 67 and training["curriculum"]["holds_to_end"] is True
    share = training["tool_call_share"]
    before, after = frame[frame.step <= 40].tool_call_share, frame[frame.step > 40].tool_call_share
    assert (share["level_shift"]["last_step_before"], share["level_shift"]["first_step_after"]) == (40, 41)
    assert share["level_shift"]["level_before"] == pytest.approx(before.mean(), rel=1e-12)
    assert share["level_shift"]["level_after"] == pytest.approx(after.mean(), rel=1e-12)
    assert share["level_shift"]["prefers_shift"] is True
    slope, t, t_hac, _ = independent.trend(frame.step, frame.reward_mean, 4)  # floor(4 (200/100)^(2/9)) = 4
    assert training["reward"]["trend"]["slope_per_10_steps"] == pytest.approx(10 * slope, rel=1e-9)
    assert training["reward"]["trend"]["t"] == pytest.approx(t, rel=1e-9)
    assert training["reward"]["trend"]["t_hac"] == pytest.approx(t_hac, rel=1e-9)


def test_curriculum_that_leaves_its_ceiling(golden, capsys):
    training = findings(capsys, golden(curriculum_drop=150))["training"]["curriculum"]
    assert (training["first_step"], training["held_until"], training["held_steps"]) == (67, 149, 82)
    assert training["holds_to_end"] is False and training["steps_at_ceiling"] == 149 - 67 + 1


def test_a_single_training_step_reports_its_values_and_marks_the_trends_not_measurable(golden, capsys):
    """The SmolLM2 quick demo trains one GRPO step: the table and that step's values are printed, exit 0."""
    folder = golden(train_steps=1)
    assert main(["--data", str(folder), "--table", "--findings", "--fig", "f1"]) == 0
    out = capsys.readouterr().out
    row = pd.read_csv(folder / "train_metrics.csv").iloc[0]
    assert "| Abstention required |" in out  # the BFCL side is whole
    assert (f"Training: one step (step 1): tool-calling share of assistant turns {row.tool_call_share:.3f}, "
            f"mean reward {row.reward_mean:+.3f} (within-step s.d. {row.reward_std:.3f}), "
            f"curriculum level {row.curriculum_level:g}.") in out
    assert "Not measurable from one step" in out
    training = json.loads(out[out.index("\n{") + 1:])["training"]
    assert training["step_count"] == 1 and training["steps"] == [1, 1]
    for trend in (training["reward"]["trend"], training["tool_call_share"]["trend"]):
        assert trend["slope_per_10_steps"] is None and trend["t"] is None and trend["t_hac"] is None
        assert trend["not_measurable"] == "1 step with a value: a trend needs two or more"
    assert training["tool_call_share"]["level_shift"] is None
    assert (folder / "figures" / "f1_training.png").stat().st_size > 1000


def test_two_training_steps_give_a_slope_but_no_t(golden, capsys):
    folder = golden(train_steps=2)
    training = findings(capsys, folder)["training"]
    frame = pd.read_csv(folder / "train_metrics.csv")
    slope = (frame.reward_mean[1] - frame.reward_mean[0]) / (frame.step[1] - frame.step[0])
    assert training["reward"]["trend"]["slope_per_10_steps"] == pytest.approx(10 * slope, rel=1e-12)
    assert training["reward"]["trend"]["t"] is None and training["reward"]["trend"]["not_measurable"] is None


def test_the_table_does_not_depend_on_how_many_training_steps_there_are(golden, capsys):
    tables = []
    for steps in (1, 200):
        assert main(["--data", str(golden(f"run{steps}", train_steps=steps)), "--table", "--format", "csv"]) == 0
        tables.append(capsys.readouterr().out)
    assert tables[0] == tables[1]


def test_the_trainers_canary_is_reported_where_it_fired(golden, capsys):
    folder = golden()
    frame = pd.read_csv(folder / "train_metrics.csv")
    frame["tool_call_share_shift"] = np.where(frame.step > 5, -0.002 * (frame.step - 5), np.nan)
    frame["tool_call_canary"] = np.where(frame.step > 5, (frame.tool_call_share_shift.abs() > 0.15).astype(float),
                                         np.nan)
    frame.to_csv(folder / "train_metrics.csv", index=False)
    canary = findings(capsys, folder)["training"]["canary"]
    assert canary["measured"] is True and canary["fired_steps"] == list(range(81, 201))
    assert canary["last_shift"] == pytest.approx(-0.002 * 195) == canary["largest_shift"]
    assert main(["--data", str(folder), "--table"]) == 0
    assert "Tool-call canary: the share moved beyond its threshold at 120 step(s), first at step 81" in \
        capsys.readouterr().out
