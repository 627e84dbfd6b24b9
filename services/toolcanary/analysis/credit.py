"""What BFCL credits in the abstention categories, what the evaluation overrides, and the changes without them.

In `irrelevance` and `live_irrelevance` BFCL scores an answer correct when it holds no call BFCL can read. An
answer that did try to call a tool, in markup the server did not parse, therefore counts as a correct
abstention; so does an answer cut at the output cap before its call, a request the server refused as longer
than its context, and an answer that was a reasoning trace with nothing after it. `bfcl_by_category.csv`'s
`correct` and `total` keep BFCL's verdicts except two overrides of the evaluation (docs/evaluate.md, guards 4
and 7): a truncated item counts wrong, an overlong item counts wrong or leaves the total by the pass's rule.
Beside them each row counts `correct_unparsed` (contract 1.5), and `truncated`, `truncated_bfcl_correct`,
`overlong`, `overlong_bfcl_correct` and `correct_empty_reasoning` (contract 1.10). Per (step, pass), pooled over
the two categories (then the same mean over passes, trend and s.d. as every row), the table's three abstention
rows are:

- "Abstention required, as BFCL scores it" (`bfcl_series`): BFCL's own verdict on every item,
  Σ(correct + truncated_bfcl_correct + overlong_bfcl_correct) / Σ(total + overlong left out of it), where
  "overlong left out of it" is `overlong` for a pass scored with `overlong_counted_wrong` false (read from its
  request.json) and 0 otherwise;
- "Abstention required" (the contract's aggregate): Σ correct / Σ total, ToolCanary's overrides applied;
- "Abstention required, no unparsed credit" (`no_credit_series`): Σ(correct − correct_unparsed) / Σ total.

The findings give the abstention change as the table's "Abstention required" counts it, the change without the
unparsed credit and how much of the change the credit explains (the difference, in pp and as a share); the
change as BFCL scores it; and per step the truncated and overlong items (abstention and tool call categories)
with BFCL's verdict on them, and the correct abstentions that were a reasoning trace alone.

A row needs every row of the abstention categories measured. A file without a column (written before its
contract), a pass whose cell is empty, or overlong items in a pass whose rule cannot be read gives no row and
findings that say "not measured" and why: never 0.

    .venvs/analysis/bin/make_figures --data volumes/results/RUN --table --findings
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from toolcanary.analysis.data import BfclRun, StepSeries, finite_or_none
from toolcanary.analysis.passes import pass_folder
from toolcanary.contract.bfcl import ABSTENTION, AST
from toolcanary.contract.csv_schemas import (
    CORRECT_EMPTY_REASONING,
    CORRECT_UNPARSED,
    OVERLONG_COLUMNS,
    TRUNCATED_COLUMNS,
    VERDICT_COLUMNS,
)
from toolcanary.contract.errors import ContractError
from toolcanary.contract.pass_files import REQUEST_FILE, read_request

NO_CREDIT_ROW = "Abstention required, no unparsed credit"
WITH_CREDIT_ROW = "Abstention required"
BFCL_ROW = "Abstention required, as BFCL scores it"
# The per-step counts of truncated and overlong items: the abstention categories and the tool call required ones.
GROUPS = {"abstention": ABSTENTION, "tool_call": AST}


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


def _passes(run: BfclRun) -> list[tuple[int, int]]:
    """(step, pass index) of every pass the run's table uses, in step and pass order."""
    return [(int(step), p) for step, indices in zip(run.steps, run.pass_indices, strict=True) for p in indices]


def _missing_columns(run: BfclRun, columns: tuple[str, ...]) -> str | None:
    missing = [c for c in columns if c not in run.columns]
    if not missing:
        return None
    return (f"{run.path.name} has no {', '.join(missing)} column{'s' if len(missing) > 1 else ''} (written "
            "before contract 1.10)")


def _cell(run: BfclRun, step: int, pass_index: int, category: str, column: str) -> int | None:
    row = run.rows.get((step, pass_index), {}).get(category)
    return None if row is None else row.measured(column)


def _empty_cells(run: BfclRun, columns: tuple[str, ...], categories: tuple[str, ...]) -> list[str]:
    """The passes where a cell of `columns` is empty for one of `categories`."""
    return [f"step {step} pass {p}" for step, p in _passes(run)
            if any(_cell(run, step, p, c, column) is None for c in categories for column in columns)]


def _passes_text(where: list[str], run: BfclRun) -> str:
    shown = ", ".join(where[:6]) + (f" and {len(where) - 6} more" if len(where) > 6 else "")
    return f"{shown} ({len(where)} of {len(_passes(run))} passes)"


def _overlong_left_out(run: BfclRun, step: int, pass_index: int) -> bool | str:
    """Whether the pass left its overlong items out of the total, from its request.json; or, as text, why
    that cannot be told. The CSV's rows do not say it, and it decides what BFCL's total was."""
    path = pass_folder(run.path.parent, step, pass_index) / REQUEST_FILE
    if not path.is_file():
        return (f"step {step} pass {pass_index} has overlong items and no {REQUEST_FILE} in its pass folder to "
                "tell whether its total holds them")
    try:
        return not read_request(path).overlong_counted_wrong
    except ContractError as err:
        return f"{path} could not be read ({err.got})"


def _bfcl_counts(run: BfclRun) -> dict[tuple[int, int], tuple[int, int]] | str:
    """Per pass, (correct, total) over the abstention categories as BFCL's own scoring counts them; or, as
    text, why that is not measured."""
    columns = (*TRUNCATED_COLUMNS, *OVERLONG_COLUMNS)
    reason = _missing_columns(run, columns)
    if reason is not None:
        return reason
    empty = _empty_cells(run, columns, ABSTENTION)
    if empty:
        return (f"{', '.join(columns)} empty for the abstention categories at {_passes_text(empty, run)}: "
                "BFCL's verdict on their truncated and overlong items was not recorded")
    counts = {}
    for step, p in _passes(run):
        rows = [run.rows[(step, p)][c] for c in ABSTENTION]
        correct = sum(r.correct + r.truncated_bfcl_correct + r.overlong_bfcl_correct for r in rows)
        total = sum(r.total for r in rows)
        overlong = sum(r.overlong for r in rows)
        if overlong:
            left_out = _overlong_left_out(run, step, p)
            if isinstance(left_out, str):
                return left_out
            total += overlong if left_out else 0
        counts[(step, p)] = (correct, total)
    return counts


def bfcl_not_measured_reason(run: BfclRun) -> str | None:
    """None when the row "as BFCL scores it" can be computed; otherwise why not."""
    counts = _bfcl_counts(run)
    return counts if isinstance(counts, str) else None


def bfcl_series(run: BfclRun) -> StepSeries | None:
    """Abstention required as BFCL's own scoring counts it, per step and pass; None when not measured."""
    counts = _bfcl_counts(run)
    if isinstance(counts, str):
        return None
    return StepSeries(run.steps, tuple(
        np.array([100.0 * counts[(int(step), p)][0] / counts[(int(step), p)][1] for p in indices])
        for step, indices in zip(run.steps, run.pass_indices, strict=True)
    ))


def override_steps(run: BfclRun) -> dict[str, Any]:
    """Per step, summed over its passes and over each group's categories (`GROUPS`), the counts of
    `VERDICT_COLUMNS`: the truncated and overlong items, how many of them BFCL's own scoring counts correct,
    and the correct items that were a reasoning trace alone. A sum with an empty cell in it is None (and
    `empty_cells` names the passes); a file without the columns, or with them empty at every pass, gives
    `measured: false` and the reason."""
    reason = _missing_columns(run, VERDICT_COLUMNS)
    empty = _empty_cells(run, VERDICT_COLUMNS, (*ABSTENTION, *AST))
    if reason is None and len(empty) == len(_passes(run)):
        reason = f"{', '.join(VERDICT_COLUMNS)} empty at every pass: no pass recorded them"
    if reason is not None:
        return {"measured": False, "not_measured": reason, "empty_cells": None, "steps": None}
    steps = []
    for step, indices in zip(run.steps, run.pass_indices, strict=True):
        found: dict[str, Any] = {"step": int(step), "passes": len(indices)}
        for group, categories in GROUPS.items():
            cells = {column: [_cell(run, int(step), p, c, column) for p in indices for c in categories]
                     for column in VERDICT_COLUMNS}
            found[group] = {column: None if None in values else sum(values) for column, values in cells.items()}
        steps.append(found)
    return {"measured": True, "not_measured": None, "empty_cells": _passes_text(empty, run) if empty else None,
            "steps": steps}


def credit_findings(run: BfclRun, with_credit: StepSeries) -> dict[str, Any]:
    """The abstention change as the table's "Abstention required" counts it (BFCL's verdicts with the
    evaluation's overrides), the change without the unparsed credit, and the part that credit explains; beside
    them the change as BFCL scores it (`as_bfcl_scores`) and the truncated and overlong items per step
    (`per_step`, `override_steps`).

    `explained_pp` = change with the credit − change without it (= the change of the credit's own share of
    the items); `explained_share` = explained_pp / the change with the credit (None when that change is 0).
    """
    as_bfcl = bfcl_series(run)
    beside = {
        "as_bfcl_scores": {"measured": as_bfcl is not None, "not_measured": bfcl_not_measured_reason(run),
                           **(_ends(as_bfcl) if as_bfcl is not None else {"first": None, "last": None,
                                                                         "delta_pp": None})},
        "per_step": override_steps(run),
    }
    reason = not_measured_reason(run)
    without = no_credit_series(run)
    if without is None:
        return {"measured": False, "not_measured": reason, "categories": list(ABSTENTION),
                "with_credit": _ends(with_credit), "without_credit": None, "explained_pp": None,
                "explained_share": None, **beside}
    found_with, found_without = _ends(with_credit), _ends(without)
    explained = found_with["delta_pp"] - found_without["delta_pp"]
    share = explained / found_with["delta_pp"] if found_with["delta_pp"] else math.nan
    return {"measured": True, "not_measured": None, "categories": list(ABSTENTION),
            "with_credit": found_with, "without_credit": found_without,
            "explained_pp": explained, "explained_share": finite_or_none(share), **beside}


def credit_prose(found: dict[str, Any]) -> str:
    change = found["with_credit"]["delta_pp"]
    if not found["measured"]:
        return (f"{WITH_CREDIT_ROW}: {change:+.2f} pp with BFCL's credit for unparsed call markup; without it: "
                f"not measured ({found['not_measured']}).")
    share, explained = found["explained_share"], found["explained_pp"]
    head = (f"{WITH_CREDIT_ROW}: {change:+.2f} pp with BFCL's credit for unparsed call markup, "
            f"{found['without_credit']['delta_pp']:+.2f} pp without it")
    if share is None:
        return head + f"; the credit moves it by {explained:+.2f} pp (no change with it to compare with)."
    if share >= 0:
        return head + f"; the credit explains {explained:+.2f} pp ({100 * share + 0.0:.1f}% of the change with it)."
    # Opposite signs: the credit hides part of a larger change, which is |share| larger without it.
    return head + (f"; the credit hides {abs(explained):.2f} pp of it (the change without the credit is "
                   f"{100 * -share:.1f}% larger).")


def overrides_prose(found: dict[str, Any]) -> str:
    """The abstention change as BFCL scores it beside the table's, and per step the truncated and overlong
    items with BFCL's verdict on them and the correct abstentions that were a reasoning trace alone."""
    as_bfcl, per_step = found["as_bfcl_scores"], found["per_step"]
    ours = found["with_credit"]
    if as_bfcl["measured"]:
        head = (f"{BFCL_ROW}: {as_bfcl['delta_pp']:+.2f} pp ({as_bfcl['first']:.2f} -> {as_bfcl['last']:.2f}; "
                f"truncated and overlong items as BFCL's own scoring counts them, overlong ones in the total), "
                f"{WITH_CREDIT_ROW} {ours['delta_pp']:+.2f} pp (truncated answers counted wrong, overlong items "
                "by the pass's rule).")
    else:
        head = f"{BFCL_ROW}: not measured ({as_bfcl['not_measured']})."
    if not per_step["measured"]:
        return head + f" Truncated and overlong items per step: not measured ({per_step['not_measured']})."
    empty = f" Empty cells (n/a) at {per_step['empty_cells']}." if per_step["empty_cells"] else ""
    return " ".join([head, _override_sentence(per_step["steps"]), _reasoning_sentence(per_step["steps"])]) + empty


def _count_text(count: int | None, bfcl_correct: int | None, what: str) -> str:
    return f"{_number(count)} {what} ({_number(bfcl_correct)} correct by BFCL)"


def _number(value: int | None) -> str:
    return "n/a" if value is None else str(value)


def _override_sentence(steps: list[dict[str, Any]]) -> str:
    """The steps with truncated or overlong items, each group's counts; the steps with none summed up."""
    shown = []
    for found in steps:
        parts = []
        for group, label in (("abstention", "abstention"), ("tool_call", "tool call")):
            counts = found[group]
            items = [_count_text(counts[kind], counts[f"{kind}_bfcl_correct"], kind)
                     for kind in ("truncated", "overlong") if counts[kind] != 0 or counts[f"{kind}_bfcl_correct"]]
            if items:
                parts.append(f"{label} {', '.join(items)}")
        if parts:
            shown.append(f"step {found['step']}: {'; '.join(parts)}")
    body = "; ".join(part for part in [*shown, _none_at_the_rest(len(steps), len(shown))] if part)
    return ("Items cut at the output cap (truncated) or over the served context (overlong), summed over each "
            f"step's passes: {body}.")


def _reasoning_sentence(steps: list[dict[str, Any]]) -> str:
    counts = [(found["step"], found["abstention"][CORRECT_EMPTY_REASONING]) for found in steps]
    shown = [f"{_number(n)} at step {step}" for step, n in counts if n != 0]
    body = "; ".join(part for part in [*shown, _none_at_the_rest(len(counts), len(shown))] if part)
    return ("Correct abstentions whose answer was a reasoning trace alone (correct_empty_reasoning: BFCL credits "
            f"them, and all three abstention rows count them correct): {body}.")


def _none_at_the_rest(steps: int, shown: int) -> str:
    rest = steps - shown
    if not shown:
        return "none at any scored step"
    return "none at the other scored step" if rest == 1 else f"none at the other {rest} scored steps" if rest else ""
