"""A pass killed at any point and rerun with --resume ends exactly like an uninterrupted pass.

Kill points: during generate (the client is SIGKILLed; its bfcl-eval child dies with it), after generate
(--stop-after), during evaluate, after the rows were written, and between rows and the finished manifest.
A resume against other checkpoint weights is refused, so one pass never mixes two checkpoints.

    .venvs/eval/bin/python -m pytest tests/evaluate/test_resume.py -q
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import REPO, cli, make_checkpoint, read_csv, run_args

from toolcanary.evaluate.bfcl_files import progress_counts

pytestmark = pytest.mark.slow
CATS = ["simple_python", "irrelevance", "live_multiple", "multi_turn_base"]
SAMPLE = ["--categories", *CATS, "--sample", "3", "--seed", "7"]


def outcomes(folder) -> list[str]:
    return (folder / "outcomes.jsonl").read_text().splitlines()


def rows_of(results, run) -> list[str]:
    return [line.split(",", 2)[2] for line in read_csv(results / run / "bfcl_by_category.csv")[1:]]


@pytest.fixture(scope="module")
def reference(tmp_path_factory, make_stub):
    """An uninterrupted pass over the same items."""
    results = tmp_path_factory.mktemp("reference")
    ckpt = make_checkpoint(results / "checkpoints", "ref", 0)
    done = cli(results, *run_args("ref", make_stub("oracle"), "--checkpoint-dir", str(ckpt), *SAMPLE))
    assert done.returncode == 0, done.stderr
    return outcomes(results / "ref/passes/step_0000_pass_1"), rows_of(results, "ref")


def start_client(results, args) -> subprocess.Popen:
    env = {**os.environ, "TOOLCANARY_RESULTS_DIR": str(results), "TOOLCANARY_EVALUATE_THREADS": "2"}
    return subprocess.Popen([sys.executable, "-m", "toolcanary.evaluate", *args], env=env, cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def kill_when(client: subprocess.Popen, ready, timeout: float = 180) -> None:
    start = time.monotonic()
    while not ready():
        assert client.poll() is None, "the client finished before the kill point"
        assert time.monotonic() - start < timeout
        time.sleep(0.1)
    client.send_signal(signal.SIGKILL)
    client.wait()
    time.sleep(1)  # let the kernel deliver the parent-death signal to the bfcl-eval child


def test_killed_during_generate_then_resumed(tmp_path, make_stub, reference):
    ckpt = make_checkpoint(tmp_path / "checkpoints", "r", 0)
    folder = tmp_path / "r/passes/step_0000_pass_1"
    slow = make_stub("oracle", delay=0.3)
    client = start_client(tmp_path, run_args("r", slow, "--checkpoint-dir", str(ckpt), *SAMPLE))
    kill_when(client, lambda: progress_counts(folder / "bfcl/result")[0] >= 4)
    partial = progress_counts(folder / "bfcl/result")[0]
    assert 4 <= partial < 12
    # Other weights under the same step must not finish this pass.
    other = make_checkpoint(tmp_path / "other", "r", 0, payload=b"other weights")
    refused = cli(tmp_path, *run_args("r", slow, "--checkpoint-dir", str(other), *SAMPLE, "--resume"))
    assert refused.returncode == 2 and "Never mix checkpoints" in refused.stderr
    done = cli(tmp_path, *run_args("r", make_stub("oracle"), "--checkpoint-dir", str(ckpt), *SAMPLE, "--resume"))
    assert done.returncode == 0, done.stderr
    assert (outcomes(folder), rows_of(tmp_path, "r")) == reference


def test_stopped_after_generate_then_resumed(tmp_path, make_stub, reference):
    ckpt = make_checkpoint(tmp_path / "checkpoints", "r", 0)
    server = make_stub("oracle")
    first = cli(tmp_path, *run_args("r", server, "--checkpoint-dir", str(ckpt), *SAMPLE, "--stop-after", "generate"))
    assert first.returncode == 0 and "finish with --resume" in first.stdout
    assert rows_of(tmp_path, "r") == []
    again = cli(tmp_path, *run_args("r", server, "--checkpoint-dir", str(ckpt), *SAMPLE))
    assert again.returncode == 2 and "a fresh result folder" in again.stderr
    done = cli(tmp_path, *run_args("r", server, "--checkpoint-dir", str(ckpt), *SAMPLE, "--resume"))
    assert done.returncode == 0, done.stderr
    assert (outcomes(tmp_path / "r/passes/step_0000_pass_1"), rows_of(tmp_path, "r")) == reference


def test_killed_during_evaluate_then_resumed_and_resumed_again(tmp_path, make_stub, reference):
    ckpt = make_checkpoint(tmp_path / "checkpoints", "r", 0)
    folder = tmp_path / "r/passes/step_0000_pass_1"
    server = make_stub("oracle")
    args = run_args("r", server, "--checkpoint-dir", str(ckpt), *SAMPLE)
    client = start_client(tmp_path, args)
    kill_when(client, lambda: (folder / "logs/evaluate.log").exists())
    assert rows_of(tmp_path, "r") == []
    assert cli(tmp_path, *args, "--resume").returncode == 0
    assert (outcomes(folder), rows_of(tmp_path, "r")) == reference
    # Resuming a finished pass changes nothing.
    assert cli(tmp_path, *args, "--resume").returncode == 0
    assert rows_of(tmp_path, "r") == reference[1]
    # Killed after the rows were appended but before the manifest was marked finished: no second copy.
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "finished_at": None}))
    assert cli(tmp_path, *args, "--resume").returncode == 0
    assert rows_of(tmp_path, "r") == reference[1]
    assert json.loads((folder / "manifest.json").read_text())["finished_at"]
    # Without --resume, a scored pass is refused outright.
    refused = cli(tmp_path, *args)
    assert refused.returncode == 2 and "--pass 2" in refused.stderr
