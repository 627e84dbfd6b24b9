"""Paired comparison of two checkpoints item by item: which items step B gained and lost against step A, and
whether that is more than chance.

    .venvs/analysis/bin/make_figures --data volumes/results/RUN --items                  # baseline vs last step
    .venvs/analysis/bin/make_figures --data volumes/results/RUN --items --steps 0 150 --findings

The item outcomes come from the pass folders, read and checked against the CSV by `toolcanary.analysis.passes`.
An item is paired when it is counted in every pass of both steps; the others are left out and counted.

- **Fold rule.** An item's outcome at a step, over that step's passes, is "correct" when it is correct in more
  than half of them; a tie (1 of 2, 2 of 4) counts as not correct (`fold`).
- **Counts.** Per category and per aggregate (its categories' items pooled): gained (wrong at A, correct at
  B), lost (correct at A, wrong at B), unchanged correct, unchanged wrong, on the folded outcomes.
- **McNemar's exact test**, two-sided, on the discordant items: p = min(1, 2 P(X <= min(lost, gained))) with
  X ~ Binomial(lost + gained, 1/2); p = 1 without discordant items (`mcnemar_exact`).
- **Change** (`delta_pp`): the aggregate at B minus at A, in percentage points, computed by the contract's
  `aggregate_value` (`accuracy` for a category) from (sum over items of the share of passes correct, items)
  per category: the pass-mean value of the table, restricted to the paired items.
- **Paired bootstrap interval** of that change: items resampled with replacement within each category, each
  drawn item's outcome at each step taken from one of that step's passes drawn uniformly, so the interval
  carries repeat noise as well as item sampling; the draw order is in `bootstrap_differences`.

`changed_items_csv` lists every gained and lost item; `make_figures` writes it to
`tables/items_step{A}_step{B}.csv`.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from toolcanary.analysis.passes import RunItems, StepItems, kinds_seen
from toolcanary.analysis.settings import AnalysisSettings
from toolcanary.contract.bfcl import AGGREGATES, CATEGORIES, accuracy, aggregate_value
from toolcanary.contract.errors import UsageError

FOLD_RULE = ("an item is correct at a step when it is correct in more than half of that step's passes; a tie "
             "counts as not correct")
CHANGED_ITEMS_COLUMNS = ("category", "id", "change", "share_correct_a", "share_correct_b", "answers_a", "answers_b")
GAINED, LOST = "gained", "lost"


def changed_items_file(step_a: int, step_b: int) -> str:
    return f"tables/items_step{step_a}_step{step_b}.csv"


def fold(correct: np.ndarray) -> np.ndarray:
    """Per item (row), correct in more than half of the passes (columns); a tie is not correct."""
    return 2 * correct.sum(axis=1) > correct.shape[1]


def mcnemar_exact(lost: int, gained: int) -> float:
    """Two-sided exact McNemar p: min(1, 2 P(X <= min(lost, gained))), X ~ Binomial(lost + gained, 1/2)."""
    n = lost + gained
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(lost, gained) + 1))
    # Whole numbers until the one division, which Python rounds correctly however large n is.
    return min(1.0, 2 * tail / 2**n)


@dataclass(frozen=True)
class PairedCategory:
    """The paired items of one category: outcomes per item (row, ascending id) and pass (column, ascending)."""

    category: str
    ids: tuple[str, ...]
    a: np.ndarray
    """bool (items, passes at A): correct in that pass."""
    b: np.ndarray
    answers_a: tuple[tuple[str | None, ...], ...]
    """Per item, the answer kind in each pass at A."""
    answers_b: tuple[tuple[str | None, ...], ...]
    left_out: int
    """Items of the category at A or B not counted in every pass of both steps."""

    @property
    def size(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class Tally:
    gained: int
    lost: int
    unchanged_correct: int
    unchanged_wrong: int

    @property
    def items(self) -> int:
        return self.gained + self.lost + self.unchanged_correct + self.unchanged_wrong

    @property
    def net(self) -> int:
        return self.gained - self.lost

    def __add__(self, other: Tally) -> Tally:
        return Tally(self.gained + other.gained, self.lost + other.lost,
                     self.unchanged_correct + other.unchanged_correct, self.unchanged_wrong + other.unchanged_wrong)


def tally(paired: PairedCategory) -> Tally:
    at_a, at_b = fold(paired.a), fold(paired.b)
    return Tally(gained=int((~at_a & at_b).sum()), lost=int((at_a & ~at_b).sum()),
                 unchanged_correct=int((at_a & at_b).sum()), unchanged_wrong=int((~at_a & ~at_b).sum()))


def _matrix(step: StepItems, category: str, ids: list[str]) -> tuple[np.ndarray, tuple[tuple[str | None, ...], ...]]:
    correct = np.array([[p.correct((category, i)) for p in step.passes] for i in ids], dtype=bool)
    answers = tuple(tuple(p.outcomes[(category, i)].answer for p in step.passes) for i in ids)
    return correct.reshape(len(ids), len(step.passes)), answers


def pair_steps(items: RunItems, step_a: int, step_b: int) -> list[PairedCategory]:
    """The paired items of every category scored at both steps, in the contract's category order."""
    at_a, at_b = items.step(step_a), items.step(step_b)
    paired = []
    for category in (c.name for c in CATEGORIES if c.name in at_a.categories & at_b.categories):
        ids_a, ids_b = at_a.items(category), at_b.items(category)
        ids = sorted(set(ids_a) & set(ids_b))
        everywhere = {i for p in (*at_a.passes, *at_b.passes) for c, i in p.outcomes if c == category}
        a, answers_a = _matrix(at_a, category, ids)
        b, answers_b = _matrix(at_b, category, ids)
        paired.append(PairedCategory(category, tuple(ids), a, b, answers_a, answers_b, len(everywhere) - len(ids)))
    return paired


def _share_counts(paired: list[PairedCategory], side: str) -> dict[str, tuple[float, int]]:
    """(sum over items of the share of passes correct, items) per category with paired items."""
    return {p.category: (float(getattr(p, side).mean(axis=1).sum()), p.size) for p in paired if p.size}


def _measurable(paired: list[PairedCategory]) -> dict[str, str | None]:
    """Aggregate -> None when every category it needs has paired items, else why not."""
    sizes = {p.category: p.size for p in paired}
    reasons = {}
    for aggregate in AGGREGATES:
        empty = [c for c in aggregate.categories if not sizes.get(c)]
        reasons[aggregate.name] = f"no paired item in {empty}" if empty else None
    return reasons


def bootstrap_differences(paired: list[PairedCategory], replicates: int, seed: int) -> dict[str, np.ndarray]:
    """Bootstrap replicates of the change B − A in pp, per category and per measurable aggregate.

    The draw order, exactly, so that a separately written reference reproduces every replicate:

        rng = numpy.random.default_rng(seed)
        for r in range(replicates):
            for each category with at least one paired item, in the order of
                    toolcanary.contract.bfcl.CATEGORIES:
                n = its paired items, rows in ascending id order (Python string order)
                k_a, k_b = its passes at A and at B, columns in ascending pass index
                rows = rng.integers(0, n, size=n)       # the items drawn, with replacement
                at_a = rng.integers(0, k_a, size=n)     # for the i-th drawn item, the pass it is read from at A
                at_b = rng.integers(0, k_b, size=n)     # ... and at B (both calls are made even when k = 1)
                counts_A[category] = (sum_i A[rows[i], at_a[i]], n)
                counts_B[category] = (sum_i B[rows[i], at_b[i]], n)
            difference[category][r] = accuracy(counts_B, category) − accuracy(counts_A, category)
            difference[aggregate][r] = aggregate_value(aggregate, counts_B) − aggregate_value(aggregate, counts_A)

    A[i, j] is True when item i was correct in the j-th pass at A. Categories without a paired item draw
    nothing; an aggregate that needs one is left out.
    """
    drawn = [p for p in paired if p.size]
    aggregates = [name for name, reason in _measurable(paired).items() if reason is None]
    differences = {name: np.empty(replicates) for name in [*(p.category for p in drawn), *aggregates]}
    rng = np.random.default_rng(seed)
    for r in range(replicates):
        counts_a: dict[str, tuple[int, int]] = {}
        counts_b: dict[str, tuple[int, int]] = {}
        for p in drawn:
            rows = rng.integers(0, p.size, size=p.size)
            at_a = rng.integers(0, p.a.shape[1], size=p.size)
            at_b = rng.integers(0, p.b.shape[1], size=p.size)
            counts_a[p.category] = (int(p.a[rows, at_a].sum()), p.size)
            counts_b[p.category] = (int(p.b[rows, at_b].sum()), p.size)
        for p in drawn:
            differences[p.category][r] = accuracy(counts_b, p.category) - accuracy(counts_a, p.category)
        for name in aggregates:
            differences[name][r] = aggregate_value(name, counts_b) - aggregate_value(name, counts_a)
    return differences


def percentile_interval(replicates: np.ndarray, level: float) -> tuple[float, float]:
    """The central `level` interval of the replicates: numpy.quantile at (1 − level)/2 and (1 + level)/2, numpy's
    default ("linear") method."""
    low, high = np.quantile(replicates, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def _entry(counted: Tally, delta: float, replicates: np.ndarray, level: float) -> dict[str, Any]:
    return {
        "items": counted.items, "gained": counted.gained, "lost": counted.lost,
        "unchanged_correct": counted.unchanged_correct, "unchanged_wrong": counted.unchanged_wrong,
        "net": counted.net, "mcnemar_p": mcnemar_exact(counted.lost, counted.gained), "delta_pp": delta,
        "interval_pp": list(percentile_interval(replicates, level)), "not_measurable": None,
    }


def default_steps(items: RunItems) -> tuple[int, int]:
    """The baseline (the first step scored from `--baseline-step` on) and the last scored step."""
    scored = items.scored_steps()
    return scored[0], scored[-1]


def check_steps(items: RunItems, steps: tuple[int, int]) -> tuple[int, int]:
    step_a, step_b = steps
    if step_a == step_b:
        raise UsageError("--steps", "two different scored steps, A then B", f"{step_a} twice",
                         f"Name two of the scored steps ({', '.join(map(str, items.scored_steps()[:12]))})")
    for step in steps:
        items.pass_indices(step)  # refuses a step that was not scored, naming the scored ones
    return step_a, step_b


def paired_findings(items: RunItems, steps: tuple[int, int], settings: AnalysisSettings,
                    ) -> tuple[dict[str, Any], list[PairedCategory]]:
    """The findings of the paired comparison of two scored steps, and the paired items behind them."""
    step_a, step_b = check_steps(items, steps)
    paired = pair_steps(items, step_a, step_b)
    replicates = bootstrap_differences(paired, settings.bootstrap_replicates, settings.bootstrap_seed)
    shares_a, shares_b = _share_counts(paired, "a"), _share_counts(paired, "b")
    tallies = {p.category: tally(p) for p in paired}
    categories = {}
    for p in paired:
        if not p.size:
            categories[p.category] = {"items": 0, "not_measurable": "no paired item"}
            continue
        delta = accuracy(shares_b, p.category) - accuracy(shares_a, p.category)
        categories[p.category] = _entry(tallies[p.category], delta, replicates[p.category], settings.interval_level)
    aggregates = {}
    for aggregate in AGGREGATES:
        reason = _measurable(paired)[aggregate.name]
        if reason is not None:
            aggregates[aggregate.name] = {"not_measurable": reason}
            continue
        counted = sum((tallies[c] for c in aggregate.categories), Tally(0, 0, 0, 0))
        delta = aggregate_value(aggregate.name, shares_b) - aggregate_value(aggregate.name, shares_a)
        aggregates[aggregate.name] = _entry(counted, delta, replicates[aggregate.name], settings.interval_level)
    found = {
        "steps": [step_a, step_b],
        "passes": {"a": list(items.pass_indices(step_a)), "b": list(items.pass_indices(step_b))},
        "fold_rule": FOLD_RULE,
        "bootstrap": {"replicates": settings.bootstrap_replicates, "seed": settings.bootstrap_seed,
                      "level": settings.interval_level, "interval": "percentile"},
        "left_out": {p.category: p.left_out for p in paired if p.left_out},
        "changed_items_file": changed_items_file(step_a, step_b),
        "aggregates": aggregates,
        "categories": categories,
    }
    return found, paired


def changed_items_csv(paired: list[PairedCategory]) -> str:
    """Every lost and gained item: category (contract order), change (lost first), id (ascending)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CHANGED_ITEMS_COLUMNS)
    for p in paired:
        at_a, at_b = fold(p.a), fold(p.b)
        for change, chosen in ((LOST, at_a & ~at_b), (GAINED, ~at_a & at_b)):
            for i in np.flatnonzero(chosen):
                writer.writerow([p.category, p.ids[i], change, repr(float(p.a[i].mean())),
                                 repr(float(p.b[i].mean())), kinds_seen(p.answers_a[i]), kinds_seen(p.answers_b[i])])
    return buffer.getvalue()


def _p(value: float) -> str:
    return f"{value:.2g}"


def _clause(name: str, entry: Mapping[str, Any], level: float) -> str:
    if entry.get("not_measurable"):
        return f"{name} not measurable ({entry['not_measurable']})"
    low, high = entry["interval_pp"]
    return (f"{name} lost {entry['lost']} and gained {entry['gained']} items (net {entry['net']:+d}, McNemar "
            f"p={_p(entry['mcnemar_p'])}, {100 * level:g}% bootstrap interval of the change "
            f"[{low:+.2f}, {high:+.2f}] pp)")


def items_prose(found: dict[str, Any]) -> list[str]:
    """The finding in one sentence, and how the outcomes were folded and what was left out."""
    step_a, step_b = found["steps"]
    level = found["bootstrap"]["level"]
    lines = [f"Paired by item, step {step_a} to {step_b}: "
             + "; ".join(_clause(name, entry, level) for name, entry in found["aggregates"].items()) + "."]
    passes_a, passes_b = (len(found["passes"][side]) for side in ("a", "b"))
    note = []
    if max(passes_a, passes_b) > 1:
        note.append(f"With {passes_a} and {passes_b} passes, {FOLD_RULE}; the interval resamples items and "
                    "passes")
    if found["left_out"]:
        left = ", ".join(f"{n} of {c}" for c, n in found["left_out"].items())
        note.append(f"left out (not counted in every pass of both steps): {left}")
    if note:
        lines.append("  " + "; ".join(note) + ".")
    return lines


def items_details(found: dict[str, Any]) -> list[str]:
    """One line per category, for the printed text."""
    level = found["bootstrap"]["level"]
    lines = []
    for name, entry in found["categories"].items():
        if entry.get("not_measurable"):
            lines.append(f"  {name}: not measurable ({entry['not_measurable']})")
            continue
        low, high = entry["interval_pp"]
        lines.append(f"  {name} ({entry['items']} items): lost {entry['lost']}, gained {entry['gained']}, unchanged "
                     f"{entry['unchanged_correct']} correct and {entry['unchanged_wrong']} wrong; McNemar "
                     f"p={_p(entry['mcnemar_p'])}; change {entry['delta_pp']:+.2f} pp, {100 * level:g}% interval "
                     f"[{low:+.2f}, {high:+.2f}]")
    return lines

