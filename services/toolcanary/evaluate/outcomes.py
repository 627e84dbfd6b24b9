"""Per-item outcomes and the per-category rows of one pass, from its results and score files.

An item's outcome is "correct" or BFCL's error type; items over the served context (guard 4) get
"overlong" and, depending on the pass's policy, count as wrong or leave the total. BFCL would score an
overlong irrelevance item as a correct abstention; the outcome here overrides that.

    python -c "from toolcanary.evaluate.outcomes import build_outcomes; help(build_outcomes)"
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from toolcanary.contract.csv_schemas import BfclRow
from toolcanary.evaluate.result_files import OVERLONG_ERROR, classify
from toolcanary.evaluate.score_files import CategoryScore

CORRECT = "correct"


@dataclass(frozen=True)
class Outcome:
    category: str
    id: str
    outcome: str


def build_outcomes(
    ids: dict[str, list[str]], results: dict[str, dict[str, dict]], scores: dict[str, CategoryScore],
) -> list[Outcome]:
    """One outcome per requested item, in request order."""
    outcomes = []
    for category, expected in ids.items():
        failed = scores[category].failed
        for item in expected:
            if classify(results[category][item]) == OVERLONG_ERROR:
                outcomes.append(Outcome(category, item, OVERLONG_ERROR))
            else:
                outcomes.append(Outcome(category, item, failed.get(item, CORRECT)))
    return outcomes


def count_rows(step: int, pass_index: int, outcomes: list[Outcome], overlong_counted_wrong: bool) -> list[BfclRow]:
    """Raw correct/total per category, in the order categories were requested."""
    tallies: dict[str, list[int]] = {}
    for outcome in outcomes:
        tally = tallies.setdefault(outcome.category, [0, 0])
        if outcome.outcome == OVERLONG_ERROR and not overlong_counted_wrong:
            continue
        tally[0] += outcome.outcome == CORRECT
        tally[1] += 1
    return [BfclRow(step, pass_index, c, correct, total) for c, (correct, total) in tallies.items()]


def error_counts(outcomes: list[Outcome]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for outcome in outcomes:
        if outcome.outcome != CORRECT:
            counts[outcome.outcome] = counts.get(outcome.outcome, 0) + 1
    return dict(sorted(counts.items()))


def write_outcomes(path: Path, outcomes: list[Outcome]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json.dumps(o.__dict__) + "\n" for o in outcomes))
    tmp.replace(path)


def read_outcomes(path: Path) -> list[Outcome]:
    return [Outcome(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
