"""The tests behind every verdict the findings print about one run's series of checkpoints.

A run is one training trajectory scored at about 21 checkpoints. Its per-checkpoint values wander: one
checkpoint's policy is the next one's starting point, so residuals around any line are correlated (the
reference run reports a lag-1 correlation of +0.54), and 21 points cannot tell a stationary wander with a high
correlation, or a random walk, from a trend. The classical and Newey-West t statistics assume far less
correlation than that, so |t| >= 2 fires on many trend-free series (LOG.md has the rates). The lag-1 estimate
cannot fix it: at 21 points it is biased low and varies widely.

So each verdict here comes from a test whose false-positive rate is bounded over the whole family of
trend-free wanders a run can show, not at one estimated correlation:

- **A change** (`change_test`): whether the series trends or shifts at all. Two scale-free statistics, the
  OLS t of the slope (a line) and the sup-F of the best single break against a constant (a step, which a
  line's t misses: the step's own misfit inflates the line's residuals). Each one's null distribution is
  simulated at the run's own checkpoint steps for a stationary AR(1) wander at each correlation of
  `NULL_RHOS` (per median gap between checkpoints, so irregular spacing is honoured) and for a random walk;
  its p-value is the largest of their Monte Carlo p-values (a least-favourable null), valid whatever the
  correlation in that range. The change's p is the smaller of the two times two (Bonferroni). The price is
  power, since the random walk sets the bar (docs/analysis.md, "Verdicts").
- **Beyond the repeat noise** (`repeat_noise_test`). Whether the first and the last checkpoint score
  differently on this bank beyond what re-scoring one checkpoint gives: a two-sample t on the two steps'
  pass means, with the repeat variance pooled over every repeated step (so 3 passes at 3 steps give 6 degrees
  of freedom, not 2) and Student's t with those degrees of freedom. It says the two checkpoints differ, not
  that training trends: a random walk's endpoints differ too.
- **Derived verdicts** are claimed only when the change test holds, so their false-positive rate is at most
  its level: "a trend" or "a level shift" (its shape: the line or the step, whichever BIC prefers, and the
  step's window, are descriptive), and a difference between abstention and tool calling in sign or in rate
  (both series change).

`tests/analysis/test_verdicts.py` measures each verdict's false-positive rate by simulation on series shaped
like ToolCanary's run (21 checkpoints, 3/1/3 passes, correlations 0 to 0.95 and a random walk) and its
detection rate on a planted change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats as scipy_stats

from toolcanary.analysis.data import StepSeries

NULL_RHOS: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
"""Lag-1 correlations of the trend-free wanders the trend test guards against, per median gap between
checkpoints; 1.0 is the random walk."""
NULL_FAMILY = "stationary AR(1) wanders with lag-1 correlation 0 to 0.95, and a random walk"


def _wanders(steps: np.ndarray, rho: float, replicates: int, rng: np.random.Generator) -> np.ndarray:
    """(replicates, checkpoints) trend-free series at `steps`: AR(1) with correlation rho per median gap, or a
    random walk whose variance grows with the gap when rho is 1."""
    gaps = np.diff(steps) / np.median(np.diff(steps))
    series = np.empty((replicates, len(steps)))
    series[:, 0] = 0.0 if rho >= 1.0 else rng.standard_normal(replicates)
    for i, gap in enumerate(gaps, start=1):
        shock = rng.standard_normal(replicates)
        if rho >= 1.0:
            series[:, i] = series[:, i - 1] + math.sqrt(gap) * shock
        else:
            phi = rho**gap
            series[:, i] = phi * series[:, i - 1] + math.sqrt(1.0 - phi * phi) * shock
    return series


def _abs_t(steps: np.ndarray, series: np.ndarray) -> np.ndarray:
    """|classical OLS t| of the slope of each row of `series` on `steps`, vectorised."""
    dx = steps - steps.mean()
    sxx = float(dx @ dx)
    slope = (series - series.mean(axis=1, keepdims=True)) @ dx / sxx
    residuals = series - series.mean(axis=1, keepdims=True) - np.outer(slope, dx)
    sigma2 = (residuals * residuals).sum(axis=1) / (len(steps) - 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.abs(slope) / np.sqrt(sigma2 / sxx)


def sup_f(series: np.ndarray, min_segment: int) -> np.ndarray:
    """Per row, the F statistic of the best two-level step against one constant level: (RSS of the constant −
    RSS of the best step) / (RSS of the best step / (n − 2)), over every break that leaves `min_segment` points
    a side (the break that `toolcanary.analysis.stats.level_shift` reports)."""
    n = series.shape[1]
    s1, s2 = np.cumsum(series, axis=1), np.cumsum(series * series, axis=1)
    t1, t2 = s1[:, -1:], s2[:, -1:]
    k = np.arange(min_segment, n - min_segment + 1)
    left = s2[:, k - 1] - s1[:, k - 1] ** 2 / k
    right = (t2 - s2[:, k - 1]) - (t1 - s1[:, k - 1]) ** 2 / (n - k)
    best = np.maximum((left + right).min(axis=1), 0.0)
    constant = (t2 - t1 * t1 / n)[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        return (constant - best) / (best / (n - 2))


@lru_cache(maxsize=64)
def null_statistics(steps: tuple[float, ...], min_segment: int, replicates: int, seed: int,
                    ) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """Per correlation of `NULL_RHOS`, the sorted |t| and the sorted sup-F of `replicates` trend-free series at
    `steps` (sup-F empty when the series is too short for a break).

    The draw order, so that a separately written reference reproduces every series:

        rng = numpy.random.default_rng(seed)
        for rho in NULL_RHOS:
            first = zeros(replicates) if rho == 1 else rng.standard_normal(replicates)
            for each gap g between consecutive steps, in step order, in units of the median gap:
                shock = rng.standard_normal(replicates)
                y_next = y + sqrt(g) shock                                  (rho == 1: the random walk)
                y_next = rho^g y + sqrt(1 − rho^(2g)) shock                  (otherwise: stationary, variance 1)
    """
    x = np.asarray(steps, dtype=float)
    rng = np.random.default_rng(seed)
    out = []
    for rho in NULL_RHOS:
        series = _wanders(x, rho, replicates, rng)
        shifts = sup_f(series, min_segment) if len(x) >= 2 * min_segment else np.array([])
        out.append((np.sort(_abs_t(x, series)), np.sort(shifts)))
    return tuple(out)


def _least_favourable(nulls: list[np.ndarray], observed: float) -> tuple[float, float]:
    """(largest Monte Carlo p over the family, the correlation that gives it); p = (1 + #{null >= observed}) /
    (1 + replicates)."""
    p_values = [(1 + len(null) - int(np.searchsorted(null, observed, side="left"))) / (1 + len(null))
                for null in nulls]
    worst = int(np.argmax(p_values))
    return p_values[worst], NULL_RHOS[worst]


@dataclass(frozen=True)
class ChangeTest:
    """Whether a series of checkpoints changes beyond every trend-free wander of the family."""

    t: float
    """Classical OLS t of the slope (nan: fewer than three checkpoints, or a constant series)."""
    p_trend: float
    """Least-favourable p of |t| (nan where t is)."""
    f_shift: float
    """sup-F of the best single break against a constant (nan: too few checkpoints for a break)."""
    p_shift: float
    """Least-favourable p of the sup-F (nan where it is)."""
    worst_rho: float
    """The correlation of the family that gives `p_trend` (1.0: the random walk)."""

    @property
    def p(self) -> float:
        """p of "the series changes": the smaller of the two p-values times the number of tests made
        (Bonferroni), at most 1; nan when neither test could be made."""
        made = [p for p in (self.p_trend, self.p_shift) if not math.isnan(p)]
        return min(1.0, len(made) * min(made)) if made else math.nan

    def holds(self, level: float) -> bool:
        return not math.isnan(self.p) and self.p <= level


NOT_TESTED = ChangeTest(math.nan, math.nan, math.nan, math.nan, math.nan)


def change_test(steps: np.ndarray, values: np.ndarray, t: float, min_segment: int, replicates: int,
                seed: int) -> ChangeTest:
    """Test a series (its slope's t already computed) against every trend-free wander of the family, at its own
    checkpoint steps: the trend by |t|, a level shift by the sup-F of the best break."""
    steps, values = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    if len(steps) < 3 or math.isnan(t):
        return NOT_TESTED
    nulls = null_statistics(tuple(float(s) for s in steps), min_segment, replicates, seed)
    p_trend, worst = _least_favourable([null_t for null_t, _ in nulls], abs(t))
    f_shift = p_shift = math.nan
    if len(steps) >= 2 * min_segment:
        f_shift = float(sup_f(values[None, :], min_segment)[0])
        p_shift, _ = _least_favourable([null_f for _, null_f in nulls], f_shift)
    return ChangeTest(t, p_trend, f_shift, p_shift, worst)


@dataclass(frozen=True)
class RepeatNoiseTest:
    delta: float
    pooled_sd: float
    """Repeat s.d. pooled over every step scored more than once."""
    df: int
    t: float
    p: float

    def holds(self, level: float) -> bool:
        return self.p <= level


def repeat_noise_test(series: StepSeries) -> RepeatNoiseTest | None:
    """First against last checkpoint, against the repeat noise pooled over the repeated steps; None when no
    step was scored more than once."""
    repeated = [p for p in series.passes if len(p) >= 2]
    if not repeated:
        return None
    df = sum(len(p) - 1 for p in repeated)
    pooled_sd = math.sqrt(sum(float(((p - p.mean()) ** 2).sum()) for p in repeated) / df)
    delta = series.last - series.first
    se = pooled_sd * math.sqrt(1 / len(series.passes[0]) + 1 / len(series.passes[-1]))
    if se == 0.0:  # passes that never differ: any difference is beyond them, none is not
        t = math.copysign(math.inf, delta) if delta else 0.0
    else:
        t = delta / se
    p = float(2 * scipy_stats.t.sf(abs(t), df))
    return RepeatNoiseTest(delta, pooled_sd, df, t, p)


def p_text(p: float | None) -> str:
    """A p-value as the prose and the table print it; a missing one (None, nan) reads "n/a"."""
    if p is None or math.isnan(p):
        return "n/a"
    return f"{p:.2g}" if p >= 0.001 else "<0.001"
