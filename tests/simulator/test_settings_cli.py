"""Settings precedence (flag > environment > default), clear errors for bad values, and the CLI's help.

Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_settings_cli.py -q
"""

from __future__ import annotations

from pathlib import Path

import pytest

from toolcanary.contract import ContractError
from toolcanary.simulator.__main__ import main
from toolcanary.simulator.settings import REPO_ROOT, SimulatorSettings


def test_defaults_then_environment_then_flags():
    assert SimulatorSettings.from_env({}).runs_dir == REPO_ROOT / "volumes" / "runs"
    env = {"TOOLCANARY_RUNS_DIR": "/data/runs", "TOOLCANARY_SIMULATOR_SEED": "5",
           "TOOLCANARY_SIMULATOR_UPSTREAMS": "http://a:8000, http://b:8000", "TOOLCANARY_SIMULATOR_TOKEN": ""}
    from_env = SimulatorSettings.from_env(env)
    assert from_env.runs_dir == Path("/data/runs") and from_env.seed == 5 and from_env.token is None
    assert from_env.upstreams == ["http://a:8000", "http://b:8000"]
    assert SimulatorSettings.from_env(env, seed=9, runs_dir=None).seed == 9


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"TOOLCANARY_SIMULATOR_NO_CALL_FRACTION": "1.5"}, "TOOLCANARY_SIMULATOR_NO_CALL_FRACTION"),
        ({"TOOLCANARY_SIMULATOR_BACKEND": "gpt"}, "TOOLCANARY_SIMULATOR_BACKEND"),
        ({"TOOLCANARY_SIMULATOR_PORT": "eighty"}, "--port"),
    ],
)
def test_a_bad_setting_names_its_flag_and_variable(env, named):
    with pytest.raises(ContractError, match=named):
        SimulatorSettings.from_env(env)


def test_every_verb_has_help_with_examples(capsys):
    for argv, verb in ((["--help"], "serve"), (["serve", "--help"], "serve"), (["validate", "--help"], "validate"),
                       (["build-library", "--help"], "build-library")):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 0
        examples = capsys.readouterr().out.split("examples:")[1].strip().splitlines()
        assert 2 <= len(examples) <= 4
        assert all(line.lstrip().startswith(("python -m toolcanary.simulator", "TOOLCANARY_")) for line in examples)
        assert any(f"toolcanary.simulator {verb}" in line for line in examples)


def test_serve_refuses_bad_input_with_a_message_and_exit_2(capsys, tmp_path):
    assert main(["serve", "--run", "bad run", "--runs-dir", str(tmp_path)]) == 2
    assert "--run" in capsys.readouterr().err
    assert main(["serve", "--insecure", "--run", "ok", "--runs-dir", str(tmp_path), "--library", str(tmp_path / "none.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["serve", "--insecure", "--run", "ok", "--runs-dir", str(tmp_path), "--backend", "llm"]) == 2
    assert "--upstream" in capsys.readouterr().err


@pytest.mark.parametrize("token", ["zq7", "                    ", "fifteen-chars-q"])
def test_a_short_or_blank_token_is_refused_without_being_shown(token):
    with pytest.raises(ContractError) as refused:
        SimulatorSettings.from_env({"TOOLCANARY_SIMULATOR_TOKEN": token})
    message = str(refused.value)
    assert "at least 16 characters" in message and "TOOLCANARY_SIMULATOR_TOKEN" in message
    assert "(not shown)" in message and (not token.strip() or token not in message)
    assert SimulatorSettings.from_env({"TOOLCANARY_SIMULATOR_TOKEN": "sixteen-chars-xx"}).token == "sixteen-chars-xx"


def test_a_run_id_with_a_trailing_newline_is_refused():
    from toolcanary.contract.run_id import check_run_id

    assert check_run_id("demo") == "demo"
    with pytest.raises(ContractError):
        check_run_id("demo\n")
