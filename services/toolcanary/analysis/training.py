"""The training side of the findings, from `train_metrics.csv`: what the simulated environment reports.

- tool-call share (tool-calling assistant turns / all assistant turns): whole-run trend, and its level
  before and after its own best breakpoint;
- the step at which the curriculum first reaches its ceiling, and how long it stays there;
- reward over steps.

A run with a single training step (the SmolLM2 quick demo trains one) reports that step's values; each trend
it cannot give carries `not_measurable` with the reason instead of numbers, and the prose says so.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from toolcanary.analysis.data import TrainRun, finite_or_none, fmt
from toolcanary.analysis.settings import AnalysisSettings
from toolcanary.analysis.stats import LevelShift, Trend, level_shift, ols_trend
from toolcanary.analysis.verdicts import change_test, p_text


def trend_json(trend: Trend, settings: AnalysisSettings) -> dict[str, float | None]:
    return {
        f"slope_per_{settings.slope_steps}_steps": finite_or_none(trend.slope * settings.slope_steps),
        "t": finite_or_none(trend.t), "t_hac": finite_or_none(trend.t_hac),
    }


def series_trend_json(steps: np.ndarray, values: np.ndarray, settings: AnalysisSettings) -> dict[str, Any]:
    """The trend of one training series, or, from a single step, nulls and the reason (`not_measurable`)."""
    if len(steps) < 2:
        return {f"slope_per_{settings.slope_steps}_steps": None, "t": None, "t_hac": None, "p_change": None,
                "changes": False, "not_measurable": f"{len(steps)} step with a value: a trend needs two or more"}
    trend = ols_trend(steps, values, lags=settings.lags_for(len(steps)), small_sample=settings.hac_small_sample)
    test = change_test(steps, values, trend.t, settings.min_segment, settings.null_replicates, settings.null_seed)
    return {**trend_json(trend, settings), "p_change": finite_or_none(test.p),
            "changes": test.holds(settings.verdict_level), "not_measurable": None}


def shift_json(shift: LevelShift | None, settings: AnalysisSettings) -> dict[str, Any] | None:
    if shift is None:
        return None
    return {
        "last_step_before": int(shift.last_before), "first_step_after": int(shift.first_after),
        "level_before": shift.level_before, "level_after": shift.level_after, "shift": shift.shift,
        "before": trend_json(shift.before, settings), "after": trend_json(shift.after, settings),
        "rss_shift": shift.rss_shift, "rss_line": shift.rss_line,
        "bic_shift": finite_or_none(shift.bic_shift), "bic_line": finite_or_none(shift.bic_line),
        "prefers_shift": shift.prefers_shift,
    }


def curriculum_ceiling(steps: np.ndarray, levels: np.ndarray, ceiling: float) -> dict[str, Any]:
    """First step at the ceiling, the last step of the unbroken stretch that follows, and its length."""
    at = levels >= ceiling
    result: dict[str, Any] = {"ceiling": ceiling, "max_level": float(levels.max()),
                              "steps_at_ceiling": int(at.sum())}
    if not at.any():
        return {**result, "first_step": None, "held_until": None, "held_steps": None, "holds_to_end": False}
    first = int(np.argmax(at))
    end = first
    while end + 1 < len(at) and at[end + 1]:
        end += 1
    return {
        **result, "first_step": int(steps[first]), "held_until": int(steps[end]),
        "held_steps": int(steps[end] - steps[first]), "holds_to_end": end == len(at) - 1,
    }


SHIFT_NULL = ("the policy does not change over the run, so its steps' values are exchangeable (each step a fresh "
              "draw of episodes from the same policy)")


def first_last_shift(values: np.ndarray, steps: int, level: float) -> dict[str, Any]:
    """Whether a training series moved beyond its step-to-step noise: the mean of its last `steps` values minus
    that of its first `steps`, and the exact two-sided permutation p-value of that difference over every way of
    dealing those 2 x `steps` values into two groups (C(2k, k) of them; 252 at k = 5). Under SHIFT_NULL every
    dealing is equally likely, so `moved` (p <= level) is claimed with a false-positive rate of at most `level`;
    the smallest p it can give is 2 / C(2k, k), and a series shorter than 2 x `steps` is measured with k = half
    its length."""
    k = min(steps, len(values) // 2)
    if k < 2:
        return {"steps": k, "not_measurable": f"{len(values)} step(s): two or more at each end are needed"}
    pooled = np.concatenate([values[:k], values[-k:]])
    observed = float(values[-k:].mean() - values[:k].mean())
    dealt = [float(pooled[[i for i in range(2 * k) if i not in first]].mean() - pooled[list(first)].mean())
             for first in itertools.combinations(range(2 * k), k)]
    p = sum(abs(d) >= abs(observed) - 1e-12 for d in dealt) / len(dealt)
    return {"steps": k, "first": float(values[:k].mean()), "last": float(values[-k:].mean()), "shift": observed,
            "p": p, "moved": p <= level, "not_measurable": None}


def canary_findings(run: TrainRun) -> dict[str, Any]:
    """What the trainer's tool-call canary recorded (`toolcanary.train.canary`): the steps at which the share had
    moved beyond its threshold from the run's first steps, and the shift at the last measured step."""
    shift_steps, shifts = run.series("tool_call_share_shift")
    fired_steps, fired = run.series("tool_call_canary")
    if not len(shift_steps):
        return {"measured": False, "fired_steps": [], "last_shift": None, "largest_shift": None}
    largest = float(shifts[np.argmax(np.abs(shifts))])
    return {"measured": True, "fired_steps": [int(s) for s in fired_steps[fired > 0]],
            "last_step": int(shift_steps[-1]), "last_shift": float(shifts[-1]), "largest_shift": largest}


def canary_prose(found: dict[str, Any]) -> str:
    if not found["measured"]:
        return ("  Tool-call canary: not recorded (a train_metrics.csv from before contract 1.10, or a run too short "
                "to measure it).")
    fired = found["fired_steps"]
    if not fired:
        return (f"  Tool-call canary: never beyond its threshold (largest shift {found['largest_shift']:+.3f} from the "
                "run's first steps).")
    return (f"  Tool-call canary: the share moved beyond its threshold at {len(fired)} step(s), first at step "
            f"{fired[0]}; shift {found['last_shift']:+.3f} at step {found['last_step']} (the trainer's log warned).")


def training_findings(run: TrainRun, settings: AnalysisSettings) -> dict[str, Any]:
    share_steps, share = run.series("tool_call_share")
    reward_steps, reward = run.series("reward_mean")
    level_steps, levels = run.series("curriculum_level")
    shift = level_shift(share_steps, share, lags_for=settings.lags_for, min_segment=settings.min_segment,
                        small_sample=settings.hac_small_sample)
    _, spread = run.series("reward_std")
    return {
        "file": str(run.path),
        "steps": [int(run.steps[0]), int(run.steps[-1])], "step_count": len(run.steps),
        "tool_call_share": {
            "first": float(share[0]), "last": float(share[-1]),
            "trend": series_trend_json(share_steps, share, settings),
            "level_shift": shift_json(shift, settings),
        },
        "canary": canary_findings(run),
        "curriculum": curriculum_ceiling(level_steps, levels, settings.curriculum_ceiling),
        "reward": {
            "first": float(reward[0]), "last": float(reward[-1]),
            "min": float(reward.min()), "max": float(reward.max()),
            "within_step_sd_mean": float(spread.mean()) if len(spread) else None,
            "trend": series_trend_json(reward_steps, reward, settings),
        },
    }


def single_step_prose(found: dict[str, Any]) -> list[str]:
    share, curriculum, reward = found["tool_call_share"], found["curriculum"], found["reward"]
    spread = reward["within_step_sd_mean"]
    return [
        f"Training: one step (step {found['steps'][0]}): tool-calling share of assistant turns {share['last']:.3f}, "
        f"mean reward {reward['last']:+.3f}" + (f" (within-step s.d. {spread:.3f})" if spread is not None else "")
        + f", curriculum level {curriculum['max_level']:g}.",
        "  Not measurable from one step: the trends of the tool-call share and the reward, and the share's "
        "breakpoint (two or more training steps needed).",
    ]


def training_prose(found: dict[str, Any], settings: AnalysisSettings) -> list[str]:
    if found["step_count"] < 2:
        return single_step_prose(found)
    share, curriculum, reward = found["tool_call_share"], found["curriculum"], found["reward"]
    key = f"slope_per_{settings.slope_steps}_steps"
    lines = [
        f"Training: the share of assistant turns that call a tool goes from {share['first']:.3f} to "
        f"{share['last']:.3f} (whole-run slope {fmt(share['trend'][key], '+.4f')} per {settings.slope_steps} steps; "
        f"{_trend_words(share['trend'])})."
    ]
    shift = share["level_shift"]
    if shift is not None and share["trend"]["changes"]:
        verdict = "a step fits better than the line" if shift["prefers_shift"] else "the line fits better"
        lines.append(
            f"  Its best breakpoint falls after step {shift['last_step_before']:g}: level {shift['level_before']:.3f} "
            f"before, {shift['level_after']:.3f} after, slopes {shift['before'][key]:+.4f} and "
            f"{shift['after'][key]:+.4f} per {settings.slope_steps} steps; {verdict} (BIC, descriptive)."
        )
    lines.append(canary_prose(found["canary"]))
    if curriculum["first_step"] is None:
        lines.append(f"  The curriculum never reaches its ceiling of {curriculum['ceiling']:g} "
                     f"(highest level {curriculum['max_level']:g}).")
    else:
        tail = "to the end of the run" if curriculum["holds_to_end"] else f"until step {curriculum['held_until']:g}"
        lines.append(f"  The curriculum reaches its ceiling of {curriculum['ceiling']:g} at step "
                     f"{curriculum['first_step']:g} and holds it for {curriculum['held_steps']:g} steps, {tail}.")
    lines.append(f"  Mean reward goes from {reward['first']:+.3f} to {reward['last']:+.3f} "
                 f"(slope {fmt(reward['trend'][key], '+.4f')} per {settings.slope_steps} steps; "
                 f"{_trend_words(reward['trend'])}).")
    return lines


def _trend_words(trend: dict[str, Any]) -> str:
    """The calibrated verdict on a training series' change, with its descriptive t statistics."""
    verdict = "a change" if trend["changes"] else "no change beyond a trend-free wander"
    return (f"{verdict}, p change {p_text(trend['p_change'])}; t = "
            f"{fmt(trend['t'], '+.2f')}, HAC t = {fmt(trend['t_hac'], '+.2f')}, descriptive")
