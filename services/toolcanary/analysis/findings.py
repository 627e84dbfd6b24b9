"""The findings under the table: how the declines compare, against what noise, and whether a change is a step.

Every verdict the prose prints comes from a test in `toolcanary.analysis.verdicts`, at the false-positive rate
`--verdict-level`; every other number is labelled descriptive.

- each aggregate's trend test (OLS t against every trend-free wander of the run's checkpoints), and its
  first-to-last change against the repeat noise pooled over the repeated steps;
- abstention required against tool call required (overall, inside Live, inside Non-Live): each group's
  change in pp and in items (pp x items / 100, items as scored at the last step; positive = lost), and a
  difference in rate or in sign only when both groups trend;
- the lag-1 autocorrelation of each aggregate's OLS residuals (descriptive);
- the best single breakpoint of each aggregate: a level shift is claimed only for a series that trends and
  that one step fits better than the line (BIC);
- the abstention change with and without BFCL's credit for unparsed call markup (`toolcanary.analysis.credit`),
  or why that is not measured.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

from toolcanary.analysis.credit import WITH_CREDIT_ROW, credit_findings, credit_prose, overrides_prose
from toolcanary.analysis.data import BfclRun, finite_or_none, fmt
from toolcanary.analysis.settings import AnalysisSettings
from toolcanary.analysis.stats import level_shift
from toolcanary.analysis.table import ChangeRow, change_row
from toolcanary.analysis.training import shift_json
from toolcanary.analysis.verdicts import NULL_FAMILY, p_text, repeat_noise_test
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
        "p_change": finite_or_none(row.test.p), "changes": row.test.holds(settings.verdict_level),
    }


def split(run: BfclRun, abstention: tuple[str, ...], tool_call: tuple[str, ...],
          settings: AnalysisSettings) -> dict[str, Any]:
    """The two groups' changes; `verdict` names what may be claimed about them (see `_split_sentence`)."""
    a = _group(run, "abstention", abstention, settings)
    b = _group(run, "tool_call", tool_call, settings)
    ratio = a["delta_pp"] / b["delta_pp"] if b["delta_pp"] else math.nan
    same_sign = (a["delta_pp"] > 0) == (b["delta_pp"] > 0)
    if a["p_change"] is None or b["p_change"] is None:
        verdict = "not_measurable"
    elif a["changes"] and b["changes"]:
        verdict = "rate" if same_sign else "sign"
    else:
        verdict = "abstention_only" if a["changes"] else "tool_call_only" if b["changes"] else "neither"
    return {"abstention": a, "tool_call": b, "ratio": finite_or_none(ratio), "same_sign": same_sign,
            "verdict": verdict}


def change_json(row: ChangeRow, shift: dict[str, Any] | None, settings: AnalysisSettings) -> dict[str, Any]:
    """The change test of one row, and the verdict it allows: "trend" or "level shift" (whichever shape BIC
    prefers), or None when the series does not change beyond a trend-free wander."""
    changes = row.test.holds(settings.verdict_level)
    shape = None
    if changes:
        shape = "level shift" if shift is not None and shift["prefers_shift"] else "trend"
    return {"t": finite_or_none(row.trend.t), "t_hac": finite_or_none(row.trend.t_hac),
            "rho": finite_or_none(row.rho), "p_trend": finite_or_none(row.test.p_trend),
            "worst_null_rho": finite_or_none(row.test.worst_rho), "f_shift": finite_or_none(row.test.f_shift),
            "p_shift": finite_or_none(row.test.p_shift), "p_change": finite_or_none(row.test.p),
            "changes": changes, "verdict": shape}


def endpoint(row: ChangeRow, settings: AnalysisSettings) -> dict[str, Any]:
    """The first-to-last difference against the repeat noise pooled over the repeated steps."""
    test = repeat_noise_test(row.series)
    found: dict[str, Any] = {"delta_pp": row.delta_pp, "repeat_sd": {str(s): v for s, v in row.sds.items()}}
    if test is None:
        return {**found, "pooled_sd": None, "df": 0, "t": None, "p": None, "beyond_repeat_noise": None}
    return {**found, "pooled_sd": test.pooled_sd, "df": test.df, "t": finite_or_none(test.t), "p": test.p,
            "beyond_repeat_noise": test.holds(settings.verdict_level)}


def bfcl_findings(run: BfclRun, rows: list[ChangeRow], settings: AnalysisSettings) -> dict[str, Any]:
    shifts = {row.name: shift_json(level_shift(row.series.steps, row.series.values, lags_for=settings.lags_for,
                                               min_segment=settings.min_segment,
                                               small_sample=settings.hac_small_sample), settings)
              for row in rows}
    changes = {row.name: change_json(row, shifts[row.name], settings) for row in rows}
    return {
        "file": str(run.path),
        "steps": [int(run.steps[0]), int(run.steps[-1])], "checkpoints": len(run.steps),
        "verdicts": {"level": settings.verdict_level, "trend_null": NULL_FAMILY,
                     "null_replicates": settings.null_replicates, "null_seed": settings.null_seed},
        "hac": {"kernel": "bartlett", "maxlags": settings.lags_for(len(run.steps)),
                "small_sample_correction": settings.hac_small_sample},
        "changes": changes,
        "declines": {name: split(run, a, b, settings) for name, (a, b) in SPLITS.items()},
        "endpoints": {row.name: endpoint(row, settings) for row in rows},
        "residual_lag1_autocorrelation": {row.name: finite_or_none(row.rho) for row in rows},
        "level_shift": shifts,
        "abstention_credit": credit_findings(run, next(r.series for r in rows if r.name == WITH_CREDIT_ROW)),
    }


def _split_sentence(label: str, found: dict[str, Any]) -> str:
    a, b = found["abstention"], found["tool_call"]
    head = (f"{label}: abstention required changes by {a['delta_pp']:+.2f} pp ({-a['items_lost']:+.1f} of "
            f"{a['items']:.0f} items, p change {p_text(a['p_change'])}), tool call required by "
            f"{b['delta_pp']:+.2f} pp ({-b['items_lost']:+.1f} of {b['items']:.0f} items, p change "
            f"{p_text(b['p_change'])})")
    tail = {
        "rate": f"; both change the same way, abstention by {fmt(found['ratio'], '.2f')} times the change in tool "
                "calling (the ratio is descriptive).",
        "sign": "; both change, in opposite directions: a difference in sign rather than in rate.",
        "abstention_only": "; only abstention required changes beyond a trend-free wander, so no ratio or sign is "
                           "claimed.",
        "tool_call_only": "; only tool call required changes beyond a trend-free wander, so no ratio or sign is "
                          "claimed.",
        "neither": "; neither changes beyond what a trend-free wander shows, so no ratio or sign is claimed.",
        "not_measurable": "; no change can be tested (see above), so no ratio or sign is claimed.",
    }[found["verdict"]]
    return head + tail


def _lead(found: dict[str, Any]) -> list[str]:
    """Once, before the verdicts: how to read them, and what the data cannot give."""
    level, checkpoints = found["verdicts"]["level"], found["checkpoints"]
    lines = [f"Verdicts at a false-positive rate of {100 * level:g}%: a series changes (a trend or a level shift) "
             f"when its slope's t or its best step's F is beyond every trend-free wander of these {checkpoints} "
             f"checkpoints ({NULL_FAMILY}), p change <= {level:g}; t, HAC t and rho in the table are descriptive."]
    if checkpoints < 3:
        lines.append(f"With {checkpoints} scored checkpoints no trend, level shift or residual correlation can be "
                     "measured: score more checkpoints (make eval-all).")
    if all(end["p"] is None for end in found["endpoints"].values()):
        lines.append("No step was scored more than once, so the repeat noise, and whether a change exceeds it, "
                     "cannot be measured: score repeat passes (make eval-all scores them at the repeat steps).")
    return lines


def _endpoint_sentence(name: str, end: dict[str, Any], change: dict[str, Any], shift: dict[str, Any] | None,
                       settings: AnalysisSettings) -> str:
    parts = [f"{name}: first to last {end['delta_pp']:+.2f} pp"]
    if end["p"] is not None:
        where = "beyond" if end["beyond_repeat_noise"] else "within"
        parts.append(f"{where} the repeat noise (pooled s.d. {end['pooled_sd']:.2f} pp, {end['df']} d.f.; t = "
                     f"{fmt(end['t'], '+.2f')}, p {p_text(end['p'])})")
    if change["p_change"] is not None:
        verdict = {"trend": "a trend", "level shift": "a level shift", None: "no change beyond a trend-free wander"}
        parts.append(f"{verdict[change['verdict']]} (p change {p_text(change['p_change'])}; residual lag-1 "
                     f"correlation {fmt(change['rho'], '+.2f')}, descriptive)")
    sentence = "; ".join(parts) + "."
    if change["verdict"] == "level shift":
        key = f"slope_per_{settings.slope_steps}_steps"
        sentence += (f" The step fits better than a line (BIC): best breakpoint after step "
                     f"{shift['last_step_before']:g}, {shift['level_before']:.2f} -> {shift['level_after']:.2f} "
                     f"(where it falls and the slopes either side, {fmt(shift['before'][key], '+.3f')} and "
                     f"{fmt(shift['after'][key], '+.3f')} pp per {settings.slope_steps} steps, are descriptive).")
    return sentence


def bfcl_prose(found: dict[str, Any], settings: AnalysisSettings) -> list[str]:
    declines = found["declines"]
    lines = _lead(found)
    lines += [_split_sentence(label, declines[key])
              for key, label in (("overall", "All"), ("live", "Within Live"), ("non_live", "Within Non-Live"))]
    lines.append(credit_prose(found["abstention_credit"]))
    lines.append(overrides_prose(found["abstention_credit"]))
    for name, end in found["endpoints"].items():
        lines.append(_endpoint_sentence(name, end, found["changes"][name], found["level_shift"][name], settings))
    return lines
