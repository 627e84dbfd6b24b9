"""Per-item outcomes of a run's scored passes, read from the pass folders and checked against the CSV.

The evaluation writes one folder per pass beside `bfcl_by_category.csv`, `DIR/passes/step_NNNN_pass_P/`, holding
`request.json` and `outcomes.jsonl` (`toolcanary.contract.pass_files`). The item-level analyses
(`toolcanary.analysis.items`, `toolcanary.analysis.stability`) read them through this module only:

- only passes whose rows are in the CSV count (a folder without rows is a pass that was refused or is still
  running);
- each counted pass's outcomes, counted by the contract's one rule `count_outcomes` with the pass's own
  `overlong_counted_wrong`, must give exactly its rows in the CSV, or the pass is refused: item-level numbers
  that disagree with the table would be two different results;
- an item enters a pass when that rule counts it: an "overlong" outcome of a pass scored with
  `overlong_counted_wrong=False` is outside the pass's total, and outside its items here too.

    run = load_bfcl(data / "bfcl_by_category.csv")
    step = RunItems(run, data).step(200)          # every pass of step 200, in pass order
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from toolcanary.analysis.data import BfclRun
from toolcanary.contract.csv_schemas import BFCL_BY_CATEGORY
from toolcanary.contract.errors import ContractError
from toolcanary.contract.pass_files import (
    ANSWER_KINDS,
    CORRECT,
    OUTCOMES_FILE,
    OVERLONG,
    REQUEST_FILE,
    ItemOutcome,
    count_outcomes,
    read_outcomes,
    read_request,
)

log = logging.getLogger(__name__)

PASSES_DIR = "passes"
UNCLASSIFIED = "unclassified"
"""How an answer kind of None (a pass from before contract 1.5) is written in the tables."""
ItemKey = tuple[str, str]
"""(category, id): an item of the BFCL bank."""


def pass_folder(data: Path, step: int, pass_index: int) -> Path:
    """Where the evaluation writes the files of one pass (the layout `toolcanary.contract.volumes` registers)."""
    return data / PASSES_DIR / f"step_{step:04d}_pass_{pass_index}"


@dataclass(frozen=True)
class PassItems:
    """The counted items of one pass and their outcomes."""

    step: int
    pass_index: int
    outcomes: Mapping[ItemKey, ItemOutcome]

    def correct(self, item: ItemKey) -> bool:
        return self.outcomes[item].outcome == CORRECT


@dataclass(frozen=True)
class StepItems:
    """Every counted pass of one step, in ascending pass index."""

    step: int
    passes: tuple[PassItems, ...]

    def items(self, category: str) -> list[str]:
        """The ids of `category` counted in every pass of the step, ascending."""
        common = set.intersection(*({i for c, i in p.outcomes if c == category} for p in self.passes))
        return sorted(common)

    @property
    def categories(self) -> set[str]:
        return {c for p in self.passes for c, _ in p.outcomes}


class RunItems:
    """The pass folders of one run, read on demand (each step once) and checked against the run's CSV."""

    def __init__(self, run: BfclRun, data: Path) -> None:
        self.run, self.data = run, data
        self._steps: dict[int, StepItems] = {}

    def scored_steps(self) -> list[int]:
        return [int(s) for s in self.run.steps]

    def pass_indices(self, step: int) -> tuple[int, ...]:
        return self.run.pass_indices[self._position(step)]

    def step(self, step: int) -> StepItems:
        if step not in self._steps:
            position = self._position(step)
            self._check_passes_folder()
            passes = tuple(self._read_pass(step, p, self.run.counts[position][j])
                           for j, p in enumerate(self.run.pass_indices[position]))
            self._steps[step] = StepItems(step, passes)
        return self._steps[step]

    def _position(self, step: int) -> int:
        scored = self.scored_steps()
        if step not in scored:
            raise ContractError(
                f"{self.run.path}: steps", f"a step scored from the baseline on ({_list(scored)})",
                f"step {step}", "Name scored steps with --steps A B, or move the baseline with --baseline-step",
            )
        return scored.index(step)

    def _check_passes_folder(self) -> None:
        folder = self.data / PASSES_DIR
        if not folder.is_dir():
            raise ContractError(
                str(folder), "the run's pass folders, passes/step_NNNN_pass_P/ with request.json and "
                             f"outcomes.jsonl, one per scored pass, beside {BFCL_BY_CATEGORY}",
                "no such folder",
                "--items and --stability need each item's outcome, which only the pass folders hold; copy the "
                "run's passes/ folder along with its CSVs (the evaluation writes it), or leave out those flags",
            )

    def _read_pass(self, step: int, pass_index: int, rows: Mapping[str, tuple[int, int]]) -> PassItems:
        folder = pass_folder(self.data, step, pass_index)
        for name in (REQUEST_FILE, OUTCOMES_FILE):
            if not (folder / name).is_file():
                raise ContractError(
                    str(folder / name), f"the {name} of step {step} pass {pass_index}, whose rows are in "
                                        f"{BFCL_BY_CATEGORY}", "no such file",
                    "Restore the pass folder, or re-score the pass (move its folder away and its rows out of "
                    "the CSV)",
                )
        request = read_request(folder / REQUEST_FILE)
        if (request.step, request.pass_index) != (step, pass_index):
            raise ContractError(
                str(folder / REQUEST_FILE), f"the request of step {step} pass {pass_index} (the folder's name)",
                f"step {request.step} pass {request.pass_index}", "The folder was renamed or copied; restore it",
            )
        outcomes = read_outcomes(folder / OUTCOMES_FILE)
        counted = count_outcomes(outcomes, request.overlong_counted_wrong)
        if counted != dict(rows):
            raise ContractError(
                str(folder / OUTCOMES_FILE),
                f"outcomes that count (correct/total per category) to the rows of step {step} pass {pass_index} "
                f"in {self.run.path}", "; ".join(_differences(counted, rows)),
                "The numbers must agree: the pass folder and the CSV come from different scorings. Re-score the "
                "pass (move its folder away and its rows out of the CSV), or leave out --items and --stability",
            )
        items: dict[ItemKey, ItemOutcome] = {}
        for outcome in outcomes:
            key = (outcome.category, outcome.id)
            if key in items:
                raise ContractError(
                    str(folder / OUTCOMES_FILE), "one line per item", f"{key[1]!r} of {key[0]} twice",
                    "Re-score the pass",
                )
            # Outside the pass's total (overlong, not counted wrong): outside its items too.
            if outcome.outcome != OVERLONG or request.overlong_counted_wrong:
                items[key] = outcome
        log.info("read %d items of step %d pass %d from %s", len(items), step, pass_index, folder)
        return PassItems(step, pass_index, items)


def kinds_seen(answers: tuple[str | None, ...]) -> str:
    """The distinct answer kinds of an item's passes, in the contract's order, joined by '|'."""
    seen = set(answers)
    return "|".join([k for k in ANSWER_KINDS if k in seen] + ([UNCLASSIFIED] if None in seen else []))


def _differences(counted: Mapping[str, tuple[int, int]], rows: Mapping[str, tuple[int, int]]) -> list[str]:
    def show(value: tuple[int, int] | None) -> str:
        return "no rows" if value is None else f"{value[0]}/{value[1]}"

    return [f"{c}: outcomes {show(counted.get(c))}, CSV {show(rows.get(c))}"
            for c in sorted(set(counted) | set(rows)) if counted.get(c) != rows.get(c)]


def _list(steps: list[int]) -> str:
    return ", ".join(map(str, steps[:12])) + (", ..." if len(steps) > 12 else "")
