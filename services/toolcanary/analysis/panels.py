"""The one rule every figure panel follows for its value axis, so that a flat or empty series reads right.

- an empty series (every value nan: not measured) says "not measured" on the panel instead of drawing nothing;
- a flat series (one value, or the same value at every step) gets a fixed range of at least `Scale.span`
  around that value, kept inside the scale's bounds, and a note giving the value; matplotlib's autoscale
  would otherwise zoom into rounding noise (a range of +/- 1e-16 with an offset such as `1e-14+1e2`);
- every axis shows plain numbers, never an offset or scientific notation;
- a series that moves keeps matplotlib's range, and a panel that fixed its own range keeps it.

The figure modules call `frame` once per panel, or once for panels that share an axis; it is drawn
through `make_figures --fig all`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator, ScalarFormatter

NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class Scale:
    """What a panel's values are: the least range a flat series is shown with, the range values can take,
    and how the note writes a value."""

    span: float
    lo: float = -math.inf
    hi: float = math.inf
    spec: str = ".2f"


PERCENT = Scale(4.0, 0.0, 100.0)
CHANGE_PP = Scale(4.0, spec="+.2f")
REWARD = Scale(0.1, spec="+.3f")
SHARE = Scale(0.1, 0.0, 1.0, ".3f")
LEVEL = Scale(4.0, 0.0, spec="g")


@dataclass(frozen=True)
class Series:
    """One line of a panel: its values as drawn (nan: not measured) and, when the line is drawn relative to
    something, the values the note should quote and how to write them (default: as the scale does)."""

    label: str
    values: np.ndarray
    shown: np.ndarray | None = None
    spec: str | None = None


def is_flat(values: np.ndarray) -> bool:
    """One value, or equal values up to rounding: a range no wider than 1e-9 of their size."""
    return values.size > 0 and float(np.ptp(values)) <= 1e-9 * max(1.0, float(np.max(np.abs(values))))


def fixed_range(centre: float, scale: Scale) -> tuple[float, float]:
    """`scale.span` around `centre`, slid (not shrunk) to stay inside the bounds where they allow it."""
    lo, hi = centre - scale.span / 2, centre + scale.span / 2
    if lo < scale.lo:
        lo, hi = scale.lo, scale.lo + scale.span
    if hi > scale.hi:
        lo, hi = scale.hi - scale.span, scale.hi
    return max(lo, scale.lo), min(hi, scale.hi)


def _note(series: Series, scale: Scale, where: str, named: bool) -> str | None:
    finite = np.isfinite(series.values)
    prefix = f"{series.label}: " if named and series.label else ""
    if not finite.any():
        return f"{prefix}{NOT_MEASURED}"
    if not is_flat(series.values[finite]):
        return None
    shown = series.values if series.shown is None else series.shown
    value = format(float(shown[finite][0]), series.spec or scale.spec)
    if finite.sum() == 1:
        return f"{prefix}one value only ({value})"
    return f"{prefix}no change ({value})" if prefix else f"no change ({value} {where})"


def frame(scale: Scale, panels: Mapping[plt.Axes, Sequence[Series]], *, axis: str = "y",
          where: str = "at every step") -> None:
    """Set the value axis of `panels` (one axes, or several that share that axis) after their data are drawn.

    Each panel gets a note for each of its series that is empty or flat; the shared range is fixed only
    when every series of every panel is flat or empty, widened to whatever else was drawn (bands, error
    bars, trend lines).
    """
    for ax in panels:
        # plain numbers on both axes: steps and values alike read as written, never as offset + small ticks
        for side in (ax.xaxis, ax.yaxis):
            formatter = side.get_major_formatter()
            if isinstance(formatter, ScalarFormatter):
                formatter.set_useOffset(False)
                formatter.set_scientific(False)

    values = [s.values[np.isfinite(s.values)] for series in panels.values() for s in series]
    finite = np.concatenate(values) if values else np.array([])
    moves = finite.size > 0 and not is_flat(finite)
    first = next(iter(panels))
    own = first.get_autoscalex_on() if axis == "x" else first.get_autoscaley_on()
    if not moves and own:
        centre = float(np.mean(finite)) if finite.size else (0.0 if scale.lo <= 0 <= scale.hi else scale.lo)
        lo, hi = fixed_range(centre, scale)
        if finite.size:
            for ax in panels:
                drawn = ax.dataLim.intervalx if axis == "x" else ax.dataLim.intervaly
                if np.all(np.isfinite(drawn)) and drawn[0] <= drawn[1]:
                    lo, hi = min(lo, float(drawn[0])), max(hi, float(drawn[1]))
        for ax in panels:
            (ax.set_xlim if axis == "x" else ax.set_ylim)(lo, hi)

    for ax, series in panels.items():
        notes = [n for s in series if (n := _note(s, scale, where, len(series) > 1)) is not None]
        if not notes:
            continue
        if not any(np.isfinite(s.values).any() for s in series):
            ax.text(0.5, 0.5, NOT_MEASURED, transform=ax.transAxes, ha="center", va="center",
                    fontsize=8.5, color="0.35")
            continue
        # the note goes to the half of the panel away from the data, so that it never sits on the line
        lo, hi = ax.get_xlim() if axis == "x" else ax.get_ylim()
        data = np.concatenate([s.values[np.isfinite(s.values)] for s in series])
        upper = hi > lo and (float(np.mean(data)) - lo) / (hi - lo) > 0.5
        ax.text(0.02, 0.04 if upper else 0.96, "\n".join(notes), transform=ax.transAxes, ha="left",
                va="bottom" if upper else "top", fontsize=7, color="0.3")


FEW_STEPS = 8
"""Up to this many checkpoints, each gets its own tick on the step axis."""


def step_axis(axes: Sequence[plt.Axes], steps: np.ndarray, label: str = "training step") -> None:
    """A step axis reads in steps: ticks at the scored steps when there are few, else whole numbers only (a
    two-step run is never drawn with ticks at 0.25, 0.5, ...). Axes that share x get the ticks once."""
    unique = np.unique(np.asarray(steps, dtype=float))
    for ax in axes:
        if 0 < len(unique) <= FEW_STEPS:
            ax.set_xticks(unique, [f"{s:g}" for s in unique])
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[-1].set_xlabel(label)
