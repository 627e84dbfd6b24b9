"""Load a run's two CSVs through the contract's readers and turn them into per-step series.

The readers in `toolcanary.contract.csv_schemas` check each row; this module adds what only the analysis
needs: at least two distinct steps, every category the five aggregates use, and no empty category. It keeps
each pass's index (the pass folders are named by it), its `correct_unparsed` cells, None where not
measured, and each row as read, with the other counts beside correct/total (contract 1.10).
"""

from __future__ import annotations

import csv
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from toolcanary.analysis.stats import sample_sd
from toolcanary.contract.append_only import read_lines
from toolcanary.contract.bfcl import AGGREGATES, Counts
from toolcanary.contract.csv_schemas import (
    BFCL_BY_CATEGORY,
    CORRECT_UNPARSED,
    TRAIN_METRICS,
    BfclRow,
    read_bfcl_by_category,
    read_train_metrics,
)
from toolcanary.contract.errors import ContractError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepSeries:
    """One quantity at every evaluated step: the value of each pass and their mean."""

    steps: np.ndarray
    passes: tuple[np.ndarray, ...]
    """Per step, the value of every pass in pass order."""

    @cached_property
    def values(self) -> np.ndarray:
        return np.array([p.mean() for p in self.passes])

    @property
    def first(self) -> float:
        return float(self.passes[0].mean())

    @property
    def last(self) -> float:
        return float(self.passes[-1].mean())

    @cached_property
    def sds(self) -> dict[int, float]:
        """Sample standard deviation (ddof = 1) at every step with two or more passes."""
        return {int(s): sample_sd(p) for s, p in zip(self.steps, self.passes, strict=True) if len(p) >= 2}


@dataclass(frozen=True)
class BfclRun:
    path: Path
    steps: np.ndarray
    counts: tuple[tuple[Counts, ...], ...]
    """Per step (ascending), per pass (ascending index): category -> (correct, total)."""
    pass_indices: tuple[tuple[int, ...], ...]
    """Per step, the index of each pass in `counts`: the P of its folder passes/step_NNNN_pass_P/."""
    unparsed: tuple[tuple[Mapping[str, int | None], ...], ...]
    """Per step, per pass: category -> correct_unparsed (None: the cell is empty or the column absent)."""
    has_unparsed_column: bool
    """Whether the file has the correct_unparsed column at all (files from before contract 1.5 do not)."""
    rows: Mapping[tuple[int, int], Mapping[str, BfclRow]] = field(default_factory=dict)
    """Per (step, pass index): category -> its row as read, with the counts beside correct/total
    (`csv_schemas.MEASURED_COLUMNS`, None where not measured). Keyed by step and pass, not by position, so a
    run restricted to some steps keeps it whole. Empty for a run not read from a file."""
    columns: tuple[str, ...] = ()
    """The file's header (empty for a run not read from a file)."""

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(sorted(self.counts[0][0]))

    def series(self, measure: Callable[[Counts], float]) -> StepSeries:
        return StepSeries(self.steps, tuple(np.array([measure(c) for c in step]) for step in self.counts))

    def mean_total(self, categories: tuple[str, ...]) -> float:
        """Items behind `categories`, as scored at the last step (mean over its passes)."""
        last = self.counts[-1]
        return sum(sum(c[n][1] for n in categories) for c in last) / len(last)


def load_bfcl(path: Path, baseline_step: int = 0, min_steps: int = 2) -> BfclRun:
    """Read `bfcl_by_category.csv` and check it can feed the table, measured from `baseline_step`; `min_steps` 1
    reads a run whose only scored step is its baseline (the report page of a young run).

    The baseline must be scored, and be the first scored step unless it was named explicitly: a run whose step
    0 (the base model) was never scored must not quietly take its first checkpoint as the base. Steps before an
    explicit baseline are left out.

    Raises:
        ContractError: naming the file and the row (or step, pass and category) that is wrong.
    """
    rows = read_bfcl_by_category(path)
    scored = sorted({r.step for r in rows})
    if baseline_step not in scored:
        first = scored[0]
        fix = (f"Score step {baseline_step} (make eval STEP={baseline_step} RUN=..., or make eval-all), or measure "
               f"from step {first} with --baseline-step {first}" if baseline_step < first else
               f"Name a scored step with --baseline-step (scored: {scored[:8]}{' ...' if len(scored) > 8 else ''})")
        raise ContractError(f"{path}: steps", f"step {baseline_step} scored, the baseline every change is measured "
                                              "from (the base model is step 0)", f"first scored step {first}", fix)
    earlier = [r for r in rows if r.step < baseline_step]
    if earlier:
        log.warning("measuring from step %d: %d rows of earlier steps left out", baseline_step, len(earlier))
        rows = [r for r in rows if r.step >= baseline_step]
    grouped: dict[int, dict[int, dict[str, tuple[int, int]]]] = {}
    unparsed: dict[int, dict[int, dict[str, int | None]]] = {}
    for row in rows:
        grouped.setdefault(row.step, {}).setdefault(row.pass_index, {})[row.category] = (row.correct, row.total)
        unparsed.setdefault(row.step, {}).setdefault(row.pass_index, {})[row.category] = row.correct_unparsed
    if len(grouped) < min_steps:
        (step,) = grouped
        raise ContractError(
            f"{path}: every row (step {step})", "at least two distinct steps, to measure a change",
            f"{len(rows)} rows, all at step {step}", "Score a second checkpoint before running the analysis",
        )
    present = {r.category for r in rows}
    needed = sorted({c for a in AGGREGATES for c in a.categories})
    missing = [c for c in needed if c not in present]
    if missing:
        raise ContractError(
            f"{path}: categories", f"rows for every category the five aggregates use ({len(needed)})",
            f"{missing} missing", "Score the 17 offline categories at every step (the eval client's default)",
        )
    for row in rows:
        if row.total == 0 and row.category in needed:
            raise ContractError(
                f"{path}: step {row.step}, pass {row.pass_index}, category {row.category!r}",
                "a total of at least one item", "total=0", "Re-score that pass",
            )
    steps = np.array(sorted(grouped), dtype=float)
    indices = tuple(tuple(sorted(grouped[int(s)])) for s in steps)
    counts = tuple(tuple(grouped[int(s)][p] for p in passes) for s, passes in zip(steps, indices, strict=True))
    cells = tuple(tuple(unparsed[int(s)][p] for p in passes) for s, passes in zip(steps, indices, strict=True))
    log.info("read %d rows from %s: %d steps, %d passes", len(rows), path, len(steps), sum(map(len, counts)))
    by_pass: dict[tuple[int, int], dict[str, BfclRow]] = {}
    for row in rows:
        by_pass.setdefault((row.step, row.pass_index), {})[row.category] = row
    header = tuple(_header(path))
    return BfclRun(path=path, steps=steps, counts=counts, pass_indices=indices, unparsed=cells,
                   has_unparsed_column=CORRECT_UNPARSED in header, rows=by_pass, columns=header)


def _header(path: Path) -> list[str]:
    """The column names of a CSV the contract's reader has already accepted."""
    first = read_lines(path).lines[0][1]
    return next(csv.reader([first]))


@dataclass(frozen=True)
class TrainRun:
    path: Path
    steps: np.ndarray
    columns: Mapping[str, np.ndarray]

    def series(self, column: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of one metric, leaving out the steps where it is nan."""
        values = self.columns[column]
        keep = np.isfinite(values)
        return self.steps[keep], values[keep]


def load_training(path: Path) -> TrainRun:
    """Read `train_metrics.csv` (sorted by step); needs a value of each reported column at one step at least.

    One step is enough to report that step's values; the trends it cannot give are marked not measurable by
    `toolcanary.analysis.training`.
    """
    rows = sorted(read_train_metrics(path), key=lambda r: r["step"])
    columns = {name: np.array([r[name] for r in rows], dtype=float) for name in rows[0]}
    run = TrainRun(path=path, steps=columns.pop("step"), columns=columns)
    for column in ("reward_mean", "curriculum_level", "tool_call_share"):
        if not len(run.series(column)[0]):
            raise ContractError(
                f"{path}: column {column!r}", "a number at one step at least",
                f"no value in any of its {len(rows)} rows",
                "Point --train-metrics at the trainer's full train_metrics.csv",
            )
    log.info("read %d training steps from %s", len(rows), path)
    return run


def data_paths(data: Path, train_metrics: Path | None) -> tuple[Path, Path]:
    return data / BFCL_BY_CATEGORY, train_metrics if train_metrics is not None else data / TRAIN_METRICS


def finite_or_none(value: float) -> float | None:
    """JSON has no nan or infinity: such a value is written as null."""
    return float(value) if math.isfinite(value) else None


def fmt(value: float | None, spec: str) -> str:
    """Format a number for prose; a missing (null) value reads 'n/a'."""
    return "n/a" if value is None else format(value, spec)
