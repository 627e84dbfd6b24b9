"""The training-side canary: the policy's tool-call share in training against its own first steps.

BFCL sees a checkpoint only when it is scored; the trainer sees every step. When the share of assistant turns
that call a tool drifts far from where the run started, the policy is learning to call more or to decline more,
which is what moves BFCL's abstention and tool-call rows. The canary compares the mean share of the last
`canary_steps` training steps with the mean of the first `canary_steps`, and warns when they differ by more than
`canary_shift` (an absolute share, e.g. 0.15: from 0.60 to 0.45). The threshold is a set alarm level, not a
test: the column `tool_call_share_shift` in `train_metrics.csv` holds the measured shift at every step, and
`tool_call_canary` whether it was beyond the threshold.

Both trainers call `read_canary` when they close a step (the CPU run in `toolcanary.train.cpu.run`, the GPU
recipe through `toolcanary.train.gpu.verl_hooks.close_step`), with the shares of the steps already in the
file, so a resumed run measures against the same first steps.

    reading = read_canary([0.61, 0.60, 0.62, 0.55, 0.41], steps=3, threshold=0.15)
    reading.shift, reading.fired   # -0.083 (mean of the last 3 against the first 3), False
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean

from toolcanary.contract.append_only import iter_lines
from toolcanary.contract.csv_schemas import read_train_metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CanaryReading:
    first: float
    """Mean tool-call share of the first `steps` steps with a share."""
    recent: float
    """Mean of the last `steps` steps with a share, this one included."""
    shift: float
    """recent − first."""
    fired: bool
    """|shift| > the threshold."""


def read_canary(shares: list[float], *, steps: int, threshold: float) -> CanaryReading | None:
    """The canary after the last of `shares` (one per step, in step order; NaN: no finished episode). None until
    the run has more steps with a share than the `steps` its start is measured over."""
    measured = [s for s in shares if math.isfinite(s)]
    if len(measured) <= steps:
        return None
    first, recent = fmean(measured[:steps]), fmean(measured[-steps:])
    return CanaryReading(first, recent, recent - first, abs(recent - first) > threshold)


def earlier_shares(metrics: Path, before_step: int) -> list[float]:
    """The tool-call shares `train_metrics.csv` holds for the steps before `before_step` (none: no file yet)."""
    if not metrics.exists() or len(list(iter_lines(metrics))) < 2:  # no file, or a header without a row yet
        return []
    rows = read_train_metrics(metrics)
    return [r["tool_call_share"] for r in sorted(rows, key=lambda r: r["step"]) if r["step"] < before_step]


def canary_columns(metrics: Path, step: int, share: float, *, steps: int, threshold: float) -> dict[str, float]:
    """The canary's two `train_metrics.csv` cells for `step` (NaN until it can be read), and its warning."""
    reading = read_canary([*earlier_shares(metrics, step), share], steps=steps, threshold=threshold)
    if reading is None:
        return {"tool_call_share_shift": math.nan, "tool_call_canary": math.nan}
    if reading.fired:
        log.warning("tool-call canary at step %d: the policy's tool-call share in training moved %+.3f, from %.3f "
                    "(mean of its first %d steps) to %.3f (its last %d), beyond the set %.3f; BFCL's abstention and "
                    "tool-call rows are likely to move with it", step, reading.shift, reading.first, steps,
                    reading.recent, steps, threshold)
    return {"tool_call_share_shift": reading.shift, "tool_call_canary": float(reading.fired)}
