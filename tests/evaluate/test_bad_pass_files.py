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


def test_a_request_json_that_is_not_utf8_or_holds_a_non_finite_number_is_refused(tmp_path):
    folder = tmp_path / "r/passes/step_0000_pass_1"
    folder.mkdir(parents=True)
    for raw, problem in ((b'{"run": "r\xff"}', "invalid unicode"), (b'{"temperature": 1e999}', "finite number")):
        (folder / "request.json").write_bytes(raw)
        done = cli(tmp_path, *BASE, "--resume")
        assert done.returncode == 2, done.stderr
        assert "request.json: expected a pass request with the fields" in done.stderr and problem in done.stderr
        assert "Traceback" not in done.stderr


def test_a_deeply_nested_or_non_utf8_sample_json_is_refused(tmp_path):
    (tmp_path / "r").mkdir()
    for raw in (b'{"size": 2, "seed": 0, "ids": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
                b'{"size": 2, "seed": 0, "ids": {"irrelevance": ["\xfe"]}}'):
        (tmp_path / "r/sample.json").write_bytes(raw)
        done = cli(tmp_path, *BASE, "--sample", "2", "--seed", "0")
        assert done.returncode == 2, done.stderr
        assert "sample.json: expected JSON" in done.stderr and "Invalid JSON" in done.stderr
        assert "Traceback" not in done.stderr
        assert not (tmp_path / "r/passes").exists()


def test_a_deeply_nested_or_non_utf8_checkpoint_manifest_is_refused(tmp_path):
    folder = tmp_path / "checkpoints/r/step_0000"
    folder.mkdir(parents=True)
    base = [*BASE[:BASE.index("--base-model")], *BASE[BASE.index("--base-model") + 2:]]
    for raw in (b'{"run": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", b'{"run": "\xff"}'):
        (folder / "manifest.json").write_bytes(raw)
        done = cli(tmp_path, *base, "--checkpoint-dir", str(folder))
        assert done.returncode == 2, done.stderr
        assert "manifest.json: expected a complete checkpoint manifest (UTF-8 JSON)" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
