"""Two passes of one step in one run, the manifest, and guard 5 on the real score files they left.

    .venvs/eval/bin/python -m pytest tests/evaluate/test_passes_and_scores.py -q
"""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest
from conftest import SMALL, cli, make_checkpoint, run_args

from toolcanary.contract.csv_schemas import read_bfcl_by_category
from toolcanary.contract.errors import ContractError
from toolcanary.contract.manifests import EvalPassManifest
from toolcanary.evaluate.bfcl_files import read_scores

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def two_passes(tmp_path_factory, make_stub):
    results = tmp_path_factory.mktemp("two")
    ckpt = make_checkpoint(results / "checkpoints", "two", 150)
    server = make_stub("oracle", model="two-step0150")
    for pass_index in (1, 2):
        done = cli(results, *run_args("two", server, "--checkpoint-dir", str(ckpt), "--categories", *SMALL,
                                      "--sample", "2", "--seed", "3", step=150, pass_index=pass_index))
        assert done.returncode == 0, done.stderr
    return results / "two"


def test_two_passes_of_one_step_append_one_complete_set_of_rows_each(two_passes):
    rows = read_bfcl_by_category(two_passes / "bfcl_by_category.csv")
    assert sorted({(r.step, r.pass_index) for r in rows}) == [(150, 1), (150, 2)]
    by_pass = {p: sorted((r.category, r.correct, r.total) for r in rows if r.pass_index == p) for p in (1, 2)}
    assert by_pass[1] == by_pass[2] and len(by_pass[1]) == len(SMALL)
    outcomes = [(two_passes / f"passes/step_0150_pass_{p}/outcomes.jsonl").read_text() for p in (1, 2)]
    assert outcomes[0] == outcomes[1] and len(outcomes[0].splitlines()) == 2 * len(SMALL)


def test_the_manifest_records_what_produced_the_rows(two_passes):
    manifests = [EvalPassManifest.model_validate_json((two_passes / f"passes/step_0150_pass_{p}/manifest.json").read_text())
                 for p in (1, 2)]
    first = manifests[0]
    assert first.sample_ids == manifests[1].sample_ids and all(len(v) == 2 for v in first.sample_ids.values())
    assert first.checkpoint is not None and first.weights_sha256 == first.checkpoint.weights_sha256
    assert (first.served_model, first.bfcl_eval_version, first.registry_key) == ("two-step0150", "2026.3.23", "toolcanary-served-FC")
    assert first.categories == SMALL and first.threads == 4 and first.overlong_counted_wrong
    assert first.finished_at and {"preflight", "generate", "evaluate", "total"} <= set(first.timings_s)
    assert json.loads((two_passes / "sample.json").read_text())["ids"] == first.sample_ids


def _score_dir_copy(two_passes, tmp_path):
    source = two_passes / "passes/step_0150_pass_1/bfcl/score"
    copy = tmp_path / "score"
    shutil.copytree(source, copy)
    manifest = json.loads((two_passes / "passes/step_0150_pass_1/manifest.json").read_text())
    return copy, manifest["sample_ids"]


def test_score_files_of_the_pass_read_back(two_passes, tmp_path):
    copy, ids = _score_dir_copy(two_passes, tmp_path)
    scores = read_scores(copy, ids, not_before=0)
    assert set(scores) == set(SMALL) and all(s.total == 2 for s in scores.values())


def test_a_missing_category_is_refused(two_passes, tmp_path):
    copy, ids = _score_dir_copy(two_passes, tmp_path)
    next(copy.rglob("BFCL_v4_irrelevance_score.json")).unlink()
    with pytest.raises(ContractError, match=r"missing \['irrelevance'\]"):
        read_scores(copy, ids, not_before=0)


def test_score_files_left_from_another_pass_are_refused(two_passes, tmp_path):
    copy, ids = _score_dir_copy(two_passes, tmp_path)
    stale = next(copy.rglob("BFCL_v4_irrelevance_score.json"))
    shutil.copy(stale, stale.with_name("BFCL_v4_parallel_score.json"))
    with pytest.raises(ContractError, match=r"unexpected \['parallel'\]"):
        read_scores(copy, ids, not_before=0)
    stale.with_name("BFCL_v4_parallel_score.json").unlink()
    with pytest.raises(ContractError, match="older file"):
        read_scores(copy, ids, not_before=time.time() + 60)
    fewer = {**ids, "irrelevance": ids["irrelevance"][:1]}
    with pytest.raises(ContractError, match="does not belong to this pass"):
        read_scores(copy, fewer, not_before=0)
    os.utime(stale)


def test_the_item_sample_can_come_from_the_environment(tmp_path, make_stub, monkeypatch):
    """The stack sets the sample in .env (TOOLCANARY_EVALUATE_SAMPLE / _SEED); --sample and --seed still win."""
    monkeypatch.setenv("TOOLCANARY_EVALUATE_SAMPLE", "1")
    monkeypatch.setenv("TOOLCANARY_EVALUATE_SEED", "5")
    ckpt = make_checkpoint(tmp_path / "checkpoints", "envsample", 0)
    server = make_stub("oracle", model="envsample-step0000")
    done = cli(tmp_path, *run_args("envsample", server, "--checkpoint-dir", str(ckpt), "--categories", *SMALL))
    assert done.returncode == 0, done.stderr
    sample = json.loads((tmp_path / "envsample" / "sample.json").read_text())
    assert (sample["size"], sample["seed"]) == (1, 5) and all(len(ids) == 1 for ids in sample["ids"].values())
    done = cli(tmp_path, *run_args("envsample", server, "--checkpoint-dir", str(ckpt), "--categories", *SMALL,
                                   "--sample", "2", pass_index=2))
    assert done.returncode != 0 and "sample" in done.stderr  # a run keeps one sample; the flag was heard


def test_multi_turn_categories_can_take_a_smaller_sample_kept_for_every_pass(tmp_path, make_stub):
    """--sample-multi-turn sizes the multi-turn categories apart (each item costs many model calls); sample.json
    pins both sizes, the rows count them, and a later pass asking for another size is refused."""
    ckpt = make_checkpoint(tmp_path / "checkpoints", "mt", 0)
    server = make_stub("oracle", model="mt-step0000")
    done = cli(tmp_path, *run_args("mt", server, "--checkpoint-dir", str(ckpt), "--categories", *SMALL,
                                   "--sample", "2", "--sample-multi-turn", "1"))
    assert done.returncode == 0, done.stderr
    sample = json.loads((tmp_path / "mt" / "sample.json").read_text())
    assert (sample["size"], sample["multi_turn_size"]) == (2, 1)
    sizes = {category: len(ids) for category, ids in sample["ids"].items()}
    assert sizes == {c: 1 if c.startswith("multi_turn") else 2 for c in SMALL}
    totals = {r.category: r.total for r in read_bfcl_by_category(tmp_path / "mt" / "bfcl_by_category.csv")}
    assert totals == sizes
    done = cli(tmp_path, *run_args("mt", server, "--checkpoint-dir", str(ckpt), "--categories", *SMALL,
                                   "--sample", "2", "--sample-multi-turn", "2", pass_index=2))
    assert done.returncode != 0
    assert "--sample 2 --sample-multi-turn 1 --seed 0 for every pass" in done.stderr


def test_a_multi_turn_sample_without_a_sample_is_refused(tmp_path, make_stub):
    server = make_stub("oracle", model="alone-step0000")
    ckpt = make_checkpoint(tmp_path / "checkpoints", "alone", 0)
    done = cli(tmp_path, *run_args("alone", server, "--checkpoint-dir", str(ckpt), "--sample-multi-turn", "1"))
    assert done.returncode == 2 and "--sample-multi-turn" in done.stderr and "Add --sample K" in done.stderr
