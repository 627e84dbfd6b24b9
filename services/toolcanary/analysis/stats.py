"""Trend statistics for one series of checkpoints, written out with numpy so every formula is visible.

- `ols_trend`: least-squares line of y on step; slope, classical t, and a Newey-West (HAC) t with a
  Bartlett kernel, the variance (X'X)^-1 S (X'X)^-1 optionally scaled by n / (n - 2).
- `lag1_autocorrelation`: sum(e_t e_{t-1}) / sum(e_t^2) of the OLS residuals.
- `level_shift`: the single breakpoint that best splits the series into two flat levels (least squares),
  with the slope on each side and a BIC comparison against the straight line, so that a step is not
  reported as a trend.

The test suite checks each number against statsmodels (OLS, cov_type="HAC").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Trend:
    slope: float
    """Change in y per one step."""
    intercept: float
    t: float
    """Classical OLS t of the slope (nan with fewer than three points or a constant series)."""
    t_hac: float
    """Newey-West t of the slope (nan with fewer than three points)."""
    residuals: np.ndarray


def _design(x: np.ndarray) -> np.ndarray:
    return np.column_stack([np.ones_like(x, dtype=float), np.asarray(x, dtype=float)])


def hac_covariance(design: np.ndarray, residuals: np.ndarray, lags: int, small_sample: bool) -> np.ndarray:
    """Newey-West covariance of OLS coefficients: Bartlett weights 1 - l / (lags + 1)."""
    scores = design * residuals[:, None]
    meat = scores.T @ scores
    for lag in range(1, lags + 1):
        weight = 1.0 - lag / (lags + 1.0)
        gamma = scores[lag:].T @ scores[:-lag]
        meat += weight * (gamma + gamma.T)
    bread = np.linalg.inv(design.T @ design)
    covariance = bread @ meat @ bread
    if small_sample:
        n, k = design.shape
        covariance *= n / (n - k)
    return covariance


def ols_trend(x: np.ndarray, y: np.ndarray, *, lags: int, small_sample: bool = True) -> Trend:
    """Fit y = a + b x by least squares; `lags` is the HAC truncation lag."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n = len(x)
    dx = x - x.mean()
    sxx = float(dx @ dx)
    slope = float(dx @ (y - y.mean())) / sxx
    intercept = float(y.mean() - slope * x.mean())
    residuals = y - (intercept + slope * x)
    if n < 3 or np.all(y == y[0]):  # no residual variance: a t would be 0/0, rounding noise at best
        return Trend(slope, intercept, math.nan, math.nan, residuals)
    sigma2 = float(residuals @ residuals) / (n - 2)
    se = math.sqrt(sigma2 / sxx)
    hac = hac_covariance(_design(x), residuals, min(lags, n - 1), small_sample)
    se_hac = math.sqrt(hac[1, 1])
    return Trend(slope, intercept, _ratio(slope, se), _ratio(slope, se_hac), residuals)


def _ratio(numerator: float, denominator: float) -> float:
    if denominator == 0.0:
        return math.nan if numerator == 0.0 else math.copysign(math.inf, numerator)
    return numerator / denominator


def lag1_autocorrelation(residuals: np.ndarray) -> float:
    """First-order autocorrelation of residuals that already have mean zero (an OLS fit with intercept)."""
    e = np.asarray(residuals, dtype=float)
    denominator = float(e @ e)
    return math.nan if denominator == 0.0 or len(e) < 3 else float(e[1:] @ e[:-1]) / denominator


def sample_sd(values: np.ndarray) -> float:
    return float(np.std(np.asarray(values, dtype=float), ddof=1))


@dataclass(frozen=True)
class LevelShift:
    last_before: float
    """Last step of the first segment; the shift happens after it."""
    first_after: float
    level_before: float
    level_after: float
    before: Trend
    after: Trend
    rss_shift: float
    rss_line: float
    bic_shift: float
    bic_line: float

    @property
    def shift(self) -> float:
        return self.level_after - self.level_before

    @property
    def prefers_shift(self) -> bool:
        return self.bic_shift < self.bic_line


def _bic(rss: float, n: int, parameters: int) -> float:
    return n * math.log(max(rss / n, 1e-300)) + parameters * math.log(n)


def level_shift(x: np.ndarray, y: np.ndarray, *, lags_for: Callable[[int], int], min_segment: int = 3,
                small_sample: bool = True) -> LevelShift | None:
    """Best single breakpoint for a two-level step function, or None with fewer than 2 * min_segment points.

    BIC counts the line as 2 parameters and the step as 3 (two levels and where the break falls).
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n = len(x)
    if n < 2 * min_segment:
        return None
    best_k, best_rss = -1, math.inf
    for k in range(min_segment, n - min_segment + 1):
        left, right = y[:k], y[k:]
        rss = float(((left - left.mean()) ** 2).sum() + ((right - right.mean()) ** 2).sum())
        if rss < best_rss:
            best_k, best_rss = k, rss
    def fit(xs: np.ndarray, ys: np.ndarray) -> Trend:
        return ols_trend(xs, ys, lags=lags_for(len(xs)), small_sample=small_sample)

    line = fit(x, y)
    rss_line = float(line.residuals @ line.residuals)
    return LevelShift(
        last_before=float(x[best_k - 1]), first_after=float(x[best_k]),
        level_before=float(y[:best_k].mean()), level_after=float(y[best_k:].mean()),
        before=fit(x[:best_k], y[:best_k]), after=fit(x[best_k:], y[best_k:]),
        rss_shift=best_rss, rss_line=rss_line,
        bic_shift=_bic(best_rss, n, 3), bic_line=_bic(rss_line, n, 2),
    )
