"""Real passes over stubs whose answers are known: irrelevance items answered with call markup the server did
not parse are still credited by BFCL, and the client counts them beside BFCL's number (`correct_unparsed`,
the outcomes' `answer`, the manifest, a warning); a stub answering each kind in turn shows each kind.

    .venvs/eval/bin/python -m pytest tests/evaluate/test_unparsed_calls.py -q
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from conftest import cli, run_args

from toolcanary.contract.csv_schemas import BFCL_WRITTEN_COLUMNS, read_bfcl_by_category
from toolcanary.contract.manifests import EvalPassManifest
from toolcanary.contract.pass_files import read_outcomes
from toolcanary.evaluate.bfcl_files import read_lines, result_path
from toolcanary.evaluate.bfcl_wrapper import ANSWERS_FIELD

pytestmark = pytest.mark.slow

IDS = {
    "irrelevance": ["irrelevance_0", "irrelevance_1", "irrelevance_2", "irrelevance_3"],
    "live_irrelevance": ["live_irrelevance_0-0-0", "live_irrelevance_1-0-1"],
    "simple_python": ["simple_python_0", "simple_python_1"],
}


def run_over(tmp_path, server, run: str):
    (tmp_path / "ids.json").write_text(json.dumps(IDS))
    done = cli(tmp_path, *run_args(run, server, "--base-model", "m", "--ids-file", str(tmp_path / "ids.json")))
    assert done.returncode == 0, done.stderr[-3000:]
    folder = tmp_path / run / "passes/step_0000_pass_1"
    manifest = EvalPassManifest.model_validate_json((folder / "manifest.json").read_text())
    return done, folder, manifest


def test_unparsed_calls_in_irrelevance_keep_bfcls_credit_and_are_counted_beside_it(tmp_path, make_stub):
    done, folder, manifest = run_over(tmp_path, make_stub("unparsed"), "u")
    csv = tmp_path / "u/bfcl_by_category.csv"
    assert csv.read_text().splitlines()[0] == ",".join(BFCL_WRITTEN_COLUMNS)
    # BFCL sees no call and credits every abstention; the oracle gets the simple items right with real calls.
    rows = {r.category: (r.correct, r.total, r.correct_unparsed) for r in read_bfcl_by_category(csv)}
    assert rows == {"irrelevance": (4, 4, 4), "live_irrelevance": (2, 2, 2), "simple_python": (2, 2, 0)}
    answers = {o.id: (o.outcome, o.answer) for o in read_outcomes(folder / "outcomes.jsonl")}
    assert answers == {**{i: ("correct", "unparsed_call") for i in IDS["irrelevance"] + IDS["live_irrelevance"]},
                       **{i: ("correct", "calls") for i in IDS["simple_python"]}}
    assert manifest.unparsed_credit_items == {c: IDS[c] for c in ("irrelevance", "live_irrelevance")}
    assert manifest.answer_kinds == {"irrelevance": {"unparsed_call": 4}, "live_irrelevance": {"unparsed_call": 2},
                                     "simple_python": {"calls": 2}}
    assert "BFCL counted 6 items correct whose answer held a tool call the server did not parse " \
           "(irrelevance: 4, live_irrelevance: 2); BFCL's count keeps them, correct_unparsed" in done.stderr
    # The text bfcl-eval drops (its `result` is []) is in the handler's record of the response.
    lines = {e["id"]: e for e in read_lines(result_path(folder / "bfcl/result", "toolcanary-served-FC",
                                                        "irrelevance"), strict=True)}
    assert lines["irrelevance_1"]["result"] == []
    [record] = lines["irrelevance_1"][ANSWERS_FIELD]
    assert record["calls"] == 0 and "math_sum" in record["content"]


@pytest.fixture(scope="module")
def kinds_pass(tmp_path_factory, make_stub):
    """One pass over a stub answering each kind of answer in turn: (results folder, stderr, pass folder, manifest)."""
    tmp_path = tmp_path_factory.mktemp("kinds")
    return tmp_path, *run_over(tmp_path, make_stub("kinds"), "k")


def test_each_kind_of_answer_is_recorded_in_the_outcomes(kinds_pass):
    tmp_path, done, folder, manifest = kinds_pass
    outcomes = read_outcomes(folder / "outcomes.jsonl")
    # Eight requests, the four kinds in turn: each kind twice, whichever items the threads gave them to.
    assert Counter(o.answer for o in outcomes) == dict.fromkeys(("calls", "unparsed_call", "text", "empty"), 2)
    irrelevance = [o for o in outcomes if o.category in ("irrelevance", "live_irrelevance")]
    # In the abstention categories BFCL credits every answer but a structured call.
    assert all((o.outcome == "correct") == (o.answer != "calls") for o in irrelevance)
    credited = [o for o in outcomes if o.outcome == "correct" and o.answer == "unparsed_call"]
    rows = {r.category: r for r in read_bfcl_by_category(tmp_path / "k/bfcl_by_category.csv")}
    assert {c: r.correct_unparsed for c, r in rows.items()} == \
        {c: sum(o.category == c for o in credited) for c in IDS}
    assert sum(sum(kinds.values()) for kinds in manifest.answer_kinds.values()) == 8
    assert sorted(i for ids in manifest.unparsed_credit_items.values() for i in ids) == sorted(o.id for o in credited)
    assert ("items correct whose answer held a tool call" in done.stderr) == bool(credited)
    # A reasoning trace alone: tokens came back (the stub reports 7 a response), nothing once the trace is
    # removed; BFCL credits it in the abstention categories, and the rows count it beside BFCL's number.
    assert {o.output_tokens for o in outcomes} == {7}
    reasoning_only = [o for o in outcomes if o.outcome == "correct" and o.answer == "empty"]
    assert {c: r.correct_empty_reasoning for c, r in rows.items()} == \
        {c: sum(o.category == c for o in reasoning_only) for c in IDS}
    assert ("a reasoning trace alone" in done.stderr) == bool(reasoning_only)


def test_the_pass_is_in_tensorboard_at_its_step_as_tensorboard_reads_it(kinds_pass):
    """The scalars written beside verl's curves, read back with TensorBoard's own event reader, equal the
    pass's counts in bfcl_by_category.csv, computed here from their definitions."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tmp_path, *_ = kinds_pass
    rows = {r.category: r for r in read_bfcl_by_category(tmp_path / "k/bfcl_by_category.csv")}
    reader = EventAccumulator(str(tmp_path / "k" / "tensorboard" / "bfcl"))
    reader.Reload()
    scalars = {tag: [(e.step, e.value) for e in reader.Scalars(tag)] for tag in reader.Tags()["scalars"]}
    expected = {f"bfcl_category/{c}/pass1": 100 * r.correct / r.total for c, r in rows.items()}
    abstention = [rows["irrelevance"], rows["live_irrelevance"]]
    total = sum(r.total for r in abstention)
    expected["bfcl/abstention_required/pass1"] = 100 * sum(r.correct for r in abstention) / total
    expected["bfcl/abstention_required_no_unparsed_credit/pass1"] = 100 * sum(
        r.correct - r.correct_unparsed for r in abstention) / total
    # The other four aggregates need categories this pass did not score: absent, never 0.
    assert set(scalars) == set(expected)
    for tag, value in expected.items():
        [(step, seen)] = scalars[tag]
        assert step == 0 and seen == pytest.approx(value, abs=1e-4), tag
