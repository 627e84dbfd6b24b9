"""eval-all and watch: published checkpoints, repeats, and the serving interface (local process, compose).

The local test serves each step with the stub server as the "vLLM command", so the same code path that
starts vLLM on CPU is exercised end to end. The compose one checks the commands it would run.

    .venvs/eval/bin/python -m pytest tests/evaluate/test_schedule.py -q
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest
from conftest import cli, make_checkpoint

from toolcanary.common.loopback import free_port
from toolcanary.contract.csv_schemas import read_bfcl_by_category
from toolcanary.contract.errors import ContractError
from toolcanary.evaluate.schedule import eval_all, passes_for, published_checkpoints
from toolcanary.evaluate.serving import ComposeServing, LocalProcessServing
from toolcanary.evaluate.settings import EvalSettings
from toolcanary.serve.command import TOOL_FLAGS, served_model_name, vllm_command

STUB = Path(__file__).parent / "stub_server.py"


def publish(checkpoints: Path, run: str, steps: list[int]) -> None:
    lines = []
    for step in steps:
        folder = make_checkpoint(checkpoints, run, step, payload=f"weights {step}".encode())
        manifest = json.loads((folder / "manifest.json").read_text())
        lines.append(json.dumps({"step": step, "path": str(folder), "weights_sha256": manifest["weights_sha256"]}))
    (checkpoints / run / "published.jsonl").write_text("\n".join(lines) + "\n")


@pytest.mark.slow
def test_eval_all_scores_each_published_checkpoint_once_through_local_serving(tmp_path):
    checkpoints = tmp_path / "checkpoints"
    publish(checkpoints, "g", [0, 10])
    port = free_port()
    serve = f"{sys.executable} {STUB} --port {{port}} --model {{served_model}} --mode oracle"
    reports = tmp_path / "reports.txt"  # the report command records each call: the run it was given
    report = f"{sys.executable} -c \"import sys; open(sys.argv[2], 'a').write(sys.argv[1] + chr(10))\" {{run}} {reports}"
    args = ["--run", "g", "--serving", "local", "--serve-command", serve, "--serve-port", str(port),
            "--repeat-steps", "--categories", "irrelevance", "simple_python", "--sample", "1",
            "--report-command", report]
    done = cli(tmp_path, "eval-all", *args, checkpoints=checkpoints)
    assert done.returncode == 0, done.stderr
    assert "2 passes scored: step 0 pass 1, step 10 pass 1" in done.stdout
    assert reports.read_text() == "g\ng\n"  # the report page was rewritten after each scored step
    rows = read_bfcl_by_category(tmp_path / "g/bfcl_by_category.csv")
    assert sorted({(r.step, r.pass_index) for r in rows}) == [(0, 1), (10, 1)]
    # The stub cannot load a checkpoint in place: step 0 was served under the run's name, for reloading, and the
    # refused reload gave step 10 a server of its own under its step's name.
    assert (tmp_path / "g/serving/step_0000.log").read_text().startswith("stub oracle serving g-reloaded")
    assert (tmp_path / "g/serving/step_0010.log").read_text().startswith("stub oracle serving g-step0010")
    assert "cannot load it in place" in done.stderr
    again = cli(tmp_path, "eval-all", *args, checkpoints=checkpoints)
    assert again.returncode == 0 and "0 passes scored" in again.stdout
    assert reports.read_text() == "g\ng\n"  # nothing scored, nothing rewritten
    watched = cli(tmp_path, "watch", *args, "--until-step", "10", checkpoints=checkpoints)
    assert watched.returncode == 0 and "0 passes scored" in watched.stdout


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.mark.slow
def test_eval_all_on_two_gpus_scores_every_checkpoint_and_repeat_exactly_once(tmp_path):
    """Two stub servers, one per "GPU", take the published steps between them: every (step, pass) is scored
    once, each step was served on one of the two GPUs, and the rows of both went into the one CSV whole."""
    checkpoints = tmp_path / "checkpoints"
    publish(checkpoints, "g", [0, 10, 20])
    port = free_port()
    while not port_is_free(port + 1):  # the second server listens on the next port
        port = free_port()
    serve = f"{sys.executable} {STUB} --port {{port}} --model {{served_model}} --mode oracle --delay 0.05"
    args = ["--run", "g", "--serving", "local", "--serve-command", serve, "--serve-port", str(port), "--no-reload",
            "--gpus", "3", "5", "--repeat-steps", "0", "--repeat-passes", "2",
            "--categories", "irrelevance", "simple_python", "--sample", "1"]
    done = cli(tmp_path, "eval-all", *args, checkpoints=checkpoints)
    assert done.returncode == 0, done.stderr
    expected = [(0, 1), (0, 2), (10, 1), (20, 1)]
    assert "4 passes scored: " + ", ".join(f"step {s} pass {p}" for s, p in expected) in done.stdout
    rows = read_bfcl_by_category(tmp_path / "g/bfcl_by_category.csv")  # refuses a repeated (step, pass, category)
    assert sorted({(r.step, r.pass_index) for r in rows}) == expected and len(rows) == 2 * len(expected)
    gpus = {}
    for step in (0, 10, 20):
        first = (tmp_path / f"g/serving/step_{step:04d}.log").read_text().splitlines()[0]
        assert first.startswith(f"stub oracle serving g-step{step:04d}"), first
        gpus[step] = first.rsplit(" ", 1)[1]
    assert set(gpus.values()) == {"3", "5"}, gpus  # both servers served
    again = cli(tmp_path, "eval-all", *args, checkpoints=checkpoints)
    assert again.returncode == 0 and "0 passes scored" in again.stdout


@pytest.mark.slow
def test_passes_at_once_score_the_repeats_of_a_step_together_on_its_one_server(tmp_path):
    """--passes-at-once 2: the two passes of step 0 overlap in time on the step's one server (each started before
    the other finished), each pass sizes its threads for half the KV cache, and every row lands once."""
    checkpoints = tmp_path / "checkpoints"
    publish(checkpoints, "g", [0])
    serve = (f"{sys.executable} {STUB} --port {{port}} --model {{served_model}} --mode oracle --delay 0.3 "
             "--kv-tokens 24576")
    args = ["--run", "g", "--serving", "local", "--serve-command", serve, "--serve-port", str(free_port()),
            "--repeat-steps", "0", "--repeat-passes", "2", "--passes-at-once", "2", "--max-tokens", "1024",
            "--categories", "irrelevance", "simple_python", "--sample", "4"]
    done = cli(tmp_path, "eval-all", *args, checkpoints=checkpoints)
    assert done.returncode == 0, done.stderr
    assert "2 passes scored: step 0 pass 1, step 0 pass 2" in done.stdout
    assert (tmp_path / "g/serving/step_0000.log").read_text().count("stub oracle serving") == 1  # one server
    manifests = [json.loads((tmp_path / f"g/passes/step_0000_pass_{p}/manifest.json").read_text()) for p in (1, 2)]
    first, second = manifests
    assert first["started_at"] < second["finished_at"] and second["started_at"] < first["finished_at"], manifests
    # 24,576 tokens / 2 passes / (1,024 + 2,048) = 4 threads each (one pass alone would get 8)
    assert [m["threads"] for m in manifests] == [4, 4]
    rows = read_bfcl_by_category(tmp_path / "g/bfcl_by_category.csv")
    assert sorted((r.pass_index, r.category) for r in rows) == [(p, c) for p in (1, 2)
                                                                  for c in ("irrelevance", "simple_python")]


def test_repeats_follow_the_toolcanary_design():
    settings = EvalSettings()
    assert [passes_for(s, settings) for s in (0, 10, 150, 200)] == [[1, 2, 3], [1], [1, 2, 3], [1, 2, 3]]


def test_compose_serving_runs_up_with_the_step_then_stop():
    calls = []
    serving = ComposeServing("docker compose -f compose.yaml", "serve", execute=lambda argv, env: calls.append((argv, env)))
    serving.start(200, None, "grpo1-step0200")
    serving.stop()
    (up, up_env), (stop, _) = calls
    assert up == ["docker", "compose", "-f", "compose.yaml", "up", "-d", "serve"]
    assert (up_env["STEP"], up_env["TOOLCANARY_SERVE_MODEL_NAME"]) == ("200", "grpo1-step0200")
    assert stop == ["docker", "compose", "-f", "compose.yaml", "stop", "serve"]


def test_the_local_serving_command_is_the_shared_vllm_command_line(tmp_path):
    argv = vllm_command("/ckpt/step_0200", served_model_name("grpo1", 200), port=8012, python="python")
    assert argv[:3] == ["python", "-m", "vllm.entrypoints.openai.api_server"]
    assert "grpo1-step0200" in argv and " ".join(TOOL_FLAGS) in " ".join(argv)
    template = "python -m vllm.entrypoints.openai.api_server --model {model_dir} --served-model-name {served_model} --port {port}"
    local = LocalProcessServing(template, 8012, tmp_path)
    assert local.argv(200, Path("/ckpt/step_0200"), "grpo1-step0200")[4:] == [
        "/ckpt/step_0200", "--served-model-name", "grpo1-step0200", "--port", "8012"]
    with pytest.raises(ContractError, match="TOOLCANARY_EVALUATE_SERVE_COMMAND"):
        LocalProcessServing("", 8012, tmp_path)


def test_a_bad_published_line_is_refused_with_its_line_number(tmp_path):
    (tmp_path / "g").mkdir()
    (tmp_path / "g/published.jsonl").write_text('{"step": 10, "path": "x", "weights_sha256": "ab"}\n{"step": 20}\n')
    with pytest.raises(ContractError, match="line 2"):
        published_checkpoints(tmp_path, "g")


def test_settings_come_from_the_environment_with_clear_errors():
    settings = EvalSettings.from_env({"TOOLCANARY_RESULTS_DIR": "/r", "TOOLCANARY_EVALUATE_THREADS": "3",
                                      "TOOLCANARY_EVALUATE_REPEAT_STEPS": "0,50"})
    assert (str(settings.results_dir), settings.threads, settings.repeat_steps) == ("/r", 3, (0, 50))
    with pytest.raises(ContractError, match="TOOLCANARY_EVALUATE_THREADS"):
        EvalSettings.from_env({"TOOLCANARY_EVALUATE_THREADS": "many"})


def test_a_folder_name_never_adds_arguments_to_the_serving_command(tmp_path):
    template = "vllm serve {model_dir} --served-model-name {served_model} --port {port}"
    local = LocalProcessServing(template, 8012, tmp_path)
    sneaky = Path("/ckpt/step_0002 --trust-remote-code")
    assert local.argv(2, sneaky, "g-step0002") == [
        "vllm", "serve", "/ckpt/step_0002 --trust-remote-code", "--served-model-name", "g-step0002", "--port", "8012"]
    assert local.argv(2, Path("/ckpt/it's"), "g-step0002")[2] == "/ckpt/it's"
    with pytest.raises(ContractError, match="only fields are"):
        LocalProcessServing("vllm serve {model}", 8012, tmp_path).argv(2, sneaky, "g-step0002")


@pytest.mark.slow
def test_eval_all_rehashes_each_checkpoint_and_one_bad_step_does_not_stop_the_others(tmp_path):
    checkpoints = tmp_path / "checkpoints"
    publish(checkpoints, "g", [0, 10, 20, 30, 40])
    (checkpoints / "g/step_0010/model.safetensors").write_bytes(b"weights 1O")  # changed after publication
    elsewhere = make_checkpoint(tmp_path / "elsewhere", "g", 20, payload=b"weights 20")
    ledger = checkpoints / "g/published.jsonl"
    ledger.write_text(ledger.read_text().replace(str(checkpoints / "g/step_0020"), str(elsewhere)))
    linked = checkpoints / "g/step_0030/model.safetensors"
    (tmp_path / "outside.bin").write_bytes(linked.read_bytes())
    linked.unlink()
    linked.symlink_to(tmp_path / "outside.bin")
    manifest_path = checkpoints / "g/step_0040/manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["weight_files"] = ["../step_0000/model.safetensors"]
    manifest_path.write_text(json.dumps(manifest))
    port = free_port()
    serve = f"{sys.executable} {STUB} --port {{port}} --model {{served_model}} --mode oracle"
    done = cli(tmp_path, "eval-all", "--run", "g", "--serving", "local", "--serve-command", serve, "--serve-port",
               str(port), "--repeat-steps", "--categories", "irrelevance", "simple_python", "--sample", "1",
               checkpoints=checkpoints)
    assert done.returncode == 2, done.stderr
    assert "4 refused" in done.stderr and "1 passes scored: step 0 pass 1" in done.stderr
    assert "step 10: " in done.stderr and "modified after publishing" in done.stderr
    assert "step 20: " in done.stderr and "directly inside" in done.stderr
    assert "step 30: " in done.stderr and "is a link to" in done.stderr
    assert "step 40: " in done.stderr and "no '..'" in done.stderr
    rows = read_bfcl_by_category(tmp_path / "g/bfcl_by_category.csv")
    assert {(r.step, r.pass_index) for r in rows} == {(0, 1)}
    assert sorted(p.name for p in (tmp_path / "g/serving").iterdir()) == ["step_0000.log"]  # nothing else served


def test_eval_all_over_compose_refuses_a_gpu_the_running_trainer_holds_before_any_step(tmp_path):
    config = {"services": {name: {"deploy": {"resources": {"reservations": {"devices": [{"device_ids": ids}]}}}}
                           for name, ids in (("trainer", ["0", "1"]), ("simulator", ["2"]), ("serve", ["1"]))}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    stub = tmp_path / "compose"
    stub.write_text(f"#!/bin/sh\necho \"$*\" >> {tmp_path}/calls\ncase \" $* \" in\n"
                    f"  *' ps '*) echo simulator; echo trainer ;;\n  *' config '*) cat {tmp_path}/config.json ;;\nesac\n")
    stub.chmod(0o755)
    settings = EvalSettings(serving="compose", compose_command=str(stub), checkpoints_dir=tmp_path / "checkpoints",
                            results_dir=tmp_path / "results")
    with pytest.raises(ContractError) as refused:
        eval_all(settings, "g")
    assert "GPU 1 (trainer)" in str(refused.value) and "serve on a free one" not in str(refused.value)
    assert not [line for line in (tmp_path / "calls").read_text().splitlines() if line.startswith("up")]


def test_compose_serving_on_a_gpu_runs_in_a_project_of_its_own_with_that_gpu_and_port():
    calls = []
    serving = ComposeServing("docker compose", "serve", execute=lambda argv, env: calls.append((argv, env)),
                             gpu="3", port=8001)
    serving.start(20, None, "grpo1-step0020")
    serving.stop()
    (up, up_env), (stop, stop_env) = calls
    assert up == ["docker", "compose", "-p", "toolcanary-serve-gpu3", "up", "-d", "serve"]
    assert stop == ["docker", "compose", "-p", "toolcanary-serve-gpu3", "stop", "serve"]
    assert (up_env["SERVE_GPU"], up_env["SERVE_PORT"], up_env["STEP"]) == ("3", "8001", "20")
    assert (stop_env["SERVE_GPU"], stop_env["SERVE_PORT"]) == ("3", "8001")


def test_a_report_that_fails_is_logged_and_scoring_goes_on(caplog):
    from toolcanary.evaluate.schedule import refresh_report
    from toolcanary.evaluate.settings import EvalSettings

    assert refresh_report(EvalSettings(report_command=""), "g") is False  # none configured: nothing runs
    failing = EvalSettings(report_command=f"{sys.executable} -c \"import sys; sys.exit('no CSV for {{run}}')\"")
    with caplog.at_level("ERROR"):
        assert refresh_report(failing, "g") is False
        assert refresh_report(EvalSettings(report_command="/nonexistent/make_figures --run {run}"), "g") is False
    assert "report of run g not refreshed" in caplog.text and "exited 1: no CSV for g; scoring goes on" in caplog.text
    assert "/nonexistent/make_figures could not run" in caplog.text
