"""A pass sized for thinking mode: the output cap, the threads and the stall guard derived from what the server
reports, the cap sent with every request, an answer cut at the cap counted wrong (guard 7) with what BFCL alone
would have credited beside it, a stalled phase refused, and the expected duration logged.

    .venvs/eval/bin/python -m pytest tests/evaluate/test_sizing.py -q
"""

from __future__ import annotations

import json
import logging
import sys

import pytest
from conftest import cli, run_args

from toolcanary.contract.csv_schemas import read_bfcl_by_category
from toolcanary.contract.errors import ContractError
from toolcanary.contract.manifests import EvalPassManifest
from toolcanary.contract.pass_files import read_outcomes
from toolcanary.evaluate import bfcl_process
from toolcanary.evaluate.bfcl_data import RESULT_PREFIX
from toolcanary.evaluate.bfcl_files import SCORE_SUFFIX, classify, read_lines, result_path
from toolcanary.evaluate.bfcl_wrapper import TRUNCATED_FIELD
from toolcanary.evaluate.settings import EvalSettings
from toolcanary.evaluate.sizing import kv_cache_tokens, plan


def test_zeros_are_derived_from_the_context_the_kv_cache_and_the_items():
    settings = EvalSettings(request_timeout_s=600, request_retries=2)
    qwen = plan(settings, served_max_model_len=40960, kv_cache_tokens=409_600, items=4441)
    # 8,192 = min(8192, 40960 / 4); 409,600 / (8,192 + 2,048) = 40 requests at once; 3 tries x 600 s + 60 s.
    assert (qwen.max_tokens, qwen.threads, qwen.stall_timeout_s, qwen.phase_timeout_s) == (8192, 40, 1860.0, None)
    small = plan(settings, served_max_model_len=2048, kv_cache_tokens=None, items=3)
    assert (small.max_tokens, small.threads) == (512, 3)  # 2048 / 4; the fallback 8, but only 3 items
    assert plan(settings, None, 10**9, 10**5).threads == 64 and plan(settings, None, None, 10).max_tokens == 8192
    assert "KV cache of 409600 tokens" in qwen.derived_from and "does not publish" in small.derived_from


def test_values_set_explicitly_win_and_a_cap_the_context_cannot_hold_is_refused():
    settings = EvalSettings(threads=5, max_tokens=1000, stall_timeout_s=30, phase_timeout_s=7200)
    sized = plan(settings, served_max_model_len=40960, kv_cache_tokens=409_600, items=4441)
    assert (sized.max_tokens, sized.threads, sized.stall_timeout_s, sized.phase_timeout_s) == (1000, 5, 30, 7200)
    assert sized.derived_from == "every size set explicitly"
    with pytest.raises(ContractError, match="fewer than the served context's 2048 tokens"):
        plan(EvalSettings(max_tokens=2048), served_max_model_len=2048, kv_cache_tokens=None, items=1)


def test_the_kv_cache_size_is_read_from_vllms_metric_and_its_absence_is_no_error(make_stub):
    assert kv_cache_tokens(make_stub("oracle", kv_tokens=160_000).base_url) == 160_000
    assert kv_cache_tokens(make_stub("oracle").base_url) is None  # /metrics answers 404


def test_a_truncated_answer_is_an_answer_never_a_failed_request():
    cut = {"id": "irrelevance_0", "result": [], "output_token_count": 512, TRUNCATED_FIELD: 1}
    assert classify(cut) is None and classify({**cut, "result": None, TRUNCATED_FIELD: 0}) == "empty_response"
    assert classify({**cut, "result": None}) is None


@pytest.mark.slow
def test_answers_cut_at_the_cap_count_wrong_and_what_bfcl_would_credit_is_reported(tmp_path, make_stub):
    """Irrelevance is where a cut answer hurts: no call, so BFCL credits a correct abstention."""
    ids = {"irrelevance": ["irrelevance_0", "irrelevance_1"], "simple_python": ["simple_python_0", "simple_python_1"]}
    (tmp_path / "ids.json").write_text(json.dumps(ids))
    server = make_stub("cut", max_model_len=4096, kv_tokens=16 * 1024, template="thinking-off")
    done = cli(tmp_path, *run_args("t", server, "--base-model", "m", "--ids-file", str(tmp_path / "ids.json"),
                                   "--threads", "0"))
    assert done.returncode == 0, done.stderr
    # Derived: cap 4096 / 4 = 1024; threads 16,384 / (1,024 + 2,048) = 5, but only 4 items.
    assert server.max_tokens_seen and set(server.max_tokens_seen) == {1024}
    assert server.probe_max_tokens_seen == [None, None]  # a derived cap is not known before the probe
    folder = tmp_path / "t/passes/step_0000_pass_1"
    manifest = EvalPassManifest.model_validate_json((folder / "manifest.json").read_text())
    assert (manifest.max_tokens, manifest.threads) == (1024, 4)
    assert {o.outcome for o in read_outcomes(folder / "outcomes.jsonl")} == {"truncated"}
    assert [(r.category, r.correct, r.total) for r in read_bfcl_by_category(tmp_path / "t/bfcl_by_category.csv")] \
        == [("irrelevance", 0, 2), ("simple_python", 0, 2)]
    assert manifest.truncated_items == ids
    # BFCL alone scores the cut, call-less irrelevance answers correct and the simple ones wrong.
    assert manifest.truncated_bfcl_correct == {"irrelevance": ["irrelevance_0", "irrelevance_1"]}
    assert "4 items had an answer cut at max_tokens=1024" in done.stderr
    assert "BFCL alone would have credited 2" in done.stderr
    # The rows count them too, against a count made here from BFCL's own files: the handler's count of cut
    # responses in each result line, and the failure lines of each score file.
    rows = {r.category: r for r in read_bfcl_by_category(tmp_path / "t/bfcl_by_category.csv")}
    for category in ids:
        result = result_path(folder / "bfcl/result", "toolcanary-served-FC", category)
        cut = {e["id"] for e in read_lines(result, strict=True) if e[TRUNCATED_FIELD] > 0}
        [score] = (folder / "bfcl/score").rglob(f"{RESULT_PREFIX}{category}{SCORE_SUFFIX}")
        failed = {json.loads(line)["id"] for line in score.read_text().splitlines()[1:] if line.strip()}
        row = rows[category]
        assert (row.truncated, row.truncated_bfcl_correct) == (len(cut), len(cut - failed)), category
        assert (row.overlong, row.overlong_bfcl_correct, row.correct_empty_reasoning) == (0, 0, 0), category
    assert {c: (r.truncated, r.truncated_bfcl_correct) for c, r in rows.items()} == \
        {"irrelevance": (2, 2), "simple_python": (2, 0)}
    # The server applied its template's thinking mode "off", as observed over HTTP.
    assert manifest.served_enable_thinking is False


def test_a_phase_that_stops_moving_is_refused_and_one_that_moves_is_not(tmp_path, monkeypatch):
    """The child here sleeps (a hung server) or writes a line a second (a slow but live phase)."""
    env = {"BFCL_PROJECT_ROOT": str(tmp_path)}
    monkeypatch.setattr(bfcl_process, "wrapper_argv", lambda args: [sys.executable, "-c", args[0]])
    hung = "import time; time.sleep(30)"
    with pytest.raises(ContractError, match="progress at least every 2 s") as refused:
        bfcl_process.run_phase("generate", [hung], env, tmp_path / "hung.log", stall_timeout_s=2)
    assert "--resume" in refused.value.fix
    live = "import time\nfor i in range(5):\n    print(i, flush=True); time.sleep(1)"
    assert bfcl_process.run_phase("generate", [live], env, tmp_path / "live.log", stall_timeout_s=2.5) >= 4
    with pytest.raises(ContractError, match="to finish within 2 s"):
        bfcl_process.run_phase("generate", [live], env, tmp_path / "capped.log", stall_timeout_s=60,
                               phase_timeout_s=2)


def test_the_expected_duration_is_logged_once_after_the_first_minute(tmp_path, monkeypatch, caplog):
    counts = iter([(0, 0), (3, 0), (6, 0), (9, 0)])
    monkeypatch.setattr(bfcl_process, "progress_counts", lambda folder: next(counts))
    clock = iter([1000.0, 1010.0, 1061.0, 1120.0])
    monkeypatch.setattr(bfcl_process.GenerateProgress, "clock", staticmethod(lambda: next(clock)))
    progress = bfcl_process.GenerateProgress(tmp_path, total=100, already=0)
    with caplog.at_level(logging.INFO, logger="toolcanary.evaluate.bfcl_process"):
        for _ in range(3):
            progress()
    progress.close()
    forecasts = [r.getMessage() for r in caplog.records if "should take" in r.getMessage()]
    # At 61 s, 3 items done: 97 left at 3 per 61 s is 1,972 s more, 2,033 s in all; logged once only.
    assert forecasts == ["generate: 3 items in the first 61 s; the 97 left should take about 33 min more "
                         "(34 min in all)"]


def test_an_explicit_cap_goes_with_the_probe_too(tmp_path, make_stub):
    """A policy that never ends its answer would otherwise write to the end of the context during the probe."""
    server = make_stub("oracle")
    done = cli(tmp_path, *run_args("t", server, "--base-model", "m", "--categories", "irrelevance",
                                   "--max-tokens", "48", "--stop-after", "generate"))
    assert done.returncode == 0, done.stderr
    assert server.probe_max_tokens_seen == [48, 48] and set(server.max_tokens_seen) == {48}
