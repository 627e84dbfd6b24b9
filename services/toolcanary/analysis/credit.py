"""BFCL's credit for unparsed call markup in the abstention categories, and the change without it.

In `irrelevance` and `live_irrelevance` BFCL scores an answer correct when it holds no call BFCL can read. An
answer that did try to call a tool, in markup the server did not parse, therefore counts as a correct
abstention. `bfcl_by_category.csv` counts those items per row in `correct_unparsed` (contract 1.5; how answers
are classified: docs/evaluate.md, "Answer kinds"). From it:

- the table row "Abstention required, no unparsed credit": pooled (correct − correct_unparsed) / total over the
  abstention categories, per (step, pass), then the same mean over passes, trend and s.d. as every row;
- the findings: the abstention change as BFCL scores it, the change without the credit, and how much of the
  change the credit explains (the difference, in pp and as a share of the BFCL change).

Both need every row of the abstention categories measured. A file without the column (written before contract
1.5), or a pass whose cell is empty (answers not classified), gives no row and findings that say "not
measured" and why: never 0.

    .venvs/analysis/bin/make_figures --data volumes/results/RUN --table --findings
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from toolcanary.analysis.data import BfclRun, StepSeries, finite_or_none
from toolcanary.contract.bfcl import ABSTENTION
from toolcanary.contract.csv_schemas import CORRECT_UNPARSED

NO_CREDIT_ROW = "Abstention required, no unparsed credit"
WITH_CREDIT_ROW = "Abstention required"


def not_measured_reason(run: BfclRun) -> str | None:
    """None when every abstention row has `correct_unparsed`; otherwise why the credit cannot be measured."""
    if not run.has_unparsed_column:
        return f"{run.path.name} has no {CORRECT_UNPARSED} column (written before contract 1.5)"
    empty = [f"step {int(step)} pass {p}"
             for step, indices, cells in zip(run.steps, run.pass_indices, run.unparsed, strict=True)
             for p, cell in zip(indices, cells, strict=True)
             if any(cell[c] is None for c in ABSTENTION)]
    if not empty:
        return None
    passes = sum(map(len, run.pass_indices))
    shown = ", ".join(empty[:6]) + (f" and {len(empty) - 6} more" if len(empty) > 6 else "")
    return (f"{CORRECT_UNPARSED} is empty for the abstention categories at {shown} ({len(empty)} of {passes} "
            "passes: their answers were not classified)")


def no_credit_series(run: BfclRun) -> StepSeries | None:
    """Abstention required without the credit, per step and pass; None when not measured."""
    if not_measured_reason(run) is not None:
        return None

    def value(counts, unparsed) -> float:
        correct = sum(counts[c][0] - unparsed[c] for c in ABSTENTION)
        return 100.0 * correct / sum(counts[c][1] for c in ABSTENTION)

    return StepSeries(run.steps, tuple(
        np.array([value(c, u) for c, u in zip(step_counts, step_unparsed, strict=True)])
        for step_counts, step_unparsed in zip(run.counts, run.unparsed, strict=True)
    ))


def _ends(series: StepSeries) -> dict[str, float]:
    return {"first": series.first, "last": series.last, "delta_pp": series.last - series.first}


def credit_findings(run: BfclRun, with_credit: StepSeries) -> dict[str, Any]:
    """The BFCL abstention change, the change without the credit, and the part the credit explains.

    `explained_pp` = change with the credit − change without it (= the change of the credit's own share of
    the items); `explained_share` = explained_pp / the change with the credit (None when that change is 0).
    """
    reason = not_measured_reason(run)
    without = no_credit_series(run)
    if without is None:
        return {"measured": False, "not_measured": reason, "categories": list(ABSTENTION),
                "with_credit": _ends(with_credit), "without_credit": None, "explained_pp": None,
                "explained_share": None}
    found_with, found_without = _ends(with_credit), _ends(without)
    explained = found_with["delta_pp"] - found_without["delta_pp"]
    share = explained / found_with["delta_pp"] if found_with["delta_pp"] else math.nan
    return {"measured": True, "not_measured": None, "categories": list(ABSTENTION),
            "with_credit": found_with, "without_credit": found_without,
            "explained_pp": explained, "explained_share": finite_or_none(share)}


def credit_prose(found: dict[str, Any]) -> str:
    change = found["with_credit"]["delta_pp"]
    if not found["measured"]:
        return (f"{WITH_CREDIT_ROW}: {change:+.2f} pp as BFCL scores it; without BFCL's credit for unparsed call "
                f"markup: not measured ({found['not_measured']}).")
    share, explained = found["explained_share"], found["explained_pp"]
    head = (f"{WITH_CREDIT_ROW}: {change:+.2f} pp as BFCL scores it, {found['without_credit']['delta_pp']:+.2f} pp "
            "without its credit for unparsed call markup")
    if share is None:
        return head + f"; the credit moves it by {explained:+.2f} pp (no BFCL change to compare with)."
    if share >= 0:
        return head + f"; the credit explains {explained:+.2f} pp ({100 * share:.1f}% of BFCL's change)."
    # Opposite signs: the credit hides part of a larger change, which is |share| larger without it.
    return head + (f"; the credit hides {abs(explained):.2f} pp of it (the change without the credit is "
                   f"{100 * -share:.1f}% larger).")
