"""The two CSVs every published number is recomputed from, with strict readers and an appender.

- `bfcl_by_category.csv`: one row per (step, pass, category) with the raw `correct` and `total` (BFCL's
  verdicts, with the evaluation's overrides: an answer cut at the output cap counts wrong, an item over the
  served context counts wrong or leaves the total by the pass's rule), and beside them:
  `correct_unparsed`: how many of the correct items answered with call markup the server did not parse
  (toolcanary.evaluate.answers), which BFCL credits as abstentions (contract 1.5);
  `truncated` and `truncated_bfcl_correct`: the items cut at the output cap, and how many of them BFCL's own
  scoring counts correct; `overlong` and `overlong_bfcl_correct`: the items over the served context (in
  `total` or not, by the pass's rule), and how many of them BFCL's own scoring counts correct;
  `correct_empty_reasoning`: the correct items whose answer held no content but the server generated tokens
  (a reasoning trace alone), which BFCL credits as abstentions (all five contract 1.10). Files from before a
  column lack it and an empty cell marks a pass that did not measure it: both read as None, "not measured",
  never 0.
- `train_metrics.csv`: one row per training step, columns `TRAIN_METRICS_COLUMNS`.
- `warm_start.csv` (CPU run): one row per supervised warm-start step, columns `WARM_START_COLUMNS`.

All three are append-only files under the rule of `append_only`: a torn last row is skipped with a warning,
a torn row a writer fenced off is skipped with a warning, any other unreadable row is refused. Extra columns
are allowed. Readers stop at the first bad row with the file, the line and what was expected.

Cells are strict so that no bad file turns into a silently different number: integers are plain digits
(`10`, never `1_0`, ` 10`, `+10` or `10.0`), decimals are plain decimal notation, and a number that is not
finite (`inf`, or `1e999`, which overflows to it) is refused; in train_metrics.csv an empty cell or `nan`
stands for "not measured". Text that is not UTF-8 and fields over the csv module's size limit are refused too.
"""

from __future__ import annotations

import csv
import difflib
import math
import re
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass

from toolcanary.contract.append_only import append_text, read_lines, refused_line
from toolcanary.contract.bfcl import BY_NAME
from toolcanary.contract.errors import ContractError
from toolcanary.contract.simulator_api import ABORT_CAUSES

BFCL_BY_CATEGORY = "bfcl_by_category.csv"
TRAIN_METRICS = "train_metrics.csv"
WARM_START = "warm_start.csv"
WARM_START_COLUMNS = ("step", "loss")
BFCL_COLUMNS = ("step", "pass", "category", "correct", "total")
CORRECT_UNPARSED = "correct_unparsed"
# Contract 1.10: the items whose outcome overrides BFCL's verdict, with BFCL's own verdict on them, and the
# correct items whose answer was a reasoning trace alone. The analysis reads them by these names.
TRUNCATED_COLUMNS = ("truncated", "truncated_bfcl_correct")
OVERLONG_COLUMNS = ("overlong", "overlong_bfcl_correct")
CORRECT_EMPTY_REASONING = "correct_empty_reasoning"
VERDICT_COLUMNS = (*TRUNCATED_COLUMNS, *OVERLONG_COLUMNS, CORRECT_EMPTY_REASONING)
# The counts beside correct/total, each None where not measured.
MEASURED_COLUMNS = (CORRECT_UNPARSED, *VERDICT_COLUMNS)
# What the evaluation writes; readers require only BFCL_COLUMNS, so files from before 1.5 and 1.10 still read.
BFCL_WRITTEN_COLUMNS = (*BFCL_COLUMNS, *MEASURED_COLUMNS)
# What the policy update did (measured by the CPU run; verl logs its own under `actor/`): the clipped loss,
# the share of clipped tokens, the gradient norm before clipping and the mean |advantage|.
UPDATE_COLUMNS = ("pg_loss", "pg_clipfrac", "grad_norm", "advantage_abs_mean")
# The training-side canary (`toolcanary.train.canary`, contract 1.10): the tool-call share's shift from the run's
# first steps, and 1 where it was beyond the set threshold; empty until the run has steps enough to measure it.
CANARY_COLUMNS = ("tool_call_share_shift", "tool_call_canary")
TRAIN_METRICS_COLUMNS = (
    "step",
    "reward_mean",
    "reward_std",
    "aborted_frac",
    "curriculum_level",
    "tool_call_turns_mean",
    "response_turns_mean",
    "tool_call_share",
    "no_call_episode_frac",
    "tool_turns_mean",
    "user_turns_mean",
    "tool_reward_mean",
    "user_reward_mean",
    "invalid_call_frac",
    "response_length_mean",
    "num_turns_mean",
    "kl",
    "entropy",
    *UPDATE_COLUMNS,
    "simulator_tokens",
    "step_seconds",
    # Aborted episodes of the step by cause (they sum to aborted_frac x episodes): which fault is eating the
    # step. The causes are those of `simulator_api.AbortCause`.
    *(f"aborted_{cause}" for cause in ABORT_CAUSES),
    *CANARY_COLUMNS,
)
ABORT_COLUMNS = tuple(f"aborted_{cause}" for cause in ABORT_CAUSES)


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class BfclRow:
    """One row of `bfcl_by_category.csv`, and of a pass's `counts.json` (`pass_files`) that holds the rows the
    pass appends: one type for both, validated wherever one is made, so the two files cannot drift apart."""

    step: Annotated[int, Field(ge=0)]
    pass_index: Annotated[int, Field(ge=1)]
    category: str
    correct: Annotated[int, Field(ge=0)]
    total: Annotated[int, Field(ge=0)]
    correct_unparsed: Annotated[int | None, Field(ge=0)] = None
    """Correct items whose answer held unparsed call markup; None: not measured."""
    truncated: Annotated[int | None, Field(ge=0)] = None
    """Items with a response cut at the output cap (counted wrong, inside `total`); None: not measured."""
    truncated_bfcl_correct: Annotated[int | None, Field(ge=0)] = None
    """Of `truncated`, the items BFCL's own scoring counts correct; None: not measured."""
    overlong: Annotated[int | None, Field(ge=0)] = None
    """Items over the served context, inside `total` (counted wrong) or left out of it by the pass's rule;
    None: not measured."""
    overlong_bfcl_correct: Annotated[int | None, Field(ge=0)] = None
    """Of `overlong`, the items BFCL's own scoring counts correct; None: not measured."""
    correct_empty_reasoning: Annotated[int | None, Field(ge=0)] = None
    """Correct items whose answer had no content although the server generated tokens; None: not measured."""

    def measured(self, column: str) -> int | None:
        """The count of one of `MEASURED_COLUMNS` (None: not measured)."""
        if column not in MEASURED_COLUMNS:
            raise ValueError(f"one of {MEASURED_COLUMNS}, not {column!r}")
        return getattr(self, column)


# Steps, passes and item counts: a GPU run has 200 steps and BFCL V4 a few thousand items. A larger value is
# a damaged file, and float64 (the analysis) cannot tell apart integers past 2**53.
MAX_CSV_INTEGER = 10**9
_INTEGER = re.compile(r"[0-9]{1,10}")
_DECIMAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_NOT_MEASURED = ("", "nan", "NaN")


def _header(path: Path, fieldnames: list[str] | None, required: tuple[str, ...]) -> None:
    repeated = sorted({c for c in fieldnames or [] if fieldnames.count(c) > 1})
    if repeated:  # a reader would keep the last one's values without a word
        raise ContractError(f"{path}: header", "each column once", f"{fieldnames} ({repeated} more than once)",
                            "Remove the repeated column (the file was edited or written by another tool)")
    missing = [c for c in required if c not in (fieldnames or [])]
    if missing:
        raise ContractError(
            f"{path}: header", f"columns {list(required)}", f"{fieldnames} (missing {missing})"
        )


def _records(path: Path, required: tuple[str, ...]):
    """(line number, {column: value}) of every whole row of an append-only CSV, header checked first.

    A row with another number of fields than the header is a broken line in the middle (torn lines at the
    end, and those a writer fenced off, never get here): it is refused.
    """
    lines = read_lines(path).lines
    fieldnames = _fields(path, *lines[0]) if lines else None
    _header(path, fieldnames, required)
    for number, text in lines[1:]:
        values = _fields(path, number, text)
        if len(values) != len(fieldnames):
            raise refused_line(path, number, f"a row of {len(fieldnames)} comma-separated fields", text)
        yield number, dict(zip(fieldnames, values, strict=True))


def _fields(path: Path, number: int, text: str) -> list[str]:
    """One CSV line split into its fields; text that was not UTF-8 (decoded to U+FFFD) or a field over the
    csv module's size limit is refused with its line number."""
    if "\ufffd" in text:
        raise refused_line(path, number, "UTF-8 text", text[:200])
    try:
        return next(csv.reader([text]))
    except csv.Error as err:
        raise refused_line(path, number, f"a CSV row ({err})", text[:200]) from None


def _int(path: Path, line: int, column: str, value: str | None) -> int:
    if value is None or not _INTEGER.fullmatch(value) or int(value) > MAX_CSV_INTEGER:
        raise ContractError(f"{path}: line {line}, column {column!r}",
                            f"a non-negative integer in plain digits, at most {MAX_CSV_INTEGER:,}",
                            repr(value)[:200], "Write the count as digits only, e.g. 10")
    return int(value)


def _optional_int(path: Path, line: int, column: str, value: str | None) -> int | None:
    """An integer, or None for a column the file lacks or an empty cell (not measured)."""
    return None if value is None or value == "" else _int(path, line, column, value)


def _float(path: Path, line: int, column: str, value: str | None) -> float:
    """A finite decimal, or nan for an empty cell or `nan` (not measured)."""
    if value is None or value in _NOT_MEASURED:
        return math.nan
    number = float(value) if _DECIMAL.fullmatch(value) else math.nan
    if not _DECIMAL.fullmatch(value) or not math.isfinite(number):
        raise ContractError(f"{path}: line {line}, column {column!r}",
                            "a number: a finite decimal (or empty / nan when not measured)", repr(value)[:200],
                            "Non-finite or oddly written values would change the figures silently; fix the row")
    return number


def read_bfcl_by_category(path: str | Path, complete: bool = True) -> list[BfclRow]:
    """Read and check `bfcl_by_category.csv`: known categories, counts that make sense, no duplicates, and
    every (step, pass) holding the same set of categories.

    `complete=False` leaves out that last check, for the evaluation client only: it must see a pass whose last
    rows a crash tore off in order to append them again. Every reader of results keeps the default.
    """
    path = Path(path)
    if not path.is_file():
        raise ContractError(str(path), f"a {BFCL_BY_CATEGORY} file", "no such file")
    rows: list[BfclRow] = []
    seen: dict[tuple[int, int, str], int] = {}
    for line, record in _records(path, BFCL_COLUMNS):
        where = f"{path}: line {line}"
        category = (record.get("category") or "").strip()
        if category not in BY_NAME:
            near = difflib.get_close_matches(category, list(BY_NAME), n=1)
            raise ContractError(
                f"{where}, column 'category'", "a BFCL V4 category name", repr(category),
                f"Did you mean {near[0]!r}?" if near else f"Known names: {', '.join(BY_NAME)}",
            )
        pass_index = _int(path, line, "pass", record.get("pass"))
        if pass_index < 1:
            raise ContractError(
                f"{where}, column 'pass'", "a 1-based pass index", repr(record.get("pass"))
            )
        row = BfclRow(
            step=_int(path, line, "step", record.get("step")),
            pass_index=pass_index,
            category=category,
            correct=_int(path, line, "correct", record.get("correct")),
            total=_int(path, line, "total", record.get("total")),
            **{c: _optional_int(path, line, c, record.get(c)) for c in MEASURED_COLUMNS},
        )
        if row.correct > row.total:
            raise ContractError(where, "correct <= total", f"correct={row.correct} > total={row.total}")
        _check_measured(where, row)
        key = (row.step, row.pass_index, row.category)
        if key in seen:
            raise ContractError(
                where, "one row per (step, pass, category)", f"a repeat of line {seen[key]}"
            )
        seen[key] = line
        rows.append(row)
    if not rows:
        raise ContractError(str(path), "at least one data row", "none")
    if complete:
        check_complete_passes(rows, str(path))
    return rows


def _check_measured(where: str, row: BfclRow) -> None:
    """The counts beside correct/total must fit inside them: a count of items larger than the items it is
    part of is a damaged or hand-edited row."""
    def refuse(expected: str, got: str) -> None:
        raise ContractError(where, expected, got, "Restore the row as the evaluation wrote it, or re-score the pass")

    for column, within in ((CORRECT_UNPARSED, "correct"), (CORRECT_EMPTY_REASONING, "correct"),
                           ("truncated", "total"), ("truncated_bfcl_correct", "truncated"),
                           ("overlong_bfcl_correct", "overlong")):
        count, limit = getattr(row, column), getattr(row, within)
        if count is not None and limit is None:
            refuse(f"{within} measured wherever {column} is", f"{column}={count} with {within} empty")
        if count is not None and count > limit:
            refuse(f"{column} <= {within}", f"{column}={count} > {within}={limit}")
    if row.correct_unparsed is not None and row.correct_empty_reasoning is not None and \
            row.correct_unparsed + row.correct_empty_reasoning > row.correct:
        # An answer is one kind: unparsed call markup, or nothing but a reasoning trace.
        refuse(f"{CORRECT_UNPARSED} + {CORRECT_EMPTY_REASONING} <= correct",
               f"{row.correct_unparsed} + {row.correct_empty_reasoning} > correct={row.correct}")
    if row.truncated is not None and row.correct + row.truncated > row.total:
        # A truncated item counts wrong, so it sits in the total beside the correct ones.
        refuse("correct + truncated <= total (a truncated item counts wrong)",
               f"{row.correct} + {row.truncated} > total={row.total}")


def check_complete_passes(rows: list[BfclRow], where: str) -> None:
    """Every (step, pass) must hold every category that appears anywhere in the file."""
    every = sorted({r.category for r in rows})
    by_pass: dict[tuple[int, int], set[str]] = {}
    for row in rows:
        by_pass.setdefault((row.step, row.pass_index), set()).add(row.category)
    for (step, pass_index), present in sorted(by_pass.items()):
        missing = sorted(set(every) - present)
        if missing:
            raise ContractError(
                f"{where}: step {step}, pass {pass_index}",
                f"all categories of the file ({len(every)})",
                f"{missing} missing",
                "Re-run that pass or remove its rows",
            )


def append_bfcl_rows(path: str | Path, rows: list[BfclRow], lock: AbstractContextManager | None = None) -> None:
    """Append rows in one write (the header first into a file without one), then fsync.

    `lock`: the exclusive lock on `append_only.lock_path(path)`, held around the header decision and the
    write; the evaluation always passes one, since two passes can finish at once (None: a single writer).
    A file written before contract 1.10 (without the columns of `MEASURED_COLUMNS`) is refused rather than
    mixed with new rows.
    """
    lines = [",".join([f"{r.step},{r.pass_index},{r.category},{r.correct},{r.total}",
                       *("" if r.measured(c) is None else str(r.measured(c)) for c in MEASURED_COLUMNS)])
             for r in rows]
    append_text(path, "".join(line + "\n" for line in lines), header=",".join(BFCL_WRITTEN_COLUMNS), lock=lock)


def read_train_metrics(path: str | Path) -> list[dict[str, float]]:
    """Read `train_metrics.csv`: every required column, finite decimals (empty or nan: not measured), unique
    steps. The step stays the integer that was written (a float would round steps past 2**53)."""
    path = Path(path)
    if not path.is_file():
        raise ContractError(str(path), f"a {TRAIN_METRICS} file", "no such file")
    rows: list[dict[str, float]] = []
    steps: dict[int, int] = {}
    # Files written before contracts 1.9 and 1.10 lack the update and the canary columns: "not measured".
    required = tuple(c for c in TRAIN_METRICS_COLUMNS if c not in (*UPDATE_COLUMNS, *CANARY_COLUMNS))
    for line, record in _records(path, required):
        step = _int(path, line, "step", record.get("step"))
        if step in steps:
            raise ContractError(
                f"{path}: line {line}", "one row per step", f"a repeat of line {steps[step]}"
            )
        steps[step] = line
        row: dict[str, float] = {"step": step}
        for column in TRAIN_METRICS_COLUMNS[1:]:
            row[column] = _float(path, line, column, record.get(column))
        rows.append(row)
    if not rows:
        raise ContractError(str(path), "at least one data row", "none")
    return rows
