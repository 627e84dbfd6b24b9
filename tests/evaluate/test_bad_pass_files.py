"""A damaged request.json or sample.json stops the client before any request, saying what it expected and what
to do (the files' types live in toolcanary.contract.pass_files).

Run: .venvs/eval/bin/python -m pytest tests/evaluate/test_bad_pass_files.py -q
"""

from __future__ import annotations

import json

from conftest import cli

BASE = ["run", "--run", "r", "--step", "0", "--pass", "1", "--model", "m", "--base-model", "m",
        "--base-url", "http://127.0.0.1:9/v1", "--categories", "irrelevance"]


def test_a_corrupt_request_json_refuses_the_resume(tmp_path):
    folder = tmp_path / "r/passes/step_0000_pass_1"
    folder.mkdir(parents=True)
    (folder / "request.json").write_text('{"run": "r", "step": 0')
    done = cli(tmp_path, *BASE, "--resume")
    assert done.returncode == 2
    assert "request.json: expected a pass request with the fields" in done.stderr
    assert "move it away and score the pass again" in done.stderr


def test_a_sample_json_without_its_seed_is_refused(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r/sample.json").write_text(json.dumps({"size": 2, "ids": {"irrelevance": ["irrelevance_0"]}}))
    done = cli(tmp_path, *BASE, "--sample", "2", "--seed", "0")
    assert done.returncode == 2
    assert "sample.json: expected JSON" in done.stderr and "seed: Field required" in done.stderr
    assert "restore it, or score under another --run" in done.stderr
    assert not (tmp_path / "r/passes").exists()  # refused before any pass folder was made
