"""Figures f1-f4 as PNG and PDF, drawn with matplotlib's Agg backend at paper size (7 in wide, 8-9 pt text).

    f1_training                   reward, curriculum level and tool-call share against step
    f2_aggregates                 the five aggregates against step, repeat spread, noise floor, OLS line
    f3_categories                 per-category change first -> last step, with item counts
    f4_abstention_vs_tool_call    abstention vs tool call, overall, inside Live and inside Non-Live
    compare (make_figures --compare)  two runs' abstention and tool-call series

`render_figures` writes into a staging folder; the caller moves the files into place once all succeeded.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen before pyplot loads)
import numpy as np  # noqa: E402
from tqdm import tqdm  # noqa: E402

from toolcanary.analysis.data import BfclRun, TrainRun  # noqa: E402
from toolcanary.analysis.panels import LEVEL, REWARD, SHARE, Series, frame  # noqa: E402
from toolcanary.analysis.settings import AnalysisSettings  # noqa: E402

WIDTH = 7.0
STYLE = {
    "font.size": 8.5, "axes.titlesize": 9, "axes.labelsize": 8.5, "legend.fontsize": 7.5,
    "xtick.labelsize": 7.5, "ytick.labelsize": 7.5, "axes.spines.top": False, "axes.spines.right": False,
    "axes.grid": True, "grid.alpha": 0.25, "pdf.fonttype": 42, "savefig.bbox": "tight",
}
NAMES = {"f1": "f1_training", "f2": "f2_aggregates", "f3": "f3_categories", "f4": "f4_abstention_vs_tool_call"}


def _points(steps: np.ndarray) -> dict[str, Any]:
    """A line through one point draws nothing: a run with a single training step shows its point."""
    return {"marker": "o", "ms": 4} if len(steps) == 1 else {}


def f1_training(train: TrainRun, found: dict[str, Any], settings: AnalysisSettings) -> plt.Figure:
    fig, axes = plt.subplots(3, 1, figsize=(WIDTH, 6.2), sharex=True, layout="constrained")
    steps, reward = train.series("reward_mean")
    axes[0].plot(steps, reward, color="C0", lw=1.2, label="mean reward", **_points(steps))
    std_steps, std = train.series("reward_std")
    if len(std_steps) == len(steps):
        axes[0].fill_between(steps, reward - std, reward + std, color="C0", alpha=0.15, lw=0, label="+/- 1 s.d.")
    reward_series = [Series("", reward)]
    if not len(std_steps):
        # the s.d. band is named only when it is missing: a constant s.d. is the usual case, not news
        reward_series.append(Series("reward s.d.", std))
    frame(REWARD, {axes[0]: reward_series})
    axes[0].set_ylabel("reward")
    axes[0].legend(loc="best", frameon=False)

    steps, levels = train.series("curriculum_level")
    curriculum = found["curriculum"]
    axes[1].plot(steps, levels, color="C2", lw=1.2, label="curriculum level", **_points(steps))
    axes[1].axhline(settings.curriculum_ceiling, color="0.4", ls="--", lw=0.8, label="ceiling")
    if curriculum["first_step"] is not None:
        axes[1].axvline(curriculum["first_step"], color="0.4", ls=":", lw=0.8)
        axes[1].annotate(f"ceiling first reached at step {curriculum['first_step']:g}",
                         (curriculum["first_step"], settings.curriculum_ceiling * 0.5), xytext=(4, 0),
                         textcoords="offset points", fontsize=7.5, color="0.3")
    axes[1].set_ylim(0, settings.curriculum_ceiling * 1.08)
    frame(LEVEL, {axes[1]: [Series("", levels)]})
    axes[1].set_ylabel("curriculum level")
    axes[1].legend(loc="best", frameon=False)

    steps, share = train.series("tool_call_share")
    axes[2].plot(steps, share, color="C3", lw=1.2, label="tool-calling share of assistant turns", **_points(steps))
    shift = found["tool_call_share"]["level_shift"]
    if shift is not None:
        for lo, hi, level in ((steps[0], shift["last_step_before"], shift["level_before"]),
                              (shift["first_step_after"], steps[-1], shift["level_after"])):
            axes[2].hlines(level, lo, hi, color="0.2", ls="--", lw=1.0)
        axes[2].plot([], [], color="0.2", ls="--", lw=1.0, label="levels either side of the best breakpoint")
    frame(SHARE, {axes[2]: [Series("", share)]})
    axes[2].set_ylabel("tool-call share")
    axes[2].set_xlabel("training step")
    axes[2].legend(loc="best", frameon=False)
    one_step = " (one step: no trend measurable)" if found["step_count"] < 2 else ""
    fig.suptitle(f"Training in the simulated environment{one_step}", fontsize=10)
    return fig


def render_figures(which: list[str], stage: Path, *, bfcl: BfclRun | None, train: TrainRun | None,
                   found: dict[str, Any], settings: AnalysisSettings) -> list[Path]:
    """Draw the figures named in `which` into `stage`; returns the files written there."""
    from toolcanary.analysis.figures_bfcl import f2_aggregates, f3_categories, f4_abstention_vs_tool_call

    drawers: dict[str, Callable[[], plt.Figure]] = {
        "f1": lambda: f1_training(train, found["training"], settings),
        "f2": lambda: f2_aggregates(bfcl, settings),
        "f3": lambda: f3_categories(bfcl),
        "f4": lambda: f4_abstention_vs_tool_call(bfcl),
    }
    written: list[Path] = []
    with plt.rc_context(STYLE):
        for key in tqdm(which, desc="figures", unit="fig", leave=False):
            fig = drawers[key]()
            try:
                for suffix in ("png", "pdf"):
                    path = stage / f"{NAMES[key]}.{suffix}"
                    fig.savefig(path, dpi=settings.dpi)
                    written.append(path)
            finally:
                plt.close(fig)
    return written


def render_compare_figure(runs: dict[str, BfclRun], found: dict[str, Any], stage: Path,
                          settings: AnalysisSettings) -> list[Path]:
    """The figure of `make_figures --compare` into `stage` (PNG and PDF); returns the files written there."""
    from toolcanary.analysis.figures_bfcl import compare_series

    with plt.rc_context(STYLE):
        fig = compare_series(runs, found)
        try:
            written = []
            for suffix in ("png", "pdf"):
                path = stage / f"compare.{suffix}"
                fig.savefig(path, dpi=settings.dpi)
                written.append(path)
            return written
        finally:
            plt.close(fig)
