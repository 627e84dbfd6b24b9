"""The BFCL figures f2-f4, each a function of one run's counts returning a matplotlib Figure, and the figure of
`make_figures --compare` (two runs' abstention and tool-call series).

The noise floor in f2 is the first-step value +/- 2 pooled repeat s.d. (root mean square of the repeat
s.d.s over the repeated steps): a checkpoint inside the band is not distinguishable from a re-evaluation.
"""

from __future__ import annotations

import math
from functools import partial

import matplotlib.pyplot as plt
import numpy as np

from toolcanary.analysis.data import BfclRun, StepSeries
from toolcanary.analysis.findings import SPLITS
from toolcanary.analysis.panels import CHANGE_PP, PERCENT, Series, frame, step_axis
from toolcanary.analysis.settings import AnalysisSettings
from toolcanary.analysis.table import headline_rows, number_text
from toolcanary.analysis.verdicts import p_text
from toolcanary.contract.bfcl import BY_NAME, accuracy, aggregate_value, pooled

WIDTH = 7.0
KIND_COLOURS = {"ast": "C0", "irrelevance": "C3", "relevance": "C1", "multi_turn": "C2", "agentic": "C4"}


def _spread(ax: plt.Axes, series: StepSeries, colour: str, dense: bool) -> None:
    sds = series.sds
    repeated = np.array([s in sds for s in series.steps.astype(int)])
    values = series.values
    ax.plot(series.steps, values, color=colour, lw=1.0, marker=None if dense else "o", ms=3)
    if repeated.any():
        ax.errorbar(series.steps[repeated], values[repeated], yerr=[sds[int(s)] for s in series.steps[repeated]],
                    fmt="none", ecolor="black", elinewidth=1.0, capsize=3, zorder=3)


def f2_aggregates(run: BfclRun, settings: AnalysisSettings) -> plt.Figure:
    rows = headline_rows(run, settings)
    fig, axes = plt.subplots(3, 2, figsize=(WIDTH, 7.2), sharex=True, layout="constrained")
    dense = len(run.steps) > 60
    for ax, row in zip(axes.flat, rows, strict=False):
        sds = list(row.sds.values())
        _spread(ax, row.series, "C0", dense)
        ax.plot(row.series.steps, row.trend.intercept + row.trend.slope * row.series.steps,
                color="C1", ls="--", lw=1.0)
        if sds:
            floor = 2 * math.sqrt(float(np.mean(np.square(sds))))
            ax.axhspan(row.step0 - floor, row.step0 + floor, color="0.6", alpha=0.2, lw=0)
        # An undefined t (two steps, a flat series) reads "n/a", as in the table, never "+nan".
        tested = (f"p change {p_text(row.test.p)} (t {number_text(row.trend.t, '+.2f')}, descriptive)"
                  if not math.isnan(row.test.p) else "no test (under 3 checkpoints, or flat)")
        ax.set_title(f"{row.name}\n{row.delta_pp:+.2f} pp first to last, {tested}")
        frame(PERCENT, {ax: [Series("", row.series.values)]})
        ax.set_ylabel("accuracy (%)")
    legend_ax = axes.flat[-1]
    legend_ax.axis("off")
    handles = [
        plt.Line2D([], [], color="C0", marker=None if dense else "o", ms=3, label="mean over passes"),
        plt.Line2D([], [], color="black", marker="|", ls="none", ms=10, label="+/- 1 repeat s.d."),
        plt.Line2D([], [], color="C1", ls="--", label="OLS trend"),
        plt.Rectangle((0, 0), 1, 1, color="0.6", alpha=0.2, label="noise floor: first step +/- 2 pooled repeat s.d."),
    ]
    legend_ax.legend(handles=handles, loc="center", frameon=False, fontsize=8)
    for ax in axes[-1]:
        step_axis([ax], run.steps)
    axes[-1][1].tick_params(labelbottom=False)
    axes[1][1].tick_params(labelbottom=True)
    step_axis([axes[1][1]], run.steps)
    fig.suptitle("BFCL V4 aggregates across training", fontsize=10)
    return fig


def f3_categories(run: BfclRun) -> plt.Figure:
    names = [c.name for c in BY_NAME.values() if c.name in run.categories]
    first, last = int(run.steps[0]), int(run.steps[-1])
    deltas, errors = [], []
    for name in names:
        series = run.series(partial(accuracy, name=name))
        deltas.append(series.last - series.first)
        sds = series.sds
        both = first in sds and last in sds
        errors.append(math.sqrt(sds[first] ** 2 / len(series.passes[0]) + sds[last] ** 2 / len(series.passes[-1]))
                      if both else 0.0)
    fig, ax = plt.subplots(figsize=(WIDTH, 0.26 * len(names) + 1.2), layout="constrained")
    y = np.arange(len(names))[::-1]
    colours = [KIND_COLOURS[BY_NAME[n].kind] for n in names]
    ax.barh(y, deltas, color=colours, xerr=errors if any(errors) else None, ecolor="0.3", capsize=2, height=0.7)
    items = [round(run.mean_total((n,))) for n in names]
    ax.set_yticks(y, [f"{n}  (n={k})" for n, k in zip(names, items, strict=True)])
    ax.axvline(0, color="black", lw=0.8)
    span = max(max(abs(d) + e for d, e in zip(deltas, errors, strict=True)), 0.5)
    ax.set_xlim(-span * 1.35, span * 1.35)
    frame(CHANGE_PP, {ax: [Series("", np.array(deltas))]}, axis="x", where="in every category")
    for yi, d, e in zip(y, deltas, errors, strict=True):
        ax.annotate(f"{d:+.2f}", (d + e if d >= 0 else d - e, yi), xytext=(4 if d >= 0 else -4, 0),
                    textcoords="offset points", ha="left" if d >= 0 else "right", va="center", fontsize=7)
    ax.set_xlabel(f"change in accuracy, step {first} -> step {last} (pp)")
    kinds = sorted({BY_NAME[n].kind for n in names})
    # above the axes, so that no bar length can ever run under it
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=KIND_COLOURS[k], label=k.replace("_", "-")) for k in kinds],
              loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(kinds), frameon=False)
    ax.grid(axis="y", visible=False)
    fig.suptitle("Per-category change (error bars: s.e. of the difference of the two step means)", fontsize=9)
    return fig


def f4_abstention_vs_tool_call(run: BfclRun) -> plt.Figure:
    titles = {"overall": "All single-turn", "live": "Inside Live", "non_live": "Inside Non-Live"}
    fig, axes = plt.subplots(1, 3, figsize=(WIDTH, 2.9), sharey=True, layout="constrained")
    dense = len(run.steps) > 60
    drawn: dict[plt.Axes, list[Series]] = {}
    for ax, (key, (abstention, tool_call)) in zip(axes, SPLITS.items(), strict=True):
        drawn[ax] = []
        for label, categories, colour in (("abstention required", abstention, "C3"),
                                          ("tool call required", tool_call, "C0")):
            series = run.series(partial(pooled, names=categories))
            ax.plot(series.steps, series.values - series.first, color=colour, lw=1.1,
                    marker=None if dense else "o", ms=2.5, label=label)
            drawn[ax].append(Series(label.split(" required")[0], series.values - series.first,
                                   series.values, ".2f"))
        ax.axhline(0, color="black", lw=0.7)
        ax.set_title(titles[key])
        step_axis([ax], run.steps)
    # the three panels share one y axis, so one call fixes its range for all of them
    frame(CHANGE_PP, drawn)
    axes[0].set_ylabel(f"change since step {int(run.steps[0])} (pp)")
    # one legend above the panels: inside an axes it would cover data whichever corner it took
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncol=2, frameon=False)
    return fig


def compare_series(runs: dict[str, BfclRun], found: dict) -> plt.Figure:
    """Abstention required and Tool call required against step for two runs (mean over passes, +/- 1 repeat
    s.d. where repeated), each panel titled with the two changes and their difference."""
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 3.2), sharex=True, layout="constrained")
    for ax, name in zip(axes, ("Abstention required", "Tool call required"), strict=True):
        drawn = []
        for colour, (label, run) in zip(("C0", "C3"), runs.items(), strict=True):
            series = run.series(partial(aggregate_value, name))
            _spread(ax, series, colour, len(run.steps) > 60)
            drawn.append(Series(label, series.values))
            ax.plot([], [], color=colour, label=label)
        row = found["aggregates"][name]
        title = name if "not_measurable" in row else (
            f"{name}\nB - A = {row['difference_pp']:+.2f} pp "
            f"[{row['difference_interval_pp'][0]:+.2f}, {row['difference_interval_pp'][1]:+.2f}]")
        ax.set_title(title)
        frame(PERCENT, {ax: drawn})
        step_axis([ax], np.concatenate([r.steps for r in runs.values()]))
        ax.set_ylabel("accuracy (%)")
        ax.legend(loc="best", frameon=False)
    a, b = found["runs"]["a"], found["runs"]["b"]
    fig.suptitle(f"{a} (A) and {b} (B) on BFCL V4", fontsize=10)
    return fig
