"""The two CSV schemas: strict reading with errors that name the file, the line and what was expected.

Run: .venvs/dev/bin/python -m pytest tests/contract/test_csv_schemas.py -q
"""

import math

import pytest

from toolcanary.contract import (
    BFCL_COLUMNS,
    BFCL_WRITTEN_COLUMNS,
    TRAIN_METRICS_COLUMNS,
    BfclRow,
    ContractError,
    append_bfcl_rows,
    read_bfcl_by_category,
    read_train_metrics,
)
from toolcanary.contract.csv_schemas import CANARY_COLUMNS, MEASURED_COLUMNS, VERDICT_COLUMNS


def write(path, header, rows):
    path.write_text("\n".join([",".join(header)] + [",".join(map(str, r)) for r in rows]) + "\n")
    return path


def test_appended_rows_read_back_identically(tmp_path):
    path = tmp_path / "bfcl_by_category.csv"
    first = [BfclRow(0, 1, "irrelevance", 200, 240), BfclRow(0, 1, "simple_python", 300, 400)]
    second = [BfclRow(10, 1, "irrelevance", 190, 240), BfclRow(10, 1, "simple_python", 310, 400)]
    append_bfcl_rows(path, first)
    append_bfcl_rows(path, second)
    assert path.read_text().splitlines()[0] == ",".join(BFCL_WRITTEN_COLUMNS)
    assert read_bfcl_by_category(path) == first + second


@pytest.mark.parametrize(
    "row, message",
    [
        ((0, 1, "irrelevance", 241, 240), "correct <= total"),
        ((0, 1, "irrelevance", -1, 240), "non-negative integer"),
        ((0, 1, "irrelevance", 1.5, 240), "non-negative integer"),
        ((0, 1, "not_a_category", 1, 2), "BFCL V4 category"),
        ((0, 0, "irrelevance", 1, 2), "1-based"),
        (("x", 1, "irrelevance", 1, 2), "column 'step'"),
        ((2**53, 1, "irrelevance", 1, 2), "at most 1,000,000,000"),  # float64 would merge 2**53 and 2**53+1
        ((0, 1, "irrelevance", 1, "9" * 5000), "at most 1,000,000,000"),  # past Python's 4,300-digit int limit
    ],
)
def test_bad_rows_are_refused_with_file_and_line(tmp_path, row, message):
    path = write(tmp_path / "b.csv", BFCL_COLUMNS, [(0, 1, "simple_python", 1, 2), row])
    with pytest.raises(ContractError, match=message) as err:
        read_bfcl_by_category(path)
    assert f"{path}: line 3" in str(err.value)


def test_a_missing_column_names_the_header(tmp_path):
    path = write(tmp_path / "b.csv", ("step", "pass", "category", "correct"), [(0, 1, "irrelevance", 1)])
    with pytest.raises(ContractError, match="missing \\['total'\\]"):
        read_bfcl_by_category(path)


def test_a_column_named_twice_is_refused_rather_than_read_from_its_last_copy(tmp_path):
    path = write(tmp_path / "b.csv", BFCL_COLUMNS + ("correct",), [(0, 1, "irrelevance", 2, 2, 0)])
    with pytest.raises(ContractError, match="\\['correct'\\] more than once"):
        read_bfcl_by_category(path)


def test_a_pass_without_every_category_is_refused(tmp_path):
    rows = [(0, 1, "irrelevance", 1, 2), (0, 1, "simple_python", 1, 2), (10, 1, "irrelevance", 1, 2)]
    with pytest.raises(ContractError, match="step 10, pass 1.*simple_python"):
        read_bfcl_by_category(write(tmp_path / "b.csv", BFCL_COLUMNS, rows))


def test_duplicate_rows_are_refused(tmp_path):
    rows = [(0, 1, "irrelevance", 1, 2), (0, 1, "irrelevance", 1, 2)]
    with pytest.raises(ContractError, match="repeat of line 2"):
        read_bfcl_by_category(write(tmp_path / "b.csv", BFCL_COLUMNS, rows))


def test_extra_columns_are_allowed(tmp_path):
    path = write(tmp_path / "b.csv", BFCL_COLUMNS + ("note",), [(0, 1, "irrelevance", 1, 2, "x")])
    assert read_bfcl_by_category(path) == [BfclRow(0, 1, "irrelevance", 1, 2)]


def test_train_metrics_require_every_column_and_numbers(tmp_path):
    good = [
        tuple([1] + [0.5] * (len(TRAIN_METRICS_COLUMNS) - 1)),
        tuple([2] + ["nan"] * (len(TRAIN_METRICS_COLUMNS) - 1)),
    ]
    rows = read_train_metrics(write(tmp_path / "t.csv", TRAIN_METRICS_COLUMNS, good))
    assert [r["step"] for r in rows] == [1.0, 2.0] and rows[0]["kl"] == 0.5
    bad = [tuple([1] + ["high"] + [0.5] * (len(TRAIN_METRICS_COLUMNS) - 2))]
    with pytest.raises(ContractError, match="line 2, column 'reward_mean'"):
        read_train_metrics(write(tmp_path / "t2.csv", TRAIN_METRICS_COLUMNS, bad))
    required = [c for c in TRAIN_METRICS_COLUMNS if c not in CANARY_COLUMNS]
    with pytest.raises(ContractError, match="missing"):
        read_train_metrics(write(tmp_path / "t3.csv", required[:-1], [good[0][:len(required) - 1]]))


def test_train_metrics_from_before_the_canary_read_it_as_not_measured(tmp_path):
    columns = [c for c in TRAIN_METRICS_COLUMNS if c not in CANARY_COLUMNS]
    rows = read_train_metrics(write(tmp_path / "t.csv", columns, [tuple([1] + [0.5] * (len(columns) - 1))]))
    assert all(math.isnan(rows[0][c]) for c in CANARY_COLUMNS) and rows[0]["tool_call_share"] == 0.5


def test_correct_unparsed_reads_back_and_is_none_where_not_measured(tmp_path):
    rows = [BfclRow(0, 1, "irrelevance", 200, 240, 12), BfclRow(0, 1, "simple_python", 300, 400, None)]
    path = tmp_path / "bfcl_by_category.csv"
    append_bfcl_rows(path, rows)
    unmeasured = "," * len(VERDICT_COLUMNS)
    assert path.read_text().splitlines()[1:] == [f"0,1,irrelevance,200,240,12{unmeasured}",
                                                 f"0,1,simple_python,300,400,{unmeasured}"]
    assert read_bfcl_by_category(path) == rows


def test_a_file_from_before_the_column_reads_as_not_measured_and_is_never_appended_to(tmp_path):
    path = write(tmp_path / "bfcl_by_category.csv", BFCL_COLUMNS, [(0, 1, "irrelevance", 3, 4)])
    assert read_bfcl_by_category(path) == [BfclRow(0, 1, "irrelevance", 3, 4, None)]
    before = path.read_bytes()
    with pytest.raises(ContractError, match=r"missing \['correct_unparsed', 'truncated', "):
        append_bfcl_rows(path, [BfclRow(10, 1, "irrelevance", 3, 4, 0)])
    assert path.read_bytes() == before


def test_more_unparsed_credit_than_correct_items_is_refused(tmp_path):
    path = write(tmp_path / "b.csv", BFCL_WRITTEN_COLUMNS[:6], [(0, 1, "irrelevance", 3, 4, 4)])
    with pytest.raises(ContractError, match="correct_unparsed <= correct"):
        read_bfcl_by_category(path)


def test_the_verdict_columns_read_back_and_are_none_where_not_measured(tmp_path):
    measured = BfclRow(0, 1, "irrelevance", 200, 240, 12, truncated=9, truncated_bfcl_correct=7, overlong=3,
                       overlong_bfcl_correct=3, correct_empty_reasoning=5)
    unmeasured = BfclRow(0, 1, "simple_python", 300, 400, 0)
    path = tmp_path / "bfcl_by_category.csv"
    append_bfcl_rows(path, [measured, unmeasured])
    assert path.read_text().splitlines() == [
        "step,pass,category,correct,total,correct_unparsed,truncated,truncated_bfcl_correct,overlong,"
        "overlong_bfcl_correct,correct_empty_reasoning",
        "0,1,irrelevance,200,240,12,9,7,3,3,5", "0,1,simple_python,300,400,0,,,,,"]
    assert read_bfcl_by_category(path) == [measured, unmeasured]
    assert [measured.measured(c) for c in VERDICT_COLUMNS] == [9, 7, 3, 3, 5]


def test_a_file_from_before_contract_1_10_reads_as_not_measured_and_is_never_appended_to(tmp_path):
    # Contract 1.5 to 1.9 wrote correct_unparsed and nothing after it.
    path = write(tmp_path / "bfcl_by_category.csv", BFCL_COLUMNS + ("correct_unparsed",),
                 [(0, 1, "irrelevance", 3, 4, 1)])
    (row,) = read_bfcl_by_category(path)
    assert row.correct_unparsed == 1 and all(row.measured(c) is None for c in VERDICT_COLUMNS)
    before = path.read_bytes()
    with pytest.raises(ContractError, match=r"missing \['truncated', 'truncated_bfcl_correct', 'overlong', "
                                            r"'overlong_bfcl_correct', 'correct_empty_reasoning'\]"):
        append_bfcl_rows(path, [BfclRow(10, 1, "irrelevance", 3, 4, 0, 0, 0, 0, 0, 0)])
    assert path.read_bytes() == before


def test_an_empty_verdict_cell_reads_as_not_measured(tmp_path):
    cells = (0, 1, "irrelevance", 3, 10, 0, 2, 1, "", "", 0)
    (row,) = read_bfcl_by_category(write(tmp_path / "b.csv", BFCL_WRITTEN_COLUMNS, [cells]))
    assert (row.truncated, row.truncated_bfcl_correct, row.overlong, row.overlong_bfcl_correct) == (2, 1, None, None)
    assert row.correct_empty_reasoning == 0


@pytest.mark.parametrize(
    "counts, message",
    [
        # correct_unparsed, truncated, truncated_bfcl_correct, overlong, overlong_bfcl_correct, correct_empty_reasoning
        ((0, 11, 0, 0, 0, 0), r"truncated <= total, got truncated=11 > total=10"),
        ((0, 8, 0, 0, 0, 0), r"correct \+ truncated <= total \(a truncated item counts wrong\), got 3 \+ 8 > total=10"),
        ((0, 2, 3, 0, 0, 0), r"truncated_bfcl_correct <= truncated, got truncated_bfcl_correct=3 > truncated=2"),
        ((0, 0, 0, 1, 2, 0), r"overlong_bfcl_correct <= overlong, got overlong_bfcl_correct=2 > overlong=1"),
        ((0, 0, 0, 0, 0, 4), r"correct_empty_reasoning <= correct, got correct_empty_reasoning=4 > correct=3"),
        ((2, 0, 0, 0, 0, 2), r"correct_unparsed \+ correct_empty_reasoning <= correct, got 2 \+ 2 > correct=3"),
        ((0, "", 1, 0, 0, 0), r"truncated measured wherever truncated_bfcl_correct is"),
        ((0, 0, 0, "", 1, 0), r"overlong measured wherever overlong_bfcl_correct is"),
    ],
)
def test_a_verdict_count_larger_than_what_holds_it_is_refused_with_the_line(tmp_path, counts, message):
    assert len(counts) == len(MEASURED_COLUMNS)
    path = write(tmp_path / "b.csv", BFCL_WRITTEN_COLUMNS, [(0, 1, "irrelevance", 3, 10, *counts)])
    with pytest.raises(ContractError, match=message) as err:
        read_bfcl_by_category(path)
    assert f"{path}: line 2" in str(err.value)
