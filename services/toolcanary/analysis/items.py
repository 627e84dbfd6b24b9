"""Paired comparison of two checkpoints item by item: how far each aggregate changed from step A to step B on
the same items, whether that is more than the passes' own noise, and which items moved.

    .venvs/analysis/bin/make_figures --data volumes/results/RUN --items                  # baseline vs last step
    .venvs/analysis/bin/make_figures --data volumes/results/RUN --items --steps 0 150 --findings

The item outcomes come from the pass folders, read and checked against the CSV by `toolcanary.analysis.passes`.
An item is paired when it is counted in every pass of both steps; the others are left out and counted.

- **Share.** Each item, at each step, is scored by its share of that step's passes in which it was correct;
  nothing is folded to correct or wrong, so steps with different pass counts are measured alike.
- **Change** (`delta_pp`): the aggregate at B minus at A, in percentage points, computed by the contract's
  `aggregate_value` (`accuracy` for a category) from (sum over items of the share, items) per category: the
  pass-mean value of the table restricted to the paired items, so Non-Live and Multi-Turn are means of
  category means here as there.
- **Permutation test** (`permutation_changes`, `permutation_p`): the p-value of the finding. Null: at each
  item, the two checkpoints have the same chance of answering it correctly, and passes are independent draws
  given the item; then the item's k_A + k_B pass outcomes are exchangeable, and the test deals them out again
  at random, k_A to A and k_B to B. The statistic is the change itself, two-sided. Items are held fixed: it
  answers "did the model change on this bank of items". Valid whatever the two pass counts; with one pass at
  each step it is a sign-flip test of the discordant items. Permutations: `--bootstrap-replicates`; generator
  seeded with `--bootstrap-seed`, apart from the bootstrap's.
- **Paired bootstrap interval** (`bootstrap_differences`): items resampled with replacement within each
  category, each drawn item carrying its share at A and at B. It answers "how far would the change vary over
  other items like these" (the items as a sample); repeat noise enters once, through each item's share.
- **Gained / lost**, descriptive: an item's share is higher at B than at A / lower. With one pass at each
  step, wrong then correct / correct then wrong. With different pass counts they are uneven even without a change
  (an item is all correct more often over fewer passes), so no verdict is drawn from them.
- **McNemar's exact test** (`mcnemar_p`, not in the prose): on the pooled gained and lost items, reported only
  when both steps have the same number of passes, the case in which an item is as likely gained as lost
  without a change; null otherwise. It pools items, so for Non-Live and Multi-Turn it tests another quantity
  than the change.

`changed_items_csv` lists every gained and lost item; `make_figures` writes it to
`tables/items_step{A}_step{B}.csv`.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from toolcanary.analysis.passes import RunItems, StepItems, kinds_seen
from toolcanary.analysis.settings import AnalysisSettings
from toolcanary.contract.bfcl import AGGREGATES, CATEGORIES, accuracy, aggregate_value
from toolcanary.contract.errors import UsageError
from toolcanary.contract.pass_files import CALL_ATTEMPTS, CORRECT, TRUNCATED, UNPARSED_CALL, ItemOutcome

CHANGE_RULE = ("an item is gained when its share of passes correct is higher at B than at A, lost when it is "
               "lower; descriptive only")
PERMUTATION_NULL = ("at each item both steps have the same chance of a correct pass, passes independent given "
                    "the item")
CHANGED_ITEMS_COLUMNS = ("category", "id", "change", "share_correct_a", "share_correct_b", "answers_a", "answers_b")
GAINED, LOST = "gained", "lost"
TIE_PP = 1e-9
"""A dealt change within this many pp of the observed one counts as being as large: the same change reached by
another order of sums may round differently, and counting it keeps the p-value on the safe side."""


def changed_items_file(step_a: int, step_b: int) -> str:
    return f"tables/items_step{step_a}_step{step_b}.csv"


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
    """Items by how their share of passes correct moved; descriptive, the verdict is the permutation test's."""

    gained: int
    lost: int
    unchanged_correct: int
    """Correct in every pass at both steps."""
    unchanged_wrong: int
    """Wrong in every pass at both steps."""
    unchanged_partial: int
    """The same share at both steps, strictly between 0 and 1 (1 of 2 passes at each, say)."""

    @property
    def items(self) -> int:
        return self.gained + self.lost + self.unchanged_correct + self.unchanged_wrong + self.unchanged_partial

    @property
    def net(self) -> int:
        return self.gained - self.lost

    def __add__(self, other: Tally) -> Tally:
        return Tally(self.gained + other.gained, self.lost + other.lost,
                     self.unchanged_correct + other.unchanged_correct, self.unchanged_wrong + other.unchanged_wrong,
                     self.unchanged_partial + other.unchanged_partial)


def moved(paired: PairedCategory) -> tuple[np.ndarray, np.ndarray]:
    """(gained, lost) per item: share of passes correct higher at B than at A, and lower. Compared as whole
    numbers (a / k_A against b / k_B as a k_B against b k_A), so 1 of 3 and 2 of 6 are equal."""
    correct_a, correct_b = paired.a.sum(axis=1), paired.b.sum(axis=1)
    at_a, at_b = correct_a * paired.b.shape[1], correct_b * paired.a.shape[1]
    return at_b > at_a, at_a > at_b


def tally(paired: PairedCategory) -> Tally:
    gained, lost = moved(paired)
    every_a, every_b = paired.a.all(axis=1), paired.b.all(axis=1)
    never_a, never_b = ~paired.a.any(axis=1), ~paired.b.any(axis=1)
    same = ~gained & ~lost
    return Tally(gained=int(gained.sum()), lost=int(lost.sum()),
                 unchanged_correct=int((every_a & every_b).sum()), unchanged_wrong=int((never_a & never_b).sum()),
                 unchanged_partial=int((same & ~(every_a & every_b) & ~(never_a & never_b)).sum()))


class NotRecorded(ValueError):
    """A measure needs a field the pass's outcomes do not record (a pass from before its contract)."""


def _bfcl_correct(outcome: ItemOutcome) -> bool:
    if outcome.bfcl_correct is None:
        raise NotRecorded("BFCL's own verdict (bfcl_correct, contract 1.10)")
    return outcome.bfcl_correct


def _attempted(outcome: ItemOutcome) -> bool:
    if outcome.answer is None:
        raise NotRecorded("the answer kind (contract 1.5)")
    return outcome.answer in CALL_ATTEMPTS


def _no_unparsed_credit(outcome: ItemOutcome) -> bool:
    if outcome.answer is None:
        raise NotRecorded("the answer kind (contract 1.5)")
    return outcome.outcome == CORRECT and outcome.answer != UNPARSED_CALL


Measure = Callable[[ItemOutcome], bool]
MEASURES: dict[str, Measure] = {
    "correct": lambda outcome: outcome.outcome == CORRECT,
    "no_unparsed_credit": _no_unparsed_credit,
    "bfcl_correct": _bfcl_correct,
    "call_attempted": _attempted,
    "truncated": lambda outcome: outcome.outcome == TRUNCATED,
}
"""What an item scores in one pass, by name. `correct` is the table's verdict (ToolCanary's overrides
applied); `no_unparsed_credit` the same without BFCL's credit for call markup the server did not parse;
`bfcl_correct` BFCL's own verdict before any override; `call_attempted` whether the answer held a call, parsed
or not (answer kind `calls` or `unparsed_call`); `truncated` whether the answer was cut at the output cap (the
table counts it wrong, BFCL may not)."""


def _matrix(step: StepItems, category: str, ids: list[str],
            measure: Measure) -> tuple[np.ndarray, tuple[tuple[str | None, ...], ...]]:
    scored = np.array([[measure(p.outcomes[(category, i)]) for p in step.passes] for i in ids], dtype=bool)
    answers = tuple(tuple(p.outcomes[(category, i)].answer for p in step.passes) for i in ids)
    return scored.reshape(len(ids), len(step.passes)), answers


def pair_steps(items: RunItems, step_a: int, step_b: int, measure: str = "correct") -> list[PairedCategory]:
    """The paired items of every category scored at both steps, in the contract's category order, each item
    scored by `measure` (a name in MEASURES; `PairedCategory.a` and `.b` then hold that measure, not
    necessarily correctness).

    Raises:
        NotRecorded: an outcome lacks the field the measure needs.
    """
    at_a, at_b = items.step(step_a), items.step(step_b)
    paired = []
    for category in (c.name for c in CATEGORIES if c.name in at_a.categories & at_b.categories):
        ids_a, ids_b = at_a.items(category), at_b.items(category)
        ids = sorted(set(ids_a) & set(ids_b))
        everywhere = {i for p in (*at_a.passes, *at_b.passes) for c, i in p.outcomes if c == category}
        a, answers_a = _matrix(at_a, category, ids, MEASURES[measure])
        b, answers_b = _matrix(at_b, category, ids, MEASURES[measure])
        paired.append(PairedCategory(category, tuple(ids), a, b, answers_a, answers_b, len(everywhere) - len(ids)))
    return paired


def _measurable(paired: list[PairedCategory]) -> dict[str, str | None]:
    """Aggregate -> None when every category it needs has paired items, else why not."""
    sizes = {p.category: p.size for p in paired}
    reasons = {}
    for aggregate in AGGREGATES:
        empty = [c for c in aggregate.categories if not sizes.get(c)]
        reasons[aggregate.name] = f"no paired item in {empty}" if empty else None
    return reasons


Shares = dict[str, tuple[Any, int]]
"""Category -> (sum over its items of the share of passes correct, items): a float, or an array with one value
per replicate, which `accuracy` and `aggregate_value` carry through elementwise."""


def _changes(drawn: list[PairedCategory], shares_a: Shares, shares_b: Shares,
             aggregates: list[str]) -> dict[str, Any]:
    """The change B − A in pp per category and per aggregate: the table's definitions, applied to the shares."""
    changes = {p.category: accuracy(shares_b, p.category) - accuracy(shares_a, p.category) for p in drawn}
    for name in aggregates:
        changes[name] = aggregate_value(name, shares_b) - aggregate_value(name, shares_a)
    return changes


def drawn_and_measurable(paired: list[PairedCategory]) -> tuple[list[PairedCategory], list[str]]:
    """The categories with paired items, and the aggregates whose every category has some."""
    return [p for p in paired if p.size], [name for name, reason in _measurable(paired).items() if reason is None]


def observed_shares(paired: list[PairedCategory]) -> tuple[Shares, Shares]:
    """(at A, at B) per category with paired items: Σ over items of the share of passes correct, and the items.
    Σ of the shares = correct passes / passes, since the step's pass count is the same for every item."""
    drawn = [p for p in paired if p.size]
    return ({p.category: (int(p.a.sum()) / p.a.shape[1], p.size) for p in drawn},
            {p.category: (int(p.b.sum()) / p.b.shape[1], p.size) for p in drawn})


def observed_changes(paired: list[PairedCategory]) -> dict[str, float]:
    """The change B − A in pp per category with paired items and per measurable aggregate (`delta_pp`)."""
    drawn, aggregates = drawn_and_measurable(paired)
    shares_a, shares_b = observed_shares(paired)
    return {name: float(value) for name, value in _changes(drawn, shares_a, shares_b, aggregates).items()}


def permutation_changes(paired: list[PairedCategory], permutations: int, seed: int) -> dict[str, np.ndarray]:
    """The change B − A in pp with each item's passes dealt out again at random between the two steps, per
    category with paired items and per measurable aggregate: the permutation distribution under the null that
    both steps have the same chance of answering each item correctly.

    Dealing an item's k_A + k_B outcomes at random, k_A to A, puts a hypergeometric number of its correct ones
    at A; an item correct in none or all of them comes out the same every time and draws nothing. The draw
    order, exactly:

        rng = numpy.random.default_rng(seed)
        for each category with at least one paired item, in the order of toolcanary.contract.bfcl.CATEGORIES:
            n = its paired items, in ascending id order (Python string order)
            k_a, k_b = its passes at A and at B
            s[i] = item i's correct passes at A and at B together
            mixed = the items with 0 < s[i] < k_a + k_b, in item order; m = how many
            at_a = rng.hypergeometric(s[mixed], k_a + k_b − s[mixed], k_a, size=(permutations, m))
                # row r: for each mixed item, how many of its correct passes permutation r deals to A
                # (the call is made even when m = 0)
            correct_A[r] = k_a × (items with s = k_a + k_b) + Σ_j at_a[r, j];  correct_B[r] = Σ_i s[i] − correct_A[r]
            shares_A[category] = (correct_A / k_a, n);  shares_B[category] = (correct_B / k_b, n)
        change[category] = accuracy(shares_B, category) − accuracy(shares_A, category)
        change[aggregate] = aggregate_value(aggregate, shares_B) − aggregate_value(aggregate, shares_A)

    each elementwise over the permutations.
    """
    drawn, aggregates = drawn_and_measurable(paired)
    rng = np.random.default_rng(seed)
    shares_a: Shares = {}
    shares_b: Shares = {}
    for p in drawn:
        k_a, k_b = p.a.shape[1], p.b.shape[1]
        together = p.a.sum(axis=1) + p.b.sum(axis=1)
        mixed = together[(together > 0) & (together < k_a + k_b)]
        at_a = rng.hypergeometric(mixed, k_a + k_b - mixed, k_a, size=(permutations, len(mixed)))
        correct_a = k_a * int((together == k_a + k_b).sum()) + at_a.sum(axis=1)
        correct_b = int(together.sum()) - correct_a
        shares_a[p.category] = (correct_a / k_a, p.size)
        shares_b[p.category] = (correct_b / k_b, p.size)
    return _changes(drawn, shares_a, shares_b, aggregates)


def permutation_p(observed: float, dealt: np.ndarray) -> float:
    """Two-sided Monte Carlo p: (1 + #{|T*| ≥ |T| − TIE_PP}) / (1 + R), the dealt changes T* against the
    observed T. Never 0: the observed dealing is one of the possible ones."""
    as_large = np.abs(dealt) >= abs(observed) - TIE_PP
    return float((1 + int(as_large.sum())) / (1 + len(dealt)))


def bootstrap_differences(paired: list[PairedCategory], replicates: int, seed: int) -> dict[str, np.ndarray]:
    """Bootstrap replicates of the change B − A in pp, per category and per measurable aggregate: items
    resampled with replacement within each category, each drawn item carrying its share of passes correct at
    A and at B, so repeat noise enters once, through the shares.

    The draw order, exactly, so that a separately written reference reproduces every replicate:

        rng = numpy.random.default_rng(seed)
        for each category with at least one paired item, in the order of toolcanary.contract.bfcl.CATEGORIES:
            n = its paired items, rows in ascending id order (Python string order)
            k_a, k_b = its passes at A and at B
            a[i], b[i] = item i's correct passes at A and at B
            rows = rng.integers(0, n, size=(replicates, n))   # row r: the items replicate r draws
            shares_A[category][r] = (Σ_i a[rows[r, i]] / k_a, n)   # Σ of the drawn items' shares at A
            shares_B[category][r] = (Σ_i b[rows[r, i]] / k_b, n)
        difference[category] = accuracy(shares_B, category) − accuracy(shares_A, category)
        difference[aggregate] = aggregate_value(aggregate, shares_B) − aggregate_value(aggregate, shares_A)

    each elementwise over the replicates. Categories without a paired item draw nothing; an aggregate that
    needs one is left out.
    """
    drawn, aggregates = drawn_and_measurable(paired)
    rng = np.random.default_rng(seed)
    shares_a: Shares = {}
    shares_b: Shares = {}
    for p in drawn:
        rows = rng.integers(0, p.size, size=(replicates, p.size))
        # Whole numbers summed, then one division per replicate.
        shares_a[p.category] = (p.a.sum(axis=1)[rows].sum(axis=1) / p.a.shape[1], p.size)
        shares_b[p.category] = (p.b.sum(axis=1)[rows].sum(axis=1) / p.b.shape[1], p.size)
    return _changes(drawn, shares_a, shares_b, aggregates)


def percentile_interval(replicates: np.ndarray, level: float) -> tuple[float, float]:
    """The central `level` interval of the replicates: numpy.quantile at (1 − level)/2 and (1 + level)/2, numpy's
    default ("linear") method."""
    low, high = np.quantile(replicates, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def _entry(counted: Tally, delta: float, dealt: np.ndarray, replicates: np.ndarray, level: float,
           same_passes: bool) -> dict[str, Any]:
    return {
        "items": counted.items, "gained": counted.gained, "lost": counted.lost,
        "unchanged_correct": counted.unchanged_correct, "unchanged_wrong": counted.unchanged_wrong,
        "unchanged_partial": counted.unchanged_partial, "net": counted.net, "delta_pp": delta,
        "permutation_p": permutation_p(delta, dealt),
        "mcnemar_p": mcnemar_exact(counted.lost, counted.gained) if same_passes else None,
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
    passes_a, passes_b = items.pass_indices(step_a), items.pass_indices(step_b)
    same_passes = len(passes_a) == len(passes_b)
    observed = observed_changes(paired)
    dealt = permutation_changes(paired, settings.bootstrap_replicates, settings.bootstrap_seed)
    replicates = bootstrap_differences(paired, settings.bootstrap_replicates, settings.bootstrap_seed)
    tallies = {p.category: tally(p) for p in paired}
    reasons = _measurable(paired)
    level = settings.interval_level
    categories = {}
    for p in paired:
        if not p.size:
            categories[p.category] = {"items": 0, "not_measurable": "no paired item"}
            continue
        name = p.category
        categories[name] = _entry(tallies[name], observed[name], dealt[name], replicates[name], level, same_passes)
    aggregates = {}
    for aggregate in AGGREGATES:
        name = aggregate.name
        if reasons[name] is not None:
            aggregates[name] = {"not_measurable": reasons[name]}
            continue
        counted = sum((tallies[c] for c in aggregate.categories), Tally(0, 0, 0, 0, 0))
        aggregates[name] = _entry(counted, observed[name], dealt[name], replicates[name], level, same_passes)
    found = {
        "steps": [step_a, step_b],
        "passes": {"a": list(passes_a), "b": list(passes_b)},
        "change_rule": CHANGE_RULE,
        "permutation": {"permutations": settings.bootstrap_replicates, "seed": settings.bootstrap_seed,
                        "null": PERMUTATION_NULL, "sided": "two"},
        "bootstrap": {"replicates": settings.bootstrap_replicates, "seed": settings.bootstrap_seed,
                      "level": settings.interval_level, "interval": "percentile"},
        "left_out": {p.category: p.left_out for p in paired if p.left_out},
        "changed_items_file": changed_items_file(step_a, step_b),
        "aggregates": aggregates,
        "categories": categories,
    }
    return found, paired


def changed_items_csv(paired: list[PairedCategory]) -> str:
    """Every lost and gained item (share of passes correct lower or higher at B than at A): category (contract
    order), change (lost first), id (ascending)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CHANGED_ITEMS_COLUMNS)
    for p in paired:
        gained, lost = moved(p)
        for change, chosen in ((LOST, lost), (GAINED, gained)):
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
    return (f"{name} {entry['delta_pp']:+.2f} pp (permutation p={_p(entry['permutation_p'])}, {100 * level:g}% "
            f"bootstrap interval [{low:+.2f}, {high:+.2f}] pp; lost {entry['lost']} and gained {entry['gained']} "
            "items)")


def items_prose(found: dict[str, Any]) -> list[str]:
    """The finding in one sentence, then what the p-value, the interval and the counts each answer, and what
    was left out."""
    step_a, step_b = found["steps"]
    level = found["bootstrap"]["level"]
    lines = [f"Paired by item, step {step_a} to {step_b}: "
             + "; ".join(_clause(name, entry, level) for name, entry in found["aggregates"].items()) + "."]
    passes_a, passes_b = (len(found["passes"][side]) for side in ("a", "b"))
    counts = ("lost and gained compare each item's share of passes correct and are descriptive"
              + ("" if passes_a == passes_b else
                 f" (with {passes_a} and {passes_b} passes they are uneven even without a change)"))
    note = ["p: each item's passes dealt out again between the two steps (did the model change on these items)",
            "interval: items resampled within each category (how far the change would vary over other items "
            "like these)", counts]
    if found["left_out"]:
        left = ", ".join(f"{n} of {c}" for c, n in found["left_out"].items())
        note.append(f"left out (not counted in every pass of both steps): {left}")
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
        partial = f", {entry['unchanged_partial']} partly" if entry["unchanged_partial"] else ""
        lines.append(f"  {name} ({entry['items']} items): change {entry['delta_pp']:+.2f} pp, permutation "
                     f"p={_p(entry['permutation_p'])}, {100 * level:g}% interval [{low:+.2f}, {high:+.2f}]; lost "
                     f"{entry['lost']}, gained {entry['gained']}, unchanged {entry['unchanged_correct']} correct and "
                     f"{entry['unchanged_wrong']} wrong{partial}")
    return lines
