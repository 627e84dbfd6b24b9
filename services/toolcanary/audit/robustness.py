"""The five aggregates recomputed without the flagged items, from the eval's per-item outcomes.

For every pass folder `<results>/<run>/passes/step_NNNN_pass_P/outcomes.jsonl`: (correct, total) per
category over all items, and again over the unflagged items only, both through the contract's
`aggregate_value`. The files are read, and items counted, exactly as the evaluation does it, through
`toolcanary.contract.pass_files` (`read_request`, `read_outcomes`, `count_outcomes`): "correct" is right, any
other outcome wrong, and "overlong" leaves the total when that pass's request.json says
`overlong_counted_wrong: false`.
The full counts are checked against `bfcl_by_category.csv` so a reader knows both tables describe the same
passes, and so are the counts beside them that both sides measured (the truncated and overlong items with
BFCL's verdict on them, and the correct ones that were a reasoning trace alone: `count_verdicts`). A pass whose
outcomes cannot be read is listed with the reason and left out; the audit goes on.

    robustness = recompute(results_dir / run, flagged={("simple_python", "simple_python_3")})
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from toolcanary.contract.bfcl import AGGREGATE_NAMES, aggregate_value
from toolcanary.contract.csv_schemas import BFCL_BY_CATEGORY, VERDICT_COLUMNS, BfclRow, read_bfcl_by_category
from toolcanary.contract.errors import ContractError
from toolcanary.contract.pass_files import (
    OUTCOMES_FILE,
    REQUEST_FILE,
    count_outcomes,
    count_verdicts,
    read_outcomes,
    read_request,
)

log = logging.getLogger(__name__)
PASS_FOLDER = re.compile(r"^step_(\d+)_pass_(\d+)$")

Counts = dict[str, tuple[int, int]]


@dataclass(frozen=True)
class PassAggregates:
    step: int
    pass_index: int
    full: dict[str, float | None]
    unflagged: dict[str, float | None]
    """None where an aggregate cannot be computed (a category it needs has no item left)."""
    items: int
    items_unflagged: int


@dataclass
class Robustness:
    passes: list[PassAggregates] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """Passes left out, and full counts that differ from bfcl_by_category.csv."""

    def step_means(self, which: str) -> dict[int, dict[str, float | None]]:
        """Per step, each aggregate's mean over that step's passes (as the analysis averages repeats)."""
        steps: dict[int, list[PassAggregates]] = {}
        for row in self.passes:
            steps.setdefault(row.step, []).append(row)
        means: dict[int, dict[str, float | None]] = {}
        for step, rows in sorted(steps.items()):
            means[step] = {}
            for name in AGGREGATE_NAMES:
                values = [getattr(r, which)[name] for r in rows]
                means[step][name] = None if None in values else sum(values) / len(values)  # type: ignore[arg-type]
        return means

    def deltas(self, which: str) -> dict[str, float | None]:
        """Last step minus first step, per aggregate (None with fewer than two steps)."""
        means = self.step_means(which)
        if len(means) < 2:
            return dict.fromkeys(AGGREGATE_NAMES)
        first, last = means[min(means)], means[max(means)]
        return {
            n: None if first[n] is None or last[n] is None else last[n] - first[n] for n in AGGREGATE_NAMES
        }


def aggregates(counts: Mapping[str, tuple[int, int]]) -> dict[str, float | None]:
    values: dict[str, float | None] = {}
    for name in AGGREGATE_NAMES:
        try:
            values[name] = aggregate_value(name, counts)
        except ContractError:
            values[name] = None
    return values


def count_pass(folder: Path, flagged: set[tuple[str, str]]) -> tuple[Counts, Counts, dict[str, dict[str, int | None]]]:
    """(full, unflagged) counts of one pass folder, and its counts of `count_verdicts`. Raises ContractError
    naming the bad file and line."""
    request = folder / REQUEST_FILE
    # A pass folder without request.json predates it; the evaluation's default then applied.
    counted_wrong = read_request(request).overlong_counted_wrong if request.is_file() else True
    outcomes = read_outcomes(folder / OUTCOMES_FILE)
    # A category whose items are all flagged stays in the unflagged counts with total 0: its aggregates become n/a.
    return (count_outcomes(outcomes, counted_wrong), count_outcomes(outcomes, counted_wrong, leave_out=flagged),
            count_verdicts(outcomes))


def _csv_rows(run_dir: Path, problems: list[str]) -> dict[tuple[int, int], dict[str, BfclRow]] | None:
    path = run_dir / BFCL_BY_CATEGORY
    if not path.is_file():
        return None
    try:
        rows = read_bfcl_by_category(path)
    except ContractError as err:
        problems.append(f"{path} not compared: {err}")
        return None
    table: dict[tuple[int, int], dict[str, BfclRow]] = {}
    for row in rows:
        table.setdefault((row.step, row.pass_index), {})[row.category] = row
    return table


def _verdict_differences(verdicts: dict[str, dict[str, int | None]], rows: Mapping[str, BfclRow]) -> list[str]:
    """'category column: outcomes N, CSV M' wherever both measured a count of `VERDICT_COLUMNS` and differ."""
    return [f"{category} {column}: outcomes {counts[column]}, CSV {rows[category].measured(column)}"
            for category, counts in verdicts.items() if category in rows for column in VERDICT_COLUMNS
            if None not in (counts[column], rows[category].measured(column))
            and counts[column] != rows[category].measured(column)]


def recompute(run_dir: Path, flagged: set[tuple[str, str]]) -> Robustness:
    """Aggregates per (step, pass) with and without the flagged (category, id) items."""
    result = Robustness()
    csv_rows = _csv_rows(run_dir, result.problems)
    csv_counts = None if csv_rows is None else {
        key: {c: (r.correct, r.total) for c, r in rows.items()} for key, rows in csv_rows.items()}
    folders = sorted(
        (int(m[1]), int(m[2]), p)
        for p in (run_dir / "passes").glob("step_*_pass_*")
        if (m := PASS_FOLDER.match(p.name)) and (p / OUTCOMES_FILE).is_file()
    )
    for step, pass_index, folder in folders:
        try:
            full, kept, verdicts = count_pass(folder, flagged)
        except (ContractError, OSError) as err:
            log.warning("pass left out: %s", err)
            result.problems.append(f"step {step} pass {pass_index} left out: {err}")
            continue
        if csv_counts is not None and csv_counts.get((step, pass_index)) != full:
            result.problems.append(
                f"step {step} pass {pass_index}: outcomes.jsonl counts differ from "
                f"{BFCL_BY_CATEGORY} ({csv_counts.get((step, pass_index))} there)"
            )
        differences = _verdict_differences(verdicts, (csv_rows or {}).get((step, pass_index), {}))
        if differences:
            result.problems.append(f"step {step} pass {pass_index}: outcomes.jsonl's truncated and overlong counts "
                                   f"differ from {BFCL_BY_CATEGORY} ({'; '.join(differences[:5])})")
        result.passes.append(
            PassAggregates(
                step,
                pass_index,
                aggregates(full),
                aggregates(kept),
                sum(t for _, t in full.values()),
                sum(t for _, t in kept.values()),
            )
        )
    return result
