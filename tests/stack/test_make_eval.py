"""`make eval STEP=N` serves and scores step N, whatever .env says: what the user types wins over .env.

Each test runs the real Makefile and scripts/eval_step.sh in a copy of the repository's wiring (never on a real
.env), with a recording stand-in for `docker compose` that runs the real Compose binary's `config`. What serve
would run is read from the configuration the real binary resolves at `up` time; what eval scores from the
arguments of `run`.

Run: .venvs/dev/bin/python -m pytest tests/stack/test_make_eval.py -q
"""

import re

import pytest
from compose_env import calls, recorder, run_make, sandbox, with_ids


@pytest.fixture
def stack(tmp_path):
    """(sandbox root with a .env saying RUN=env-run and STEP=0, a function running make there -> its calls)."""
    root = sandbox(tmp_path)
    (root / ".env").write_text(with_ids((root / ".env.example").read_text()).replace(
        "RUN=trustee-qwen3-4b-run1", "RUN=env-run"))
    assert re.search(r"^STEP=0$", (root / ".env").read_text(), flags=re.M)
    compose, log = recorder(tmp_path)

    def make(*args: str, env: dict | None = None):
        result = run_make(root, "eval", *args, f"COMPOSE={compose}", env=env)
        return result, calls(log)

    return root, make


def served_and_scored(recorded: list[dict]) -> tuple[list[str], list[str]]:
    """(serve's resolved command at `up`, the arguments of the eval `run`)."""
    up = next(c for c in recorded if c["command"] == "up")
    run = next(c for c in recorded if c["command"] == "run")
    return up["resolved_commands"]["serve"], run["args"]


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_make_eval_step_serves_and_scores_that_step_not_the_env_files(stack):
    _, make = stack
    result, recorded = make("STEP=200")
    assert result.returncode == 0, result.stderr
    serve, run = served_and_scored(recorded)
    assert flag(serve, "--step") == "200", f"serve would run {serve}"
    assert flag(run, "--step") == "200", f"eval would score {run}"
    assert flag(serve, "--run") == "env-run"
    assert recorded[-1]["command"] == "stop" and recorded[-1]["args"] == ["serve"], "serve must be stopped at the end"


def test_an_exported_step_and_run_win_over_the_env_file(stack):
    _, make = stack
    result, recorded = make(env={"STEP": "150", "RUN": "shell-run"})
    assert result.returncode == 0, result.stderr
    serve, run = served_and_scored(recorded)
    assert flag(serve, "--step") == "150" and flag(run, "--step") == "150"
    assert flag(serve, "--run") == "shell-run"
    # The eval container takes the run from TOOLCANARY_RUN, which Compose resolves the same way.
    assert "--model" not in run, "the served model name is derived from run and step by the client, as serve names it"


def test_without_a_step_the_env_files_step_is_used(stack):
    root, make = stack
    (root / ".env").write_text((root / ".env").read_text().replace("STEP=0", "STEP=70"))
    result, recorded = make("PASS=2")
    assert result.returncode == 0, result.stderr
    serve, run = served_and_scored(recorded)
    assert flag(serve, "--step") == "70" and flag(run, "--step") == "70" and flag(run, "--pass") == "2"


def test_a_step_that_is_no_number_stops_before_anything_starts(stack):
    root, make = stack
    (root / ".env").write_text((root / ".env").read_text().replace("STEP=0", "STEP=latest"))
    result, recorded = make()
    assert result.returncode != 0
    assert "STEP must be a checkpoint step" in result.stderr and "make eval STEP=N" in result.stderr, result.stderr
    assert [c["command"] for c in recorded] == ["config"], "nothing may start with an unusable step"
