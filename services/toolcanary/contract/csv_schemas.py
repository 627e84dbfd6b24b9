"""The two CSVs every published number is recomputed from, with strict readers and an appender.

- `bfcl_by_category.csv`: one row per (step, pass, category) with raw `correct` and `total`.
- `train_metrics.csv`: one row per training step, columns `TRAIN_METRICS_COLUMNS`.
- `warm_start.csv` (CPU run): one row per supervised warm-start step, columns `WARM_START_COLUMNS`.

Extra columns are allowed. Readers stop at the first bad row with the file, the line and what was expected.
"""

from __future__ import annotations

import csv
import difflib
import math
import os
from dataclasses import dataclass
from pathlib import Path

from toolcanary.contract.bfcl import BY_NAME
from toolcanary.contract.errors import ContractError

BFCL_BY_CATEGORY = "bfcl_by_category.csv"
TRAIN_METRICS = "train_metrics.csv"
WARM_START = "warm_start.csv"
WARM_START_COLUMNS = ("step", "loss")
BFCL_COLUMNS = ("step", "pass", "category", "correct", "total")
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
    "simulator_tokens",
    "step_seconds",
)


@dataclass(frozen=True)
class BfclRow:
    step: int
    pass_index: int
    category: str
    correct: int
    total: int


def _header(path: Path, reader: csv.DictReader, required: tuple[str, ...]) -> None:
    missing = [c for c in required if c not in (reader.fieldnames or [])]
    if missing:
        raise ContractError(
            f"{path}: header", f"columns {list(required)}", f"{reader.fieldnames} (missing {missing})"
        )


def _int(path: Path, line: int, column: str, value: str | None) -> int:
    try:
        number = int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ContractError(
            f"{path}: line {line}, column {column!r}", "a non-negative integer", repr(value)
        ) from None
    if number < 0:
        raise ContractError(f"{path}: line {line}, column {column!r}", "a non-negative integer", repr(value))
    return number


def read_bfcl_by_category(path: str | Path) -> list[BfclRow]:
    """Read and check `bfcl_by_category.csv`: known categories, counts that make sense, no duplicates, and
    every (step, pass) holding the same set of categories."""
    path = Path(path)
    if not path.is_file():
        raise ContractError(str(path), f"a {BFCL_BY_CATEGORY} file", "no such file")
    rows: list[BfclRow] = []
    seen: dict[tuple[int, int, str], int] = {}
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        _header(path, reader, BFCL_COLUMNS)
        for line, record in enumerate(reader, start=2):
            where = f"{path}: line {line}"
            category = (record.get("category") or "").strip()
            if category not in BY_NAME:
                near = difflib.get_close_matches(category, list(BY_NAME), n=1)
                raise ContractError(
                    f"{where}, column 'category'", "a BFCL V4 category name", repr(category),
                    f"Did you mean {near[0]!r}?" if near else f"Known names: {', '.join(BY_NAME)}",
                )
            row = BfclRow(
                step=_int(path, line, "step", record.get("step")),
                pass_index=_int(path, line, "pass", record.get("pass")),
                category=category,
                correct=_int(path, line, "correct", record.get("correct")),
                total=_int(path, line, "total", record.get("total")),
            )
            if row.pass_index < 1:
                raise ContractError(
                    f"{where}, column 'pass'", "a 1-based pass index", repr(record.get("pass"))
                )
            if row.correct > row.total:
                raise ContractError(where, "correct <= total", f"correct={row.correct} > total={row.total}")
            key = (row.step, row.pass_index, row.category)
            if key in seen:
                raise ContractError(
                    where, "one row per (step, pass, category)", f"a repeat of line {seen[key]}"
                )
            seen[key] = line
            rows.append(row)
    if not rows:
        raise ContractError(str(path), "at least one data row", "none")
    check_complete_passes(rows, str(path))
    return rows


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


def append_bfcl_rows(path: str | Path, rows: list[BfclRow]) -> None:
    """Append rows (writing the header to a new file) in one write, then fsync."""
    path = Path(path)
    new = not path.exists() or path.stat().st_size == 0
    lines = [",".join(BFCL_COLUMNS)] if new else []
    lines += [f"{r.step},{r.pass_index},{r.category},{r.correct},{r.total}" for r in rows]
    with path.open("a", newline="") as handle:
        handle.write("\n".join(lines) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def read_train_metrics(path: str | Path) -> list[dict[str, float]]:
    """Read `train_metrics.csv`: every required column, numeric values (nan allowed), unique steps."""
    path = Path(path)
    if not path.is_file():
        raise ContractError(str(path), f"a {TRAIN_METRICS} file", "no such file")
    rows: list[dict[str, float]] = []
    steps: dict[int, int] = {}
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        _header(path, reader, TRAIN_METRICS_COLUMNS)
        for line, record in enumerate(reader, start=2):
            step = _int(path, line, "step", record.get("step"))
            if step in steps:
                raise ContractError(
                    f"{path}: line {line}", "one row per step", f"a repeat of line {steps[step]}"
                )
            steps[step] = line
            row: dict[str, float] = {"step": float(step)}
            for column in TRAIN_METRICS_COLUMNS[1:]:
                value = record.get(column)
                try:
                    row[column] = float(value) if value not in ("", None) else math.nan
                except ValueError:
                    raise ContractError(
                        f"{path}: line {line}, column {column!r}", "a number (or empty / nan)", repr(value)
                    ) from None
            rows.append(row)
    if not rows:
        raise ContractError(str(path), "at least one data row", "none")
    return rows
