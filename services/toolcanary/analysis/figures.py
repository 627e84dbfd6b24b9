"""Figures f1-f5 as PNG and PDF, drawn with matplotlib's Agg backend at paper size (7 in wide, 8-9 pt text).

    f1_training                   reward, curriculum level and tool-call share against step
    f2_aggregates                 the five aggregates against step, repeat spread, noise floor, OLS line
    f3_categories                 per-category change first -> last step, with item counts
    f4_abstention_vs_tool_call    abstention vs tool call, overall, inside Live and inside Non-Live
    f5_training_distribution      no-call tasks by code path and the policy's declines in training; training
                                  tool-call share beside benchmark abstention (needs episode records)
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
from toolcanary.analysis.panels import LEVEL, PERCENT, REWARD, SHARE, Series, frame, step_axis  # noqa: E402
from toolcanary.analysis.settings import AnalysisSettings  # noqa: E402
from toolcanary.analysis.training_distribution import DistributionReport  # noqa: E402

WIDTH = 7.0
STYLE = {
    "font.size": 8.5, "axes.titlesize": 9, "axes.labelsize": 8.5, "legend.fontsize": 7.5,
    "xtick.labelsize": 7.5, "ytick.labelsize": 7.5, "axes.spines.top": False, "axes.spines.right": False,
    "axes.grid": True, "grid.alpha": 0.25, "pdf.fonttype": 42, "savefig.bbox": "tight",
}
NAMES = {"f1": "f1_training", "f2": "f2_aggregates", "f3": "f3_categories", "f4": "f4_abstention_vs_tool_call",
         "f5": "f5_training_distribution"}


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
    step_axis(axes, train.steps)
    axes[2].legend(loc="best", frameon=False)
    one_step = " (one step: no trend measurable)" if found["step_count"] < 2 else ""
    fig.suptitle(f"Training in the simulated environment{one_step}", fontsize=10)
    return fig


def _column(rows: list[dict[str, Any]], name: str) -> np.ndarray:
    """One column of the per-step table as floats, nan where it has nothing to count."""
    return np.array([np.nan if r[name] is None else r[name] for r in rows], dtype=float)


def f5_training_distribution(report: DistributionReport, settings: AnalysisSettings) -> plt.Figure:
    """Top: the share of tasks that expect no call, by code path, and the share of finished episodes the policy
    declined, per training step. Bottom: the training tool-call share and the benchmark's abstention (twin axes),
    titled with the direction verdict."""
    rows = report.by_step
    steps = _column(rows, "step")
    marks = {"marker": "o", "ms": 2.5} if len(steps) <= 60 else {}
    fig, axes = plt.subplots(2, 1, figsize=(WIDTH, 5.6), sharex=True, layout="constrained")
    top = axes[0]
    drawn = []
    for column, label, colour, style in (
            ("abstention_task_share", "tasks: abstention (call_expected false)", "C3", "-"),
            ("no_expected_call_task_share", "tasks: call task, no expected call", "C1", "-"),
            ("not_recorded_task_share", "tasks: expected calls not recorded", "0.5", "-"),
            ("decline_share_abstention", "declined: on abstention tasks", "C3", "--"),
            ("decline_share_call", "declined: on call tasks", "C0", "--")):
        values = _column(rows, column)
        if column == "not_recorded_task_share" and not np.nansum(values):
            continue  # records from contract 1.8 on always say: a line of zeros would only crowd the panel
        top.plot(steps, values, color=colour, ls=style, lw=1.1, label=label, **marks)
        drawn.append(values)
    # Shares all: the whole 0-1 range, the same in every run. One note for the panel at most, since a note per
    # flat line (common: a fixed no-call fraction) would cover the lines at the top of the range.
    top.set_ylim(-0.03, 1.03)
    frame(SHARE, {top: [Series("", np.concatenate(drawn))]})
    top.set_ylabel("share")
    # legends above their panels, as in f3: inside, they would cover data whichever corner they took
    top.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False, fontsize=7)

    bottom = axes[1]
    share = _column(rows, "tool_call_share")
    bottom.plot(steps, share, color="C0", lw=1.2, label="training tool-call share", **marks)
    frame(SHARE, {bottom: [Series("tool-call share", share)]})
    bottom.set_ylabel("tool-call share (training)")
    step_axis([top, bottom], np.concatenate([steps, np.asarray(report.benchmark_steps, dtype=float)]))
    twin = bottom.twinx()
    twin.spines["right"].set_visible(True)
    twin.grid(False)
    twin.plot(report.benchmark_steps, report.benchmark_pct, color="C3", lw=1.2, marker="s", ms=3,
              label="benchmark: Abstention required (%)")
    frame(PERCENT, {twin: [Series("abstention", report.benchmark_pct)]})
    twin.set_ylabel("Abstention required (%)")
    handles = [h for ax in (bottom, twin) for h in ax.get_legend_handles_labels()[0]]
    bottom.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False, fontsize=7)
    fig.suptitle(f"What the simulator trained on\n{_direction_title(report.findings['direction'])}", fontsize=10)
    return fig


def _direction_title(found: dict[str, Any]) -> str:
    bench, training = found["benchmark"], found["training"]
    span = f"checkpoints {bench['steps'][0]}-{bench['steps'][1]}"
    if found["not_measurable"] is not None:
        return f"Direction over {span}: not measurable"
    return (f"{found['verdict'].capitalize()} over {span}: tool-call share {training['delta']:+.3f}, "
            f"abstention {bench['delta_pp']:+.2f} pp")


def render_figures(which: list[str], stage: Path, *, bfcl: BfclRun | None, train: TrainRun | None,
                   found: dict[str, Any], settings: AnalysisSettings,
                   distribution: DistributionReport | None = None) -> list[Path]:
    """Draw the figures named in `which` into `stage`; returns the files written there."""
    from toolcanary.analysis.figures_bfcl import f2_aggregates, f3_categories, f4_abstention_vs_tool_call

    drawers: dict[str, Callable[[], plt.Figure]] = {
        "f1": lambda: f1_training(train, found["training"], settings),
        "f2": lambda: f2_aggregates(bfcl, settings),
        "f3": lambda: f3_categories(bfcl),
        "f4": lambda: f4_abstention_vs_tool_call(bfcl),
        "f5": lambda: f5_training_distribution(distribution, settings),
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
