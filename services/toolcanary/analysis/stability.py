"""Repeat stability: which items change their outcome between repeat passes of the same checkpoint.

    .venvs/analysis/bin/make_figures --data volumes/results/RUN --stability
    .venvs/analysis/bin/make_figures --data volumes/results/RUN --stability --findings

Read from the pass folders through `toolcanary.analysis.passes` (only passes in the CSV, checked against it).

- **Flip.** At a step with two or more passes, an item flips when it is correct in at least one pass and wrong
  in at least one (any disagreement); only items counted in every pass of the step are looked at. Per step
  and category: items, flipping items, their share; every flipping item is listed (`flips_csv`, written to
  `tables/stability.csv`) with its outcome and answer kind in each pass.
- **Concentration** across the S repeated steps, per category: over the N items counted at every repeated
  step, the flip events (item-step pairs that flip), the distinct items that flip at least once, and the
  distinct count expected if the same number of events fell uniformly at random on the items,
  N (1 − (1 − q)^S) with q = events / (N S). Observed well below expected (the prose says so below
  `CONCENTRATED` of it) means a few items flip again and again. With one repeated step the two are equal by
  construction: not measurable.
- **Answer kinds of flips.** Per category, the flip events whose answer kind changed between passes, stayed
  the same, or were not classified, and which kinds were seen together, to help find where a flip comes from.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any

from toolcanary.analysis.data import finite_or_none
from toolcanary.analysis.passes import UNCLASSIFIED, RunItems, StepItems, kinds_seen
from toolcanary.contract.bfcl import CATEGORIES
from toolcanary.contract.pass_files import CORRECT

STABILITY_FILE = "tables/stability.csv"
STABILITY_COLUMNS = ("step", "category", "id", "passes", "outcomes", "answers")
FLIP_RULE = ("an item flips at a step when it is correct in at least one of that step's passes and wrong in at "
             "least one")
CONCENTRATED = 0.75
"""Distinct flipping items below this fraction of the uniform expectation read as "a few items flip repeatedly"."""


@dataclass(frozen=True)
class Flip:
    step: int
    category: str
    id: str
    passes: tuple[int, ...]
    outcomes: tuple[str, ...]
    answers: tuple[str | None, ...]

    @property
    def kinds_seen(self) -> str:
        return kinds_seen(self.answers)

    @property
    def kind_change(self) -> str:
        """"unclassified" when a pass did not classify the answer, else "changed" or "same"."""
        if None in self.answers:
            return UNCLASSIFIED
        return "changed" if len(set(self.answers)) > 1 else "same"


def repeated_steps(items: RunItems) -> list[int]:
    return [s for s in items.scored_steps() if len(items.pass_indices(s)) >= 2]


def step_flips(step: StepItems) -> tuple[dict[str, int], list[Flip]]:
    """Items per category counted in every pass of the step, and the items that flip, in category order."""
    sizes, flips = {}, []
    indices = tuple(p.pass_index for p in step.passes)
    for category in (c.name for c in CATEGORIES if c.name in step.categories):
        ids = step.items(category)
        sizes[category] = len(ids)
        for item in ids:
            outcomes = tuple(p.outcomes[(category, item)] for p in step.passes)
            correct = {o.outcome == CORRECT for o in outcomes}
            if len(correct) > 1:
                flips.append(Flip(step.step, category, item, indices, tuple(o.outcome for o in outcomes),
                                  tuple(o.answer for o in outcomes)))
    return sizes, flips


def _share(part: int, whole: int) -> float | None:
    return finite_or_none(part / whole) if whole else None


def expected_distinct(items: int, events: int, steps: int) -> float:
    """Distinct items hit when `events` flips fall uniformly on `items` items over `steps` steps:
    N (1 − (1 − q)^S), q = events / (N S)."""
    q = events / (items * steps)
    return items * (1.0 - (1.0 - q) ** steps)


def _concentration(items: RunItems, steps: list[int], flips: list[Flip]) -> dict[str, Any]:
    if len(steps) < 2:
        why = ("no step has two or more passes" if not steps else
               f"one repeated step (step {steps[0]}): whether the same items flip again needs two or more")
        return {"measurable": False, "not_measurable": why, "repeated_steps": len(steps), "categories": {},
                "total": None}
    categories: dict[str, Any] = {}
    per_step = [items.step(s) for s in steps]
    totals = {"items": 0, "flip_events": 0, "distinct_flipping": 0, "expected_distinct": 0.0}
    for category in (c.name for c in CATEGORIES if all(c.name in s.categories for s in per_step)):
        common = set.intersection(*(set(s.items(category)) for s in per_step))
        if not common:
            continue
        events = [f.id for f in flips if f.category == category and f.id in common]
        expected = expected_distinct(len(common), len(events), len(steps))
        categories[category] = {"items": len(common), "flip_events": len(events),
                                "distinct_flipping": len(set(events)), "expected_distinct": expected,
                                "observed_over_expected": _share(len(set(events)), expected) if events else None}
        for key in ("items", "flip_events", "distinct_flipping", "expected_distinct"):
            totals[key] += categories[category][key]
    totals["observed_over_expected"] = (_share(totals["distinct_flipping"], totals["expected_distinct"])
                                        if totals["flip_events"] else None)
    return {"measurable": True, "not_measurable": None, "repeated_steps": len(steps), "categories": categories,
            "total": totals}


def _answer_kinds(flips: list[Flip]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for flip in flips:
        entry = found.setdefault(flip.category, {"changed": 0, "same": 0, "unclassified": 0, "seen": {}})
        entry[flip.kind_change] += 1
        entry["seen"][flip.kinds_seen] = entry["seen"].get(flip.kinds_seen, 0) + 1
    total = {key: sum(e[key] for e in found.values()) for key in ("changed", "same", "unclassified")}
    return {"categories": found, "total": total}


def stability_findings(items: RunItems) -> tuple[dict[str, Any], list[Flip]]:
    """The findings of repeat stability over every repeated step, and the flips behind them."""
    steps = repeated_steps(items)
    by_step, flips = {}, []
    for step in steps:
        sizes, found = step_flips(items.step(step))
        flips += found
        categories = {}
        for category, size in sizes.items():
            flipping = sum(1 for f in found if f.category == category)
            categories[category] = {"items": size, "flipping": flipping, "share": _share(flipping, size)}
        total_items = sum(sizes.values())
        by_step[str(step)] = {"passes": list(items.pass_indices(step)), "items": total_items,
                              "flipping": len(found), "share": _share(len(found), total_items),
                              "categories": categories}
    return {
        "flip_rule": FLIP_RULE,
        "repeated_steps": steps,
        "steps": by_step,
        "concentration": _concentration(items, steps, flips),
        "answer_kinds": _answer_kinds(flips),
        "flips_file": STABILITY_FILE,
    }, flips


def flips_csv(flips: list[Flip]) -> str:
    """One row per flipping item and step; per-pass values joined by ';' in pass order."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(STABILITY_COLUMNS)
    for f in flips:
        writer.writerow([f.step, f.category, f.id, ";".join(map(str, f.passes)), ";".join(f.outcomes),
                         ";".join(UNCLASSIFIED if a is None else a for a in f.answers)])
    return buffer.getvalue()


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def stability_prose(found: dict[str, Any]) -> list[str]:
    """One or two sentences: how many items flip at each repeated step, and whether the flips concentrate."""
    if not found["repeated_steps"]:
        return ["Repeat stability: not measurable, no step has two or more passes."]
    per_step = ", ".join(f"step {s}: {e['flipping']} of {e['items']} items ({_percent(e['share'])}, "
                         f"{len(e['passes'])} passes)" for s, e in found["steps"].items())
    lines = [f"Repeat stability: items whose outcome differs between passes at {per_step}."]
    concentration, kinds = found["concentration"], found["answer_kinds"]["total"]
    events = sum(e["flipping"] for e in found["steps"].values())
    kind_text = (f"the answer kind changed between passes in {kinds['changed']} of {events} flip events"
                 + (f" ({kinds['unclassified']} not classified)" if kinds["unclassified"] else ""))
    if not concentration["measurable"]:
        lines.append(f"  Concentration across steps not measurable ({concentration['not_measurable']}); "
                     f"{kind_text}.")
        return lines
    total = concentration["total"]
    ratio = total["observed_over_expected"]
    if ratio is None:
        verdict = "no flips to concentrate"
    elif ratio < CONCENTRATED:
        verdict = "well below: a few items flip repeatedly"
    else:
        verdict = "close to it: the flips are spread over the items"
    lines.append(f"  Across {concentration['repeated_steps']} repeated steps the {total['flip_events']} flip events "
                 f"fall on {total['distinct_flipping']} distinct items, against {total['expected_distinct']:.1f} "
                 f"expected if spread uniformly ({verdict}); {kind_text}.")
    return lines


def stability_details(found: dict[str, Any]) -> list[str]:
    """Per step and category, for the printed text."""
    lines = []
    for step, entry in found["steps"].items():
        for category, counts in entry["categories"].items():
            if counts["flipping"]:
                lines.append(f"  step {step}, {category}: {counts['flipping']} of {counts['items']} items flip "
                             f"({_percent(counts['share'])})")
    for category, counts in found["concentration"]["categories"].items():
        if counts["flip_events"]:
            lines.append(f"  {category} across steps: {counts['flip_events']} flip events on "
                         f"{counts['distinct_flipping']} distinct items (uniform: {counts['expected_distinct']:.1f})")
    for category, counts in found["answer_kinds"]["categories"].items():
        seen = ", ".join(f"{k} {n}" for k, n in sorted(counts["seen"].items()))
        lines.append(f"  {category} flips by answer kind: changed {counts['changed']}, same {counts['same']}, "
                     f"not classified {counts['unclassified']} (kinds seen: {seen})")
    return lines
