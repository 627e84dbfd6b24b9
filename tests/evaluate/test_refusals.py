"""Guards that refuse a pass before or after bfcl-eval runs: broken servers, reused folders, bad ids.

Each refusal must exit non-zero, say what was found and what to do, and leave no rows in the run's CSV.
A server that errors on every request must never show up as 100 % abstention.

    .venvs/eval/bin/python -m pytest tests/evaluate/test_refusals.py -q
"""

from __future__ import annotations

import json
import os

import pytest
from conftest import cli, make_checkpoint, read_csv, run_args

from toolcanary.contract import BusyError
from toolcanary.contract.manifests import PublishedCheckpoint, append_published, checkpoint_files
from toolcanary.evaluate import runner

CATS = ["irrelevance", "simple_python"]


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "kind"), [("error", "request_error"), ("drop", "request_error"), ("empty", "empty_response")])
def test_a_failing_server_fails_the_pass_instead_of_scoring_perfect_abstention(tmp_path, make_stub, mode, kind):
    server = make_stub(mode)
    done = cli(tmp_path, *run_args("r", server, "--base-model", "m", "--categories", *CATS, "--sample", "3"))
    assert done.returncode == 3, done.stderr
    assert "failed requests" in done.stderr and "--resume" in done.stderr
    assert read_csv(tmp_path / "r" / "bfcl_by_category.csv") == []
    failure = json.loads((tmp_path / "r/passes/step_0000_pass_1/failure.json").read_text())
    assert failure["counts"] == {kind: 6}
    assert not (tmp_path / "r/passes/step_0000_pass_1/outcomes.jsonl").exists()


def test_a_server_without_the_tool_parser_fails_the_probe(tmp_path, make_stub):
    server = make_stub("noparser")
    done = cli(tmp_path, *run_args("r", server, "--base-model", "m", "--categories", *CATS))
    assert done.returncode == 2
    assert "raw <tool_call> text" in done.stderr and "--tool-call-parser hermes" in done.stderr
    assert read_csv(tmp_path / "r" / "bfcl_by_category.csv") == []
    assert not (tmp_path / "r/passes/step_0000_pass_1/bfcl").exists()


def test_a_server_that_is_down_fails_the_probe_and_leaves_the_pass_fresh(tmp_path, make_stub):
    server = make_stub("oracle")
    server.stop()
    done = cli(tmp_path, *run_args("r", server, "--base-model", "m", "--categories", *CATS))
    assert done.returncode == 2 and "ConnectError" in done.stderr
    assert [p.name for p in (tmp_path / "r/passes/step_0000_pass_1").iterdir()] == [".lock"]


def test_a_server_serving_another_model_fails_the_probe(tmp_path, make_stub):
    server = make_stub("oracle", model="run-step0150")
    args = run_args("r", server, "--base-model", "m", "--categories", *CATS)
    args[args.index("--model") + 1] = "run-step0200"
    done = cli(tmp_path, *args)
    assert done.returncode == 2
    assert "'run-step0200'" in done.stderr and "run-step0150" in done.stderr


def test_unknown_sample_ids_are_refused_with_a_suggestion(tmp_path, make_stub):
    server = make_stub("oracle")
    ids = tmp_path / "ids.json"
    ids.write_text(json.dumps({"memory_kv": ["memory_kv_0"], "simple_python": ["simple_python_1", "simple_python_9999"]}))
    done = cli(tmp_path, *run_args("r", server, "--base-model", "m", "--ids-file", str(ids)))
    assert done.returncode == 2
    assert "'memory_kv_0' in memory_kv (did you mean 'memory_kv_" in done.stderr
    assert "simple_python_9999" in done.stderr and "simple_python_1'" not in done.stderr
    assert not (tmp_path / "r" / "passes").exists()


def test_an_unknown_category_is_refused_with_a_suggestion(tmp_path, make_stub):
    server = make_stub("oracle")
    done = cli(tmp_path, *run_args("r", server, "--base-model", "m", "--categories", "irrelevence"))
    assert done.returncode == 2 and "Did you mean" in done.stderr and "'irrelevance'" in done.stderr


def test_a_pass_folder_that_holds_results_is_never_reused(tmp_path, make_stub):
    server = make_stub("oracle")
    folder = tmp_path / "r/passes/step_0000_pass_1/bfcl/result"
    folder.mkdir(parents=True)
    (folder / "old.json").write_text("{}\n")
    done = cli(tmp_path, *run_args("r", server, "--base-model", "m", "--categories", *CATS))
    assert done.returncode == 2
    assert "a fresh result folder" in done.stderr and "--resume" in done.stderr
    assert (folder / "old.json").read_text() == "{}\n"


def test_a_missing_checkpoint_needs_an_explicit_base_model(tmp_path, make_stub):
    server = make_stub("oracle")
    done = cli(tmp_path, *run_args("r", server, "--categories", *CATS, step=200))
    assert done.returncode == 2
    assert "step_0200" in done.stderr and "--base-model" in done.stderr


def _published_checkpoint(root, run: str, step: int):
    """A checkpoint whose manifest lists every file, announced in its run's published.jsonl."""
    folder = make_checkpoint(root, run, step)
    (folder / "config.json").write_text('{"hidden_size": 8}')
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"] = {k: v.model_dump() for k, v in checkpoint_files(folder).items()}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    append_published(folder.parent, PublishedCheckpoint(step=step, path=folder.name,
                                                        weights_sha256=manifest["weights_sha256"]))
    return folder


@pytest.mark.parametrize(("tamper", "named"), [
    (lambda f: (f / "config.json").write_text('{"hidden_size": 9}'), "config.json"),
    (lambda f: (f / "extra.safetensors").write_bytes(b"unlisted"), "extra.safetensors"),
])
def test_a_checkpoint_changed_after_publishing_is_refused_before_a_request(tmp_path, make_stub, tamper, named):
    checkpoints = tmp_path / "checkpoints"
    folder = _published_checkpoint(checkpoints, "tampered", 10)
    tamper(folder)
    server = make_stub("oracle", model="tampered-step0010")
    done = cli(tmp_path, *run_args("tampered", server, "--categories", *CATS, step=10), checkpoints=checkpoints)
    assert done.returncode == 2 and named in done.stderr, done.stderr[-2000:]
    assert server.requests == 0 and not (tmp_path / "tampered" / "bfcl_by_category.csv").exists()


def test_every_subcommand_has_examples_in_its_help(tmp_path):
    for command in ("run", "eval-all", "watch"):
        done = cli(tmp_path, command, "--help")
        assert done.returncode == 0 and "examples:" in done.stdout and "python -m toolcanary.evaluate" in done.stdout


def test_a_dot_env_in_the_project_root_is_refused_and_inherited_server_settings_are_dropped(tmp_path, monkeypatch):
    from toolcanary.contract.errors import ContractError
    from toolcanary.evaluate.bfcl_process import bfcl_env, run_phase

    monkeypatch.setenv("OPENAI_BASE_URL", "http://stale:1/v1")
    monkeypatch.setenv("BFCL_PROJECT_ROOT", "/somewhere/else")
    env = bfcl_env(tmp_path, "http://127.0.0.1:9/v1", "EMPTY", "m", "toolcanary-served-FC", 5.0, 0, 0)
    assert (env["OPENAI_BASE_URL"], env["BFCL_PROJECT_ROOT"]) == ("http://127.0.0.1:9/v1", str(tmp_path))
    (tmp_path / ".env").write_text("OPENAI_BASE_URL=http://stale:1/v1\n")
    with pytest.raises(ContractError, match="override the server address"):
        run_phase("generate", ["generate"], env, tmp_path / "generate.log", 5.0)
    assert not (tmp_path / "generate.log").exists()


def test_a_registry_key_bfcl_would_mangle_is_refused(tmp_path):
    from toolcanary.contract.errors import ContractError
    from toolcanary.evaluate.runner import PassOptions, run_pass
    from toolcanary.evaluate.settings import EvalSettings

    for key in ("toolcanary_served-FC", "toolcanary-served"):
        with pytest.raises(ContractError, match="without '_' that contains 'FC'"):
            run_pass(EvalSettings(results_dir=tmp_path, registry_key=key), PassOptions("r", 0, 1, "m", base_model="m"))
    assert not (tmp_path / "r").exists()


def test_a_pass_folder_another_client_holds_is_busy_not_broken(tmp_path):
    paths = runner.PassPaths.of(tmp_path, "busy-run", 0, 1)
    held = runner.lock(paths)
    try:
        with pytest.raises(BusyError, match="Another evaluation of this pass is running"):
            runner.lock(paths)
    finally:
        os.close(held)
    os.close(runner.lock(paths))  # free again once the holder let go
