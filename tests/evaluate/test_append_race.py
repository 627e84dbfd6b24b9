"""Drill (racing appends): two evaluation passes of different steps finish at the same moment and append to
the same run's bfcl_by_category.csv, 50 times over (each time a run with no CSV yet, so both are first
writers): every row once, one header. Then the watcher's reading of published.jsonl under the append-only
rule: a torn last line is skipped with a warning while the trainer writes it.

The two passes are two processes that spin until the same instant each round (a barrier's wake-up is too
loose on a small machine to make them collide); each calls the client's own last stage (`runner.append_rows`:
the rows of counts.json into the CSV, the manifest marked finished).

Run: .venvs/eval/bin/python -m pytest tests/evaluate/test_append_race.py -q
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import time

import pytest

from toolcanary.contract import CONTRACT_VERSION, ContractError
from toolcanary.contract.csv_schemas import BFCL_WRITTEN_COLUMNS, read_bfcl_by_category
from toolcanary.evaluate.runner import PassPaths
from toolcanary.evaluate.schedule import published_checkpoints

ROUNDS = 50
STEPS = (10, 20)
CATEGORIES = ("irrelevance", "live_irrelevance", "simple_python", "multi_turn_base")


def prepare(results, run: str, step: int) -> PassPaths:
    """A pass folder as a pass leaves it just before its rows go to the CSV."""
    paths = PassPaths.of(results, run, step, 1)
    paths.folder.mkdir(parents=True)
    rows = [{"step": step, "pass_index": 1, "category": c, "correct": step % 9, "total": 9, "correct_unparsed": 1,
             "truncated": 2, "truncated_bfcl_correct": 1, "overlong": 0, "overlong_bfcl_correct": 0,
             "correct_empty_reasoning": 0} for c in CATEGORIES]
    paths.counts.write_text(json.dumps(rows))
    paths.manifest.write_text(json.dumps({
        "contract_version": CONTRACT_VERSION, "run": run, "step": step, "pass_index": 1, "served_model": "m",
        "base_url": "http://127.0.0.1:1/v1", "bfcl_eval_version": "2026.3.23", "handler": "test",
        "categories": list(CATEGORIES), "threads": 1, "temperature": 0.0, "overlong_counted_wrong": True,
        "started_at": "2026-01-01T00:00:00+00:00"}))
    return paths


ROUND_S = 0.04  # each round starts at its own instant, this far after the previous one


def finish_passes(results: str, step: int, start: float, errors) -> None:
    from toolcanary.evaluate.runner import append_rows

    for number in range(ROUNDS):
        at = start + number * ROUND_S
        while time.time() < at:  # spin, so that both processes leave at the same microsecond
            pass
        try:
            append_rows(PassPaths.of(results, f"race-{number:02d}", step, 1), scored=False)
        except Exception as err:  # noqa: BLE001 - reported to the test, which fails on it
            errors.put(f"round {number}, step {step}: {type(err).__name__}: {err}")


def test_drill_two_passes_appending_at_once_50_times_every_row_once_one_header(tmp_path, drill):
    for number in range(ROUNDS):
        for step in STEPS:
            prepare(tmp_path, f"race-{number:02d}", step)
    context = multiprocessing.get_context("fork")
    errors = context.Queue()
    started, start = time.monotonic(), time.time() + 1.0  # both processes are up and spinning by then
    workers = [context.Process(target=finish_passes, args=(str(tmp_path), step, start, errors)) for step in STEPS]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    elapsed = time.monotonic() - started
    failures = []
    while not errors.empty():
        failures.append(errors.get())
    headers, lost, repeated = 0, 0, 0
    for number in range(ROUNDS):
        csv = tmp_path / f"race-{number:02d}" / "bfcl_by_category.csv"
        lines = csv.read_text().splitlines()
        these = lines.count(",".join(BFCL_WRITTEN_COLUMNS))
        body = [line for line in lines if line != ",".join(BFCL_WRITTEN_COLUMNS)]
        expected = {f"{s},1,{c},{s % 9},9,1,2,1,0,0,0" for s in STEPS for c in CATEGORIES}
        headers, lost = headers + these, lost + len(expected - set(body))
        repeated += len(body) - len(set(body))
        if these == 1 and lines[0] == ",".join(BFCL_WRITTEN_COLUMNS) and set(body) == expected:
            assert len(read_bfcl_by_category(csv)) == len(expected)
    drill("racing CSV appends", rounds=ROUNDS, writers=len(STEPS), headers=f"{headers} (expected {ROUNDS})",
          rows_lost=lost, rows_repeated=repeated, errors=len(failures), seconds=f"{elapsed:.1f}")
    assert all(worker.exitcode == 0 for worker in workers)
    assert failures == []
    assert (headers, lost, repeated) == (ROUNDS, 0, 0)


def test_a_pass_whose_rows_are_already_there_appends_nothing_even_when_told_otherwise(tmp_path):
    """The check for rows already there runs under the lock, at the moment of the append."""
    from toolcanary.evaluate.runner import append_rows

    paths = prepare(tmp_path, "again", 10)
    append_rows(paths, scored=False)
    append_rows(paths, scored=False)  # a resumed pass that read the CSV before the first one appended
    assert len(read_bfcl_by_category(paths.csv)) == len(CATEGORIES)


def test_drill_a_pass_whose_last_row_a_crash_tore_off_is_made_whole_by_its_resume(tmp_path, caplog, drill):
    """Torn tails, bfcl_by_category.csv: the torn row is the only loss, its pass is named as incomplete by
    every reader of results, and the pass's resume appends exactly that row again."""
    from toolcanary.evaluate.runner import append_rows
    from toolcanary.evaluate.schedule import scored_passes

    caplog.set_level(logging.WARNING)
    first, second = prepare(tmp_path, "torn", 10), prepare(tmp_path, "torn", 20)
    append_rows(first, scored=False)
    append_rows(second, scored=False)
    data = first.csv.read_bytes()
    first.csv.write_bytes(data[: len(data) - 12])  # a crash inside the last row of pass 20
    third = prepare(tmp_path, "torn", 30)
    append_rows(third, scored=False)  # the next writer fences the torn row off and starts on a fresh line
    with pytest.raises(ContractError, match="step 20, pass 1.*multi_turn_base"):
        read_bfcl_by_category(first.csv)  # the analysis refuses an incomplete pass, naming it
    assert scored_passes(tmp_path, "torn") == {(10, 1), (30, 1)}  # so eval-all resumes pass 20
    append_rows(second, scored=True)  # the resume of pass 20
    rows = read_bfcl_by_category(first.csv)
    assert len(rows) == 3 * len(CATEGORIES) and first.csv.read_text().count("step,pass") == 1
    reported = [r.getMessage() for r in caplog.records if "is torn" in r.getMessage() or "appended again" in r.getMessage()]
    assert any("fenced off" in m for m in reported) and any("1 of its rows were missing" in m for m in reported)
    drill("torn tails [bfcl_by_category.csv]", faults_injected=1, survived=1,
          rows_lost="1 (the torn one), appended again by its pass's resume",
          reported=f"{len(reported)} warnings (the fence, the readers, the resume)")


def test_the_watcher_skips_a_torn_last_published_line_and_reads_fenced_ones_past(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    ledger = tmp_path / "r" / "published.jsonl"
    ledger.parent.mkdir()
    for step in (0, 10):
        (tmp_path / "r" / f"step_{step:04d}").mkdir()
    ledger.write_text('{"step": 0, "path": "step_0000", "weights_sha256": "a"}\n{"step": 10, "path": "st')
    assert [p.step for p in published_checkpoints(tmp_path, "r")] == [0]  # the trainer is writing step 10's line
    assert any("is torn" in r.getMessage() for r in caplog.records)
