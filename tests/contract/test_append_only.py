"""The append-only rule on the two CSVs: a torn tail costs only the torn line, which is reported; a broken
line in the middle that no writer fenced off is refused; a rewrite is atomic.

Drill (torn tails, CSV half): each CSV truncated mid-line, appended to by its writer, then read back.
The JSONL files (published.jsonl, episodes.jsonl, the simulator's records) have the same drill in their
own suites, through their own writers and readers.

Run: .venvs/dev/bin/python -m pytest tests/contract/test_append_only.py -q
"""

from __future__ import annotations

import logging
import math

import pytest

from toolcanary.contract import (
    BFCL_WRITTEN_COLUMNS,
    TRAIN_METRICS_COLUMNS,
    BfclRow,
    ContractError,
    append_bfcl_rows,
    read_bfcl_by_category,
    read_train_metrics,
)
from toolcanary.contract.append_only import (
    append_text,
    fence_path,
    read_lines,
    rewrite_lines,
)
from toolcanary.contract.csv_schemas import MEASURED_COLUMNS, UPDATE_COLUMNS

CATEGORIES = ("irrelevance", "simple_python")


def bfcl_pass(step: int) -> list[BfclRow]:
    return [BfclRow(step, 1, category, step % 7, 10) for category in CATEGORIES]


def metrics_line(step: int) -> str:
    return ",".join([str(step)] + [f"0.{step}5"] * (len(TRAIN_METRICS_COLUMNS) - 1)) + "\n"


def cut_inside_last_line(path, keep: int) -> str:
    """Truncate `path` `keep` bytes into its last line (a writer killed mid-line); returns what was left."""
    data = path.read_bytes()
    start = data.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(data[: start + keep])
    return data[start: start + keep].decode()


def test_each_csv_truncated_mid_line_then_appended_loses_only_the_torn_line(tmp_path, caplog, drill):
    caplog.set_level(logging.WARNING)
    bfcl = tmp_path / "bfcl_by_category.csv"
    for step in (0, 10, 20):
        append_bfcl_rows(bfcl, bfcl_pass(step))
    torn_bfcl = cut_inside_last_line(bfcl, 9)  # "20,1,simp": the last row of pass 20 is torn
    metrics = tmp_path / "train_metrics.csv"
    header = ",".join(TRAIN_METRICS_COLUMNS)
    for step in (1, 2, 3):
        append_text(metrics, metrics_line(step), header=header)
    torn_metrics = cut_inside_last_line(metrics, len(metrics_line(3)) - 3)  # cut inside the last number

    # Readers before any writer came back: the torn last line is skipped and reported.
    assert [r["step"] for r in read_train_metrics(metrics)] == [1, 2]
    with pytest.raises(ContractError, match="step 20, pass 1"):  # pass 20 lost a row: incomplete, refused
        read_bfcl_by_category(bfcl)
    assert read_lines(metrics).torn_tail.text == torn_metrics

    # The writers come back: each starts on a fresh line and fences the torn one off.
    append_bfcl_rows(bfcl, bfcl_pass(30))
    append_text(metrics, metrics_line(4), header=header)
    lines = bfcl.read_text().splitlines()
    assert lines.count(",".join(BFCL_WRITTEN_COLUMNS)) == 1 and torn_bfcl in lines
    assert [r["step"] for r in read_train_metrics(metrics)] == [1, 2, 4]
    assert fence_path(metrics).exists() and fence_path(bfcl).exists()
    reported = [r.getMessage() for r in caplog.records if "is torn" in r.getMessage()]
    assert any(torn_metrics[:40] in m for m in reported) and any("simp" in m for m in reported)

    # bfcl: the torn row belonged to pass 20, which is now one category short; the reader says so rather
    # than count a pass with a category missing. Every other row is read.
    with pytest.raises(ContractError, match="step 20, pass 1.*simple_python"):
        read_bfcl_by_category(bfcl)
    kept = [line for _, line in read_lines(bfcl).lines]
    unmeasured = "," * len(MEASURED_COLUMNS)  # the counts beside correct/total, empty: not measured
    assert kept[1:] == [f"{s},1,{c},{s % 7},10{unmeasured}" for s in (0, 10) for c in CATEGORIES] + [
        f"20,1,irrelevance,6,10{unmeasured}"] + [f"30,1,{c},2,10{unmeasured}" for c in CATEGORIES]
    fenced = [m for m in reported if "fenced off, the next line starts fresh" in m]
    assert len(fenced) == 2
    drill("torn tails [train_metrics.csv, bfcl_by_category.csv]", faults_injected=2, survived=2,
          rows_lost="1 per file (the torn one)", torn_lines_reported=f"{len(fenced)} by the writers, "
          f"{len(reported) - len(fenced)} reader warnings")


def test_a_row_cut_inside_its_last_number_is_not_read_as_a_smaller_number(tmp_path):
    """Why fences: a cut row can parse. '0.35' cut to '0.3' still has every field."""
    metrics = tmp_path / "train_metrics.csv"
    header = ",".join(TRAIN_METRICS_COLUMNS)
    append_text(metrics, metrics_line(1) + metrics_line(2), header=header)
    cut_inside_last_line(metrics, len(metrics_line(2)) - 2)
    append_text(metrics, metrics_line(3), header=header)
    rows = read_train_metrics(metrics)
    assert [r["step"] for r in rows] == [1.0, 3.0]


def test_a_broken_line_in_the_middle_that_no_writer_fenced_is_refused(tmp_path):
    """What announce() did before: a torn line with the next line glued on, or a line edited by hand."""
    bfcl = tmp_path / "bfcl_by_category.csv"
    append_bfcl_rows(bfcl, bfcl_pass(0))
    with bfcl.open("a") as handle:
        handle.write("10,1,irrel")  # torn, and then a writer that does not follow the rule:
        handle.write("10,1,irrelevance,3,10\n10,1,simple_python,3,10\n")
    with pytest.raises(ContractError, match=rf"line 4: expected a row of {len(BFCL_WRITTEN_COLUMNS)} comma-separated fields.*no writer fenced"):
        read_bfcl_by_category(bfcl)


def test_a_torn_header_is_fenced_and_the_header_written_again(tmp_path):
    metrics = tmp_path / "train_metrics.csv"
    metrics.write_text(",".join(TRAIN_METRICS_COLUMNS)[:20])
    append_text(metrics, metrics_line(1), header=",".join(TRAIN_METRICS_COLUMNS))
    assert [r["step"] for r in read_train_metrics(metrics)] == [1.0]


def test_a_file_with_another_header_is_refused_not_mixed(tmp_path):
    old = tmp_path / "train_metrics.csv"
    before_aborts = TRAIN_METRICS_COLUMNS[:TRAIN_METRICS_COLUMNS.index("aborted_timeout")]  # a file of contract 1.0
    old.write_text(",".join(before_aborts) + "\n" + ",".join(["1"] * len(before_aborts)) + "\n")
    with pytest.raises(ContractError, match="missing \\['aborted_timeout'"):
        append_text(old, metrics_line(2), header=",".join(TRAIN_METRICS_COLUMNS))
    with pytest.raises(ContractError, match="missing \\['aborted_timeout'"):
        read_train_metrics(old)


def test_a_file_from_before_the_update_columns_reads_them_as_not_measured(tmp_path):
    old = tmp_path / "train_metrics.csv"
    columns = [c for c in TRAIN_METRICS_COLUMNS if c not in UPDATE_COLUMNS]  # a file of contract 1.8
    old.write_text(",".join(columns) + "\n" + ",".join(["1"] * len(columns)) + "\n")
    (row,) = read_train_metrics(old)
    assert all(math.isnan(row[c]) for c in UPDATE_COLUMNS) and row["kl"] == 1.0


def test_a_rewrite_replaces_the_file_whole_and_drops_its_fences(tmp_path):
    path = tmp_path / "episodes.jsonl"
    append_text(path, '{"step": 1}\n{"step": 2}\n')
    with path.open("a") as handle:
        handle.write('{"step": 3, "ep')
    append_text(path, '{"step": 4}\n')
    assert [t for _, t in read_lines(path).lines] == ['{"step": 1}', '{"step": 2}', '{"step": 4}']
    rewrite_lines(path, ['{"step": 1}', '{"step": 2}'])
    assert path.read_text() == '{"step": 1}\n{"step": 2}\n' and not fence_path(path).exists()
    assert not list(tmp_path.glob(".*rewrite*"))


def test_appends_must_be_whole_lines(tmp_path):
    with pytest.raises(ValueError, match="whole lines"):
        append_text(tmp_path / "x.jsonl", '{"step": 1}')


def test_a_json_line_escapes_every_line_separator_and_reads_back_equal(tmp_path):
    from toolcanary.contract.append_only import json_line
    from toolcanary.contract.training_files import EpisodeRecord

    record = EpisodeRecord(step=1, episode_id="e", task_key="k\u2028\u2029\u0085x", transcript=[
        {"role": "user", "content": "one\u2028two"}])
    line = json_line(record)
    assert line.endswith("\n") and len(line.splitlines()) == 1  # one line even to str.splitlines
    assert EpisodeRecord.model_validate_json(line) == record
