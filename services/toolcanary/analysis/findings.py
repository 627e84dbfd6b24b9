"""The findings under the table: how the declines compare, against what noise, and whether a trend is a step.

- the ratio of the two declines (abstention required vs tool call required) and each group's loss in items
  (pp x items / 100, items as scored at the last step; positive = lost);
- the same split inside Live (`live_irrelevance` vs the four live AST categories, pooled) and inside
  Non-Live (`irrelevance` vs the six non-live AST categories, pooled);
- each aggregate's endpoint difference against the repeat standard deviations;
- the lag-1 autocorrelation of each aggregate's OLS residuals;
- the best single breakpoint of each aggregate, with the slope before and after;
- the abstention change with and without BFCL's credit for unparsed call markup (`toolcanary.analysis.credit`),
  or why that is not measured.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

from toolcanary.analysis.credit import WITH_CREDIT_ROW, credit_findings, credit_prose
from toolcanary.analysis.data import BfclRun, finite_or_none, fmt
from toolcanary.analysis.settings import AnalysisSettings
from toolcanary.analysis.stats import lag1_autocorrelation, level_shift
from toolcanary.analysis.table import ChangeRow, change_row
from toolcanary.analysis.training import shift_json
from toolcanary.contract.bfcl import ABSTENTION, AST, LIVE_AST, NON_LIVE_AST, pooled

SPLITS = {
    "overall": (ABSTENTION, AST),
    "live": (("live_irrelevance",), LIVE_AST),
    "non_live": (("irrelevance",), NON_LIVE_AST),
}


def _group(run: BfclRun, name: str, categories: tuple[str, ...], settings: AnalysisSettings) -> dict[str, Any]:
    row = change_row(name, run.series(partial(pooled, names=categories)), settings)
    items = run.mean_total(categories)
    return {
        "categories": list(categories), "first": row.step0, "last": row.step_last,
        "delta_pp": row.delta_pp, "items": items, "items_lost": -row.delta_pp * items / 100.0,
    }


def split(run: BfclRun, abstention: tuple[str, ...], tool_call: tuple[str, ...],
          settings: AnalysisSettings) -> dict[str, Any]:
    a = _group(run, "abstention", abstention, settings)
    b = _group(run, "tool_call", tool_call, settings)
    ratio = a["delta_pp"] / b["delta_pp"] if b["delta_pp"] else math.nan
    return {"abstention": a, "tool_call": b, "ratio": finite_or_none(ratio),
            "same_sign": (a["delta_pp"] > 0) == (b["delta_pp"] > 0)}


def endpoint(row: ChangeRow) -> dict[str, Any]:
    """The first-to-last difference in units of each repeat s.d., and against the s.e. of two step means."""
    sds, passes = row.sds, row.series.passes
    first, last = (int(row.series.steps[i]) for i in (0, -1))
    z = math.nan
    if first in sds and last in sds:
        se = math.sqrt(sds[first] ** 2 / len(passes[0]) + sds[last] ** 2 / len(passes[-1]))
        z = row.delta_pp / se if se else math.nan
    return {
        "delta_pp": row.delta_pp, "repeat_sd": {str(s): v for s, v in sds.items()},
        "delta_over_sd": {str(s): finite_or_none(row.delta_pp / v if v else math.nan) for s, v in sds.items()},
        "z_first_vs_last": finite_or_none(z),
    }


def bfcl_findings(run: BfclRun, rows: list[ChangeRow], settings: AnalysisSettings) -> dict[str, Any]:
    return {
        "file": str(run.path),
        "steps": [int(run.steps[0]), int(run.steps[-1])], "checkpoints": len(run.steps),
        "hac": {"kernel": "bartlett", "maxlags": settings.lags_for(len(run.steps)),
                "small_sample_correction": settings.hac_small_sample},
        "declines": {name: split(run, a, b, settings) for name, (a, b) in SPLITS.items()},
        "endpoints": {row.name: endpoint(row) for row in rows},
        "residual_lag1_autocorrelation": {
            row.name: finite_or_none(lag1_autocorrelation(row.trend.residuals)) for row in rows
        },
        "level_shift": {
            row.name: shift_json(level_shift(row.series.steps, row.series.values, lags_for=settings.lags_for,
                                             min_segment=settings.min_segment,
                                             small_sample=settings.hac_small_sample), settings)
            for row in rows
        },
        "abstention_credit": credit_findings(run, next(r.series for r in rows if r.name == WITH_CREDIT_ROW)),
    }


def _split_sentence(label: str, found: dict[str, Any]) -> str:
    a, b = found["abstention"], found["tool_call"]
    head = (f"{label}: abstention required changes by {a['delta_pp']:+.2f} pp ({-a['items_lost']:+.1f} of "
            f"{a['items']:.0f} items), tool call required by {b['delta_pp']:+.2f} pp ({-b['items_lost']:+.1f} of "
            f"{b['items']:.0f} items)")
    if not found["same_sign"]:
        return head + "; a difference in sign rather than in rate."
    return head + f"; a ratio of {fmt(found['ratio'], '.2f')}."


def bfcl_prose(found: dict[str, Any], settings: AnalysisSettings) -> list[str]:
    declines = found["declines"]
    lines = [_split_sentence(label, declines[key])
             for key, label in (("overall", "All"), ("live", "Within Live"), ("non_live", "Within Non-Live"))]
    lines.append(credit_prose(found["abstention_credit"]))
    for name, end in found["endpoints"].items():
        ratios = ", ".join(f"{fmt(v, '+.1f')} s.d. at step {s}" for s, v in end["delta_over_sd"].items())
        lines.append(f"{name}: first to last {end['delta_pp']:+.2f} pp = {ratios or 'no repeated step'}; "
                     f"z (first vs last mean) = {fmt(end['z_first_vs_last'], '+.2f')}; lag-1 residual "
                     f"autocorrelation {fmt(found['residual_lag1_autocorrelation'][name], '+.2f')}.")
        shift = found["level_shift"][name]
        if shift is None:
            continue
        key = f"slope_per_{settings.slope_steps}_steps"
        inside = max(abs(shift[s]["t"] or 0.0) for s in ("before", "after"))
        if shift["prefers_shift"] and inside < settings.significant_t:
            verdict = "a level shift, not a trend: report the levels"
        elif shift["prefers_shift"]:
            verdict = "a level shift, with a trend inside a segment"
        else:
            verdict = "the straight line fits better than one step"
        lines.append(
            f"  best breakpoint after step {shift['last_step_before']:g}: {shift['level_before']:.2f} -> "
            f"{shift['level_after']:.2f}, slopes {fmt(shift['before'][key], '+.3f')} (t {fmt(shift['before']['t'], '+.2f')})"
            f" and {fmt(shift['after'][key], '+.3f')} (t {fmt(shift['after']['t'], '+.2f')}) pp per "
            f"{settings.slope_steps} steps; {verdict}."
        )
    return lines
