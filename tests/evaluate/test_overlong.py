"""Guard 4: items longer than the served context are counted, reported, and never scored as abstentions.

The stub answers HTTP 400 with vLLM's context-length message for long prompts. bfcl-eval would score such
an irrelevance item as a correct abstention; the client marks it "overlong" and, by default, wrong.

    .venvs/eval/bin/python -m pytest tests/evaluate/test_overlong.py -q
"""

from __future__ import annotations

import json

import pytest
from conftest import cli, run_args
from oracle_answers import _lines, package_dir

from toolcanary.contract.csv_schemas import read_bfcl_by_category
from toolcanary.contract.manifests import EvalPassManifest
from toolcanary.contract.pass_files import read_outcomes
from toolcanary.evaluate.__main__ import build_parser, settings_from
from toolcanary.evaluate.bfcl_files import classify, count_rows


def shortest_and_longest(category: str) -> tuple[list[str], str, int]:
    """Ids of the two shortest prompts and of the longest of a category, and a character limit between them."""
    sizes = sorted((len(json.dumps(e["question"])) + len(json.dumps(e["function"])), e["id"])
                   for e in _lines(package_dir() / "data" / f"BFCL_v4_{category}.json"))
    (small, _), (large, long) = sizes[1], sizes[-1]
    assert large > 3 * small
    # Two answered items: bfcl-eval's latency summary crashes on fewer than two latencies.
    return [sizes[0][1], sizes[1][1]], long, (small + large) // 2


@pytest.mark.slow
def test_an_overlong_irrelevance_item_counts_as_wrong_not_as_abstention(tmp_path, make_stub):
    short, long, limit = shortest_and_longest("irrelevance")
    (tmp_path / "ids.json").write_text(json.dumps({"irrelevance": [*short, long]}))
    server = make_stub("overlong", max_chars=limit)
    done = cli(tmp_path, *run_args("o", server, "--base-model", "m", "--ids-file", str(tmp_path / "ids.json")))
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "o/passes/step_0000_pass_1"
    outcomes = {o.id: o.outcome for o in read_outcomes(folder / "outcomes.jsonl")}
    assert outcomes == {short[0]: "correct", short[1]: "correct", long: "overlong"}
    [row] = read_bfcl_by_category(tmp_path / "o/bfcl_by_category.csv")
    assert (row.correct, row.total) == (2, 3)
    # BFCL's own scoring credits the refused request as an abstention; the row says so beside its count.
    assert (row.overlong, row.overlong_bfcl_correct, row.truncated) == (1, 1, 0)
    manifest = EvalPassManifest.model_validate_json((folder / "manifest.json").read_text())
    assert manifest.overlong_counted_wrong and manifest.overlong_items == {"irrelevance": [long]}
    assert manifest.error_counts == {"overlong": 1}
    # The other policy takes the item out of the total instead.
    [excluded] = count_rows(0, 1, read_outcomes(folder / "outcomes.jsonl"), False)
    assert (excluded.correct, excluded.total, excluded.overlong, excluded.overlong_bfcl_correct) == (2, 2, 1, 1)


def test_the_overlong_policy_flags_reach_the_settings():
    parse = build_parser().parse_args
    assert settings_from(parse(["run", "--step", "0", "--overlong-excluded"])).overlong_counted_wrong is False
    assert settings_from(parse(["run", "--step", "0", "--overlong-wrong"])).overlong_counted_wrong is True
    assert settings_from(parse(["run", "--step", "0"])).overlong_counted_wrong is True


def test_context_errors_are_told_apart_from_other_failed_requests():
    vllm = "Error during inference: Error code: 400 - {'message': \"This model's maximum context length is 2048 tokens.\"}"
    assert classify({"result": vllm}) == "overlong"
    assert classify({"result": "Error during inference: Connection error."}) == "request_error"
    assert classify({"result": "", "output_token_count": 0}) == "empty_response"
    assert classify({"result": [], "output_token_count": 0}) == "empty_response"
    assert classify({"result": [], "output_token_count": 12}) is None
    assert classify({"result": [[[{"cd": "{}"}], []]], "output_token_count": [[5, 0]]}) == "empty_response"
    assert classify({"result": [[[{"cd": "{}"}], "Done."]], "output_token_count": [[5, 2]]}) is None
