"""The headline table: the five aggregates at the first and last step, their change, trend and noise.

Rows follow `toolcanary.contract.bfcl.AGGREGATES`; the value of an aggregate at a step is the mean over
that step's passes. When the run measures them (`toolcanary.analysis.credit`), "Abstention required, as BFCL
scores it" precedes "Abstention required" and "Abstention required, no unparsed credit" follows it. Rendered as Markdown, CSV (full
precision, the columns of `csv_columns`) or LaTeX.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from functools import partial

from toolcanary.analysis.credit import BFCL_ROW, NO_CREDIT_ROW, WITH_CREDIT_ROW, bfcl_series, no_credit_series
from toolcanary.analysis.data import BfclRun, StepSeries
from toolcanary.analysis.settings import AnalysisSettings
from toolcanary.analysis.stats import Trend, lag1_autocorrelation, ols_trend
from toolcanary.analysis.verdicts import ChangeTest, change_test, p_text
from toolcanary.contract.bfcl import AGGREGATES, aggregate_value

# t, t_hac and rho describe the series; p_change is the calibrated test the findings' verdicts rest on
# (toolcanary.analysis.verdicts).
FIXED_COLUMNS = ("aggregate", "step0", "step_last", "rel_delta_pct", "delta_pp", "slope_pp_per_10", "t", "t_hac",
                 "rho", "p_change")


@dataclass(frozen=True)
class ChangeRow:
    """First-to-last change and trend of one series; also used for the findings' sub-groups."""

    name: str
    series: StepSeries
    trend: Trend
    test: ChangeTest
    """The calibrated test of whether the series changes (`toolcanary.analysis.verdicts.change_test`)."""
    slope_steps: int

    @property
    def step0(self) -> float:
        return self.series.first

    @property
    def step_last(self) -> float:
        return self.series.last

    @property
    def delta_pp(self) -> float:
        return self.step_last - self.step0

    @property
    def rel_delta_pct(self) -> float:
        return 100.0 * self.delta_pp / self.step0 if self.step0 else float("nan")

    @property
    def slope(self) -> float:
        """Percentage points per `slope_steps` training steps."""
        return self.trend.slope * self.slope_steps

    @property
    def sds(self) -> dict[int, float]:
        return self.series.sds

    @property
    def rho(self) -> float:
        """Lag-1 autocorrelation of the OLS residuals: descriptive (biased low at 21 checkpoints)."""
        return lag1_autocorrelation(self.trend.residuals)


def change_row(name: str, series: StepSeries, settings: AnalysisSettings) -> ChangeRow:
    trend = ols_trend(series.steps, series.values, lags=settings.lags_for(len(series.steps)),
                      small_sample=settings.hac_small_sample)
    test = change_test(series.steps, series.values, trend.t, settings.min_segment, settings.null_replicates,
                       settings.null_seed)
    return ChangeRow(name, series, trend, test, settings.slope_steps)


def headline_rows(run: BfclRun, settings: AnalysisSettings) -> list[ChangeRow]:
    """The five aggregates, in the contract's order: what the findings and figure f2 are about."""
    return [change_row(a.name, run.series(partial(aggregate_value, a.name)), settings) for a in AGGREGATES]


def table_rows(run: BfclRun, aggregates: list[ChangeRow], settings: AnalysisSettings) -> list[ChangeRow]:
    """The table's rows: `aggregates`, with "Abstention required" between the abstention rows the run
    measures (`toolcanary.analysis.credit`): "as BFCL scores it" before it, "no unparsed credit" after it. A
    row the run does not measure is absent, never a row of zeros."""
    rows = list(aggregates)
    at = next(i for i, row in enumerate(rows) if row.name == WITH_CREDIT_ROW)
    before = [change_row(BFCL_ROW, series, settings)] if (series := bfcl_series(run)) is not None else []
    after = [change_row(NO_CREDIT_ROW, series, settings)] if (series := no_credit_series(run)) is not None else []
    return [*rows[:at], *before, rows[at], *after, *rows[at + 1:]]


def sd_steps(rows: list[ChangeRow]) -> list[int]:
    return sorted({step for row in rows for step in row.sds})


def csv_columns(rows: list[ChangeRow]) -> list[str]:
    return [*FIXED_COLUMNS, *(f"sd_step{s}" for s in sd_steps(rows))]


def _cells(row: ChangeRow) -> list[float]:
    return [row.step0, row.step_last, row.rel_delta_pct, row.delta_pp, row.slope, row.trend.t, row.trend.t_hac,
            row.rho, row.test.p]


def render_csv(rows: list[ChangeRow]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(csv_columns(rows))
    steps = sd_steps(rows)
    for row in rows:
        sds = [row.sds.get(s, float("nan")) for s in steps]
        writer.writerow([row.name, *(repr(float(v)) for v in [*_cells(row), *sds])])
    return buffer.getvalue()


def number_text(value: float, spec: str, suffix: str = "") -> str:
    # An undefined statistic (a zero base, two steps, a constant series) reads "n/a", never "+nan".
    return "n/a" if math.isnan(value) else f"{value:{spec}}{suffix}"


def _display(row: ChangeRow, steps: list[int]) -> list[str]:
    sds = [number_text(row.sds[s], ".2f") if s in row.sds else "" for s in steps]
    return [
        number_text(row.step0, ".2f"), number_text(row.step_last, ".2f"), number_text(row.rel_delta_pct, "+.2f", "%"),
        number_text(row.delta_pp, "+.2f"), number_text(row.slope, "+.3f"), number_text(row.trend.t, "+.2f"),
        number_text(row.trend.t_hac, "+.2f"), number_text(row.rho, "+.2f"), p_text(row.test.p), *sds,
    ]


def _headers(rows: list[ChangeRow]) -> list[str]:
    first, last = (int(rows[0].series.steps[i]) for i in (0, -1))
    return [
        "", f"step {first}", f"step {last}", "rel delta", "delta pp", "pp/10 steps", "t (descr.)", "t HAC (descr.)",
        "rho (descr.)", "p change",
        *(f"s.d. step {s}" for s in sd_steps(rows)),
    ]


@dataclass(frozen=True)
class ShownRow:
    """One row as every renderer shows it: the name, the cells' text and the full-precision values behind them."""

    name: str
    cells: list[str]
    values: list[float]


def shown_table(rows: list[ChangeRow]) -> tuple[list[str], list[ShownRow]]:
    """(headers, rows) of the table: the one layout the Markdown, LaTeX and HTML renderers share."""
    steps = sd_steps(rows)
    return _headers(rows), [ShownRow(row.name, _display(row, steps),
                                     [*_cells(row), *(row.sds.get(s, math.nan) for s in steps)]) for row in rows]


def render_markdown(rows: list[ChangeRow]) -> str:
    headers, shown = shown_table(rows)
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(["---"] + ["---:"] * (len(headers) - 1)) + "|"]
    lines += ["| " + " | ".join([row.name, *row.cells]) + " |" for row in shown]
    return "\n".join(lines) + "\n"


def render_latex(rows: list[ChangeRow]) -> str:
    """A booktabs tabular; minus signs typeset in math mode."""
    def tex(cell: str) -> str:
        return cell.replace("%", r"\%").replace("-", "$-$").replace("+", "$+$")

    headers, shown = shown_table(rows)
    lines = [
        r"\begin{tabular}{l" + "r" * (len(headers) - 1) + "}", r"\toprule",
        " & ".join(headers) + r" \\", r"\midrule",
        *(" & ".join([row.name, *map(tex, row.cells)]) + r" \\" for row in shown),
        r"\bottomrule", r"\end{tabular}",
    ]
    return "\n".join(lines) + "\n"


RENDERERS = {"md": render_markdown, "csv": render_csv, "latex": render_latex}
EXTENSIONS = {"md": "md", "csv": "csv", "latex": "tex"}
