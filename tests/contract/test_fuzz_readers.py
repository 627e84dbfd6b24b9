"""Fuzzing every CSV, manifest, pass-file and training-file reader of the contract with hypothesis.

Two properties: whatever bytes a file holds, a reader returns or raises ContractError (never another
exception); and a valid CSV with one cell replaced either reads back with that cell's canonical value (an
integer written in plain digits, a decimal that parses to exactly the number read) and every other cell
unchanged, or raises ContractError. No file turns silently into other numbers.

Run: .venvs/dev/bin/python -m pytest tests/contract/test_fuzz_readers.py -q
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from toolcanary.contract.csv_schemas import (
    BFCL_COLUMNS,
    TRAIN_METRICS_COLUMNS,
    read_bfcl_by_category,
    read_train_metrics,
)
from toolcanary.contract.errors import ContractError
from toolcanary.contract.manifests import read_checkpoint_manifest, read_published
from toolcanary.contract.pass_files import read_counts, read_failure, read_outcomes, read_request, read_sample
from toolcanary.contract.training_files import read_curriculum, read_episode_lines, read_held_out

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CELLS = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["1_0", " 10", "+1", "10.0", "1e999", "-inf", "inf", "nan", "NaN", "0x10", "١٠", "-0",
                     "1e3", "0.5", "", "\ufffd", "9" * 40, "-1"]),
    st.integers(-5, 10**6).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
BFCL_ROWS = [(0, 1, "irrelevance", 20, 22), (0, 1, "simple_python", 30, 40),
             (10, 1, "irrelevance", 21, 22), (10, 1, "simple_python", 31, 40)]


def _write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


def _read(reader, path: Path):
    try:
        return reader(path)
    except ContractError:
        return None


def _csv(header, rows) -> str:
    return "\n".join([",".join(header), *(",".join(map(str, r)) for r in rows)]) + "\n"


@FUZZ
@given(row=st.integers(0, len(BFCL_ROWS) - 1), column=st.integers(0, len(BFCL_COLUMNS) - 1), cell=CELLS)
def test_one_changed_bfcl_cell_reads_back_as_written_or_is_refused(row, column, cell):
    rows = [list(r) for r in BFCL_ROWS]
    rows[row][column] = cell
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder), "bfcl_by_category.csv", _csv(BFCL_COLUMNS, rows).encode("utf-8", "surrogatepass"))
        got = _read(read_bfcl_by_category, path)
    if got is None:
        return
    assert len(got) == len(BFCL_ROWS)
    read = [(r.step, r.pass_index, r.category, r.correct, r.total) for r in got]
    for index, (original, back) in enumerate(zip(BFCL_ROWS, read, strict=True)):
        for position, (before, after) in enumerate(zip(original, back, strict=True)):
            if (index, position) == (row, column):
                if position == 2:
                    assert after == cell.strip()
                else:
                    assert re.fullmatch("[0-9]+", cell) and int(cell) == after, (cell, after)
            else:
                assert before == after


@FUZZ
@given(step=st.integers(0, 2), column=st.sampled_from(TRAIN_METRICS_COLUMNS), cell=CELLS)
@example(step=0, column="step", cell="9" * 40)  # a step past 2**53 must not round
def test_one_changed_train_metrics_cell_reads_back_as_written_or_is_refused(step, column, cell):
    rows = [[s if c == "step" else 0.25 * (s + 1) for c in TRAIN_METRICS_COLUMNS] for s in range(3)]
    rows[step][TRAIN_METRICS_COLUMNS.index(column)] = cell
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder), "train_metrics.csv", _csv(TRAIN_METRICS_COLUMNS, rows).encode("utf-8", "surrogatepass"))
        got = _read(read_train_metrics, path)
    if got is None:
        return
    for s, back in enumerate(got):
        for c in TRAIN_METRICS_COLUMNS:
            value = back[c]
            if (s, c) == (step, column):
                if c == "step":
                    assert re.fullmatch("[0-9]+", cell) and int(cell) == value, (cell, value)
                elif math.isnan(value):
                    assert cell in ("", "nan", "NaN")
                else:
                    assert math.isfinite(value) and value == float(cell)
            else:
                assert value == (s if c == "step" else 0.25 * (s + 1))


READERS = {
    "bfcl_by_category.csv": read_bfcl_by_category,
    "train_metrics.csv": read_train_metrics,
    "published.jsonl": lambda path: read_published(path.parent),
    "manifest.json": lambda path: read_checkpoint_manifest(path.parent),
    "sample.json": read_sample,
    "request.json": read_request,
    "outcomes.jsonl": read_outcomes,
    "counts.json": read_counts,
    "failure.json": read_failure,
    "episodes.jsonl": read_episode_lines,
    "curriculum.json": read_curriculum,
    "held_out_answers.jsonl": read_held_out,
}
VALID_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@FUZZ
@given(name=st.sampled_from(sorted(READERS)), data=st.one_of(
    st.binary(max_size=300),
    VALID_JSON.map(lambda v: json.dumps(v).encode()),
    st.integers(1, 3000).map(lambda depth: b"[" * depth + b"]" * depth),
    st.sampled_from([b"\xff\xfe", b'{"a": 1e999}', b"step,pass\n1_0,1\n", b"x" * 200_000 + b"\n"]),
))
def test_every_reader_returns_or_raises_a_contract_error_on_any_bytes(name, data):
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder), name, data)
        try:
            READERS[name](path)
        except ContractError:
            pass
