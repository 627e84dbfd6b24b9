"""Flat and empty series read right in every figure: a fixed range around a flat value with a note giving it,
"not measured" where nothing was, and never an axis offset such as `1e-14+1e2`.

    .venvs/analysis/bin/python -m pytest tests/analysis/test_figure_axes.py -q
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest

from toolcanary.analysis.__main__ import main
from toolcanary.analysis.data import data_paths, load_bfcl, load_training
from toolcanary.analysis.figures import STYLE, f1_training
from toolcanary.analysis.figures_bfcl import f2_aggregates, f3_categories, f4_abstention_vs_tool_call
from toolcanary.analysis.panels import NOT_MEASURED, PERCENT, Series, frame
from toolcanary.analysis.settings import AnalysisSettings
from toolcanary.analysis.training import training_findings

AST = ["simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
       "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"]
# abstention right every time, no tool call ever right, multi-turn stuck at its step-0 values (mean 33);
# reward constant
FLAT = {"base": {"irrelevance": 100.0, "live_irrelevance": 100.0, **dict.fromkeys(AST, 0.0)},
        "noise_pp": 0.0, "trend": {}, "shift": {}, "reward": 0.25, "reward_std": 0.0}


def figures(folder: Path) -> dict[str, plt.Figure]:
    """The four figures of a run folder, built and drawn as make_figures builds them."""
    settings = AnalysisSettings()
    bfcl_path, train_path = data_paths(folder, None)
    bfcl, train = load_bfcl(bfcl_path), load_training(train_path)
    with plt.rc_context(STYLE):
        built = {"f1": f1_training(train, training_findings(train, settings), settings),
                 "f2": f2_aggregates(bfcl, settings), "f3": f3_categories(bfcl),
                 "f4": f4_abstention_vs_tool_call(bfcl)}
        for fig in built.values():
            fig.canvas.draw()  # offset texts are only set when the ticks are drawn
    return built


def panels(fig: plt.Figure) -> list[plt.Axes]:
    return [ax for ax in fig.axes if ax.axison]


def notes(ax: plt.Axes) -> str:
    return "\n".join(t.get_text() for t in ax.texts)


@pytest.mark.slow
def test_a_flat_run_reads_right(golden):
    folder = golden(**FLAT)
    assert main(["--data", str(folder), "--fig", "all"]) == 0
    built = figures(folder)
    try:
        for check in (no_axis_has_an_offset, no_title_reads_nan, flat_aggregates_get_a_fixed_range_and_a_note,
                      flat_splits_quote_their_levels, flat_reward_gets_a_fixed_range_and_a_note,
                      no_change_in_any_category_is_noted):
            check(built)
    finally:
        for fig in built.values():
            plt.close(fig)


def no_axis_has_an_offset(flat_run):
    for name, fig in flat_run.items():
        for ax in panels(fig):
            for side in (ax.xaxis, ax.yaxis):
                assert side.get_offset_text().get_text() == "", (name, ax.get_title())


def no_title_reads_nan(flat_run):
    # A flat series has no t statistic and no test: its title says so instead of "t = +nan" or "n/a".
    for name, fig in flat_run.items():
        for ax in panels(fig):
            assert "nan" not in ax.get_title().lower(), (name, ax.get_title())
    assert "no test (under 3 checkpoints, or flat)" in panels(flat_run["f2"])[0].get_title()


def flat_aggregates_get_a_fixed_range_and_a_note(flat_run):
    f2 = panels(flat_run["f2"])
    assert len(f2) == 5
    for ax in f2:
        lo, hi = ax.get_ylim()
        assert hi - lo >= PERCENT.span - 1e-9 and 0.0 <= lo and hi <= 100.0, (ax.get_title(), lo, hi)
        assert "no change (" in notes(ax) and "at every step)" in notes(ax), ax.get_title()
    by_title = {ax.get_title().split("\n")[0]: ax for ax in f2}
    assert "no change (100.00 at every step)" in notes(by_title["Abstention required"])
    assert by_title["Abstention required"].get_ylim() == (96.0, 100.0)
    assert "no change (0.00 at every step)" in notes(by_title["Tool call required"])
    assert by_title["Tool call required"].get_ylim() == (0.0, 4.0)
    assert "no change (33.00 at every step)" in notes(by_title["Multi-Turn"])


def flat_splits_quote_their_levels(flat_run):
    f4 = panels(flat_run["f4"])
    assert len(f4) == 3
    for ax in f4:
        lo, hi = ax.get_ylim()
        assert hi - lo >= PERCENT.span - 1e-9 and lo < 0 < hi
        assert "abstention: no change (100.00)" in notes(ax) and "tool call: no change (0.00)" in notes(ax)


def flat_reward_gets_a_fixed_range_and_a_note(flat_run):
    reward, _, share = flat_run["f1"].axes
    lo, hi = reward.get_ylim()
    assert hi - lo >= 0.1 - 1e-9 and lo < 0.25 < hi
    assert "no change (+0.250 at every step)" in notes(reward)
    # the tool-call share moves: matplotlib's range and no note
    assert "no change" not in notes(share) and share.get_autoscaley_on()


def no_change_in_any_category_is_noted(flat_run):
    (ax,) = panels(flat_run["f3"])
    assert "no change (+0.00 in every category)" in notes(ax)


def test_a_run_that_moves_gets_no_notes(golden):
    built = figures(golden())
    try:
        for name, fig in built.items():
            for ax in panels(fig):
                assert "no change" not in notes(ax) and NOT_MEASURED not in notes(ax), name
    finally:
        for fig in built.values():
            plt.close(fig)


def test_an_unmeasured_reward_sd_is_said_on_the_panel(golden):
    folder = golden(reward_std=float("nan"))
    assert main(["--data", str(folder), "--fig", "f1"]) == 0
    built = figures(folder)
    try:
        assert f"reward s.d.: {NOT_MEASURED}" in notes(built["f1"].axes[0])
    finally:
        for fig in built.values():
            plt.close(fig)


def test_an_all_nan_series_says_not_measured():
    fig, ax = plt.subplots()
    try:
        values = np.full(5, np.nan)
        ax.plot(np.arange(5), values)
        frame(PERCENT, {ax: [Series("", values)]})
        fig.canvas.draw()
        assert [t.get_text() for t in ax.texts] == [NOT_MEASURED]
        lo, hi = ax.get_ylim()
        assert np.isfinite([lo, hi]).all() and hi - lo >= PERCENT.span - 1e-9
        assert ax.yaxis.get_offset_text().get_text() == ""
    finally:
        plt.close(fig)


def test_step_axes_read_in_checkpoint_steps(golden):
    """A two-step run's step axes show its two steps, never ticks at 0.25, 0.5, ...; a long run whole numbers."""
    built = figures(golden(steps=(0, 2), repeats={0: 2, 2: 2}, train_steps=2))
    try:
        for name in ("f2", "f4"):
            for ax in panels(built[name]):
                assert list(ax.get_xticks()) == [0, 2], (name, ax.get_title())
                assert [t.get_text() for t in ax.get_xticklabels()] in (["0", "2"], []), name  # [] where hidden
        assert [t.get_text() for t in built["f1"].axes[-1].get_xticklabels()] == ["1", "2"]
    finally:
        for fig in built.values():
            plt.close(fig)
    built = figures(golden("long"))
    try:
        ticks = built["f1"].axes[-1].get_xticks()
        assert np.allclose(ticks, np.round(ticks)), ticks
    finally:
        for fig in built.values():
            plt.close(fig)
