"""The evaluation's boundary files: published.jsonl (manifests), request.json, sample.json and outcomes.jsonl
(pass_files), read back as written, with one counting rule, and refused with a usable message when damaged.

Run: .venvs/dev/bin/python -m pytest tests/contract/test_pass_files.py -q
"""

import json

import pytest

from toolcanary.contract.errors import ContractError
from toolcanary.contract.manifests import PublishedCheckpoint, append_published, read_published
from toolcanary.contract.pass_files import (
    ItemOutcome,
    PassRequest,
    RunSample,
    count_outcomes,
    count_verdicts,
    error_counts,
    read_outcomes,
    read_request,
    read_sample,
    write_outcomes,
    write_request,
    write_sample,
)


def request(**overrides) -> PassRequest:
    fields = dict(run="r", step=0, pass_index=1, served_model="r-step0000", registry_key="toolcanary-served-FC",
                  weights_sha256=None, categories=["irrelevance"], ids={"irrelevance": ["irrelevance_0"]},
                  temperature=0.001, overlong_counted_wrong=True)
    return PassRequest(**{**fields, **overrides})


def test_request_and_sample_round_trip_and_differences_name_the_field(tmp_path):
    write_request(tmp_path / "request.json", request())
    assert read_request(tmp_path / "request.json") == request()
    assert request(step=5).differences(request()) == ["step: folder has 0, now 5"]
    write_sample(tmp_path / "run" / "sample.json", RunSample(size=1, seed=3, ids={"irrelevance": ["irrelevance_0"]}))
    assert read_sample(tmp_path / "run" / "sample.json").seed == 3


def test_a_damaged_request_or_sample_says_what_was_expected_and_what_to_do(tmp_path):
    (tmp_path / "request.json").write_text("{not json")
    with pytest.raises(ContractError, match="request.json: expected a pass request .*move it away"):
        read_request(tmp_path / "request.json")
    (tmp_path / "sample.json").write_text(json.dumps({"size": 2, "ids": {}}))
    with pytest.raises(ContractError, match="sample.json: expected JSON .*got seed: Field required.*restore it"):
        read_sample(tmp_path / "sample.json")


def test_outcomes_round_trip_and_a_bad_line_is_named(tmp_path):
    outcomes = [ItemOutcome(category="irrelevance", id="irrelevance_0", outcome="correct"),
                ItemOutcome(category="irrelevance", id="irrelevance_1", outcome="overlong"),
                ItemOutcome(category="simple_python", id="simple_python_0", outcome="wrong_values")]
    write_outcomes(tmp_path / "outcomes.jsonl", outcomes)
    assert read_outcomes(tmp_path / "outcomes.jsonl") == outcomes
    with (tmp_path / "outcomes.jsonl").open("a") as handle:
        handle.write('{"category": "simple_pyton", "id": "x", "outcome": "correct"}\n')
    with pytest.raises(ContractError, match="outcomes.jsonl: line 4: expected .*a BFCL V4 category"):
        read_outcomes(tmp_path / "outcomes.jsonl")


def test_one_counting_rule_for_overlong_items_and_left_out_ones():
    outcomes = [ItemOutcome(category="irrelevance", id="a", outcome="correct"),
                ItemOutcome(category="irrelevance", id="b", outcome="overlong"),
                ItemOutcome(category="simple_python", id="c", outcome="wrong_values")]
    assert count_outcomes(outcomes, True) == {"irrelevance": (1, 2), "simple_python": (0, 1)}
    assert count_outcomes(outcomes, False) == {"irrelevance": (1, 1), "simple_python": (0, 1)}
    # A category whose every item is left out stays, with total 0.
    assert count_outcomes(outcomes, True, leave_out={("simple_python", "c")})["simple_python"] == (0, 0)
    assert error_counts(outcomes) == {"overlong": 1, "wrong_values": 1}


def test_the_verdict_counts_keep_bfcls_own_verdict_on_overridden_items_and_say_when_not_measured():
    def item(id_, outcome, answer="text", bfcl_correct=None, tokens=None, category="irrelevance"):
        return ItemOutcome(category=category, id=id_, outcome=outcome, answer=answer, bfcl_correct=bfcl_correct,
                           output_tokens=tokens)

    outcomes = [item("a", "truncated", "empty", True, 512), item("b", "truncated", "text", False, 512),
                item("c", "overlong", "empty", True), item("d", "correct", "empty", True, 40),
                item("e", "correct", "empty", True, 0), item("f", "correct", "unparsed_call", True, 9),
                item("g", "wrong_values", "calls", False, 12, category="simple_python")]
    assert count_verdicts(outcomes) == {
        "irrelevance": {"truncated": 2, "truncated_bfcl_correct": 1, "overlong": 1, "overlong_bfcl_correct": 1,
                        "correct_empty_reasoning": 1},
        "simple_python": {"truncated": 0, "truncated_bfcl_correct": 0, "overlong": 0, "overlong_bfcl_correct": 0,
                          "correct_empty_reasoning": 0}}
    # A pass from before contract 1.10: BFCL's verdict and the tokens were not recorded, never read as 0.
    older = [item("a", "truncated", "empty"), item("d", "correct", "empty"), item("h", "correct", None)]
    assert count_verdicts(older) == {"irrelevance": {
        "truncated": 1, "truncated_bfcl_correct": None, "overlong": 0, "overlong_bfcl_correct": 0,
        "correct_empty_reasoning": None}}


def test_the_publication_ledger_round_trips_and_refuses_an_incomplete_line(tmp_path):
    append_published(tmp_path, PublishedCheckpoint(step=0, path="step_0000", weights_sha256="a" * 64))
    assert (tmp_path / "published.jsonl").read_text() == \
        f'{{"step": 0, "path": "step_0000", "weights_sha256": "{"a" * 64}"}}\n'
    assert [e.step for e in read_published(tmp_path)] == [0]
    with (tmp_path / "published.jsonl").open("a") as handle:
        handle.write('{"step": 10}\n{"step": 20, "path": "step_0020", "weights_sha256": "c"}\n')
    with pytest.raises(ContractError, match=r"published.jsonl: line 2: expected a JSON object .*no writer fenced"):
        read_published(tmp_path)
    assert read_published(tmp_path / "missing") == []


def test_counts_and_failure_round_trip_and_a_damaged_counts_file_is_refused(tmp_path):
    from toolcanary.contract.csv_schemas import (
        VERDICT_COLUMNS,
        BfclRow,
        append_bfcl_rows,
        read_bfcl_by_category,
    )
    from toolcanary.contract.pass_files import (
        FailedItem,
        PassFailure,
        read_counts,
        read_failure,
        write_counts,
        write_failure,
    )

    rows = [BfclRow(step=0, pass_index=1, category="irrelevance", correct=3, total=4),
            BfclRow(0, 1, "simple_python", 5, 9, 2)]
    write_counts(tmp_path / "counts.json", rows)
    unmeasured = dict.fromkeys(VERDICT_COLUMNS)
    assert json.loads((tmp_path / "counts.json").read_text()) == [
        {"category": "irrelevance", "correct": 3, "correct_unparsed": None, "pass_index": 1, "step": 0, "total": 4,
         **unmeasured},
        {"category": "simple_python", "correct": 5, "correct_unparsed": 2, "pass_index": 1, "step": 0, "total": 9,
         **unmeasured}]
    # The rows a pass counted are the rows it appends, and read back from the CSV as the same values.
    counted = read_counts(tmp_path / "counts.json")
    append_bfcl_rows(tmp_path / "bfcl_by_category.csv", counted)
    assert counted == rows == read_bfcl_by_category(tmp_path / "bfcl_by_category.csv", complete=False)
    failure = PassFailure(reason="failed requests", at="2026-12-01T00:00:00Z", counts={"timeout": 1},
                          items=[FailedItem(category="irrelevance", id="irrelevance_0", error="timeout")])
    write_failure(tmp_path / "failure.json", failure)
    assert read_failure(tmp_path / "failure.json") == failure
    (tmp_path / "counts.json").write_text('[{"step": 0, "pass_index": 1, "category": "irrelevance", "correct": -1}]')
    with pytest.raises(ContractError, match="score the pass again"):
        read_counts(tmp_path / "counts.json")
    (tmp_path / "counts.json").write_text('[{"step": 0, "pass_index": 1, "category": "irrelevance", "correct": 1, '
                                          '"total": 2, "extra": 0}]')
    with pytest.raises(ContractError, match="score the pass again"):
        read_counts(tmp_path / "counts.json")
