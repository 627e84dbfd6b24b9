"""recipes/trustee-qwen3-4b-abstain/train.sh: the baseline GPU recipe with one knob set, a share of abstention
tasks (TOOLCANARY_TRAIN_NO_CALL_FRACTION, default 0.2), and a run id of its own.

Checked twice: against a stand-in of the base script that writes down what it was handed (the arguments
unchanged, the two variables, a bad share refused before it runs), and once for real, `--check` through the
base recipe's own check, whose printed config shows the share handed to every Ray worker.
Run: .venvs/train/bin/python -m pytest tests/train/test_recipe_abstain.py -q
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
ABSTAIN = RECIPES / "trustee-qwen3-4b-abstain" / "train.sh"
VENV_BIN = Path(sys.executable).parent
# Writes its arguments and the two variables, as JSON, where RECORD says.
STAND_IN = """#!/usr/bin/env bash
python3 -c 'import json, os, sys; json.dump({"args": sys.argv[1:],
    "fraction": os.environ.get("TOOLCANARY_TRAIN_NO_CALL_FRACTION"),
    "run": os.environ.get("TOOLCANARY_TRAIN_RUN")}, open(os.environ["RECORD"], "w"))' "$@"
"""


def _env(**values: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("TOOLCANARY_TRAIN_NO_CALL_FRACTION", "TOOLCANARY_TRAIN_RUN")}
    return {**clean, "PATH": f"{VENV_BIN}:{os.environ['PATH']}", **values}


@pytest.fixture
def stand_in(tmp_path):
    """The abstain script beside a stand-in base script; run(env) -> (process, what the base was handed)."""
    recipes = tmp_path / "recipes"
    (recipes / "trustee-qwen3-4b-abstain").mkdir(parents=True)
    (recipes / "trustee-qwen3-4b").mkdir()
    shutil.copy2(ABSTAIN, recipes / "trustee-qwen3-4b-abstain" / "train.sh")
    (recipes / "trustee-qwen3-4b" / "train.sh").write_text(STAND_IN)
    record = tmp_path / "handed.json"

    def run(*args: str, **values: str):
        record.unlink(missing_ok=True)
        done = subprocess.run([str(recipes / "trustee-qwen3-4b-abstain" / "train.sh"), *args], cwd=tmp_path,
                              env=_env(RECORD=str(record), **values), capture_output=True, text=True, timeout=60)
        return done, json.loads(record.read_text()) if record.exists() else None

    return run


def test_the_script_is_executable_and_hands_its_arguments_unchanged_to_the_base_recipe(stand_in):
    assert os.access(ABSTAIN, os.X_OK)
    args = ("--check", "trainer.total_training_steps=20", "a value with spaces")
    done, handed = stand_in(*args)
    assert done.returncode == 0, done.stderr
    assert handed == {"args": list(args), "fraction": "0.2", "run": "trustee-qwen3-4b-abstain"}
    done, handed = stand_in("--check", TOOLCANARY_TRAIN_NO_CALL_FRACTION="1", TOOLCANARY_TRAIN_RUN="abstain-b")
    assert handed == {"args": ["--check"], "fraction": "1", "run": "abstain-b"}  # set values are kept


@pytest.mark.parametrize("share", ["0", "-0.1", "1.5", "nan", "a fifth"])
def test_a_share_outside_zero_to_one_is_refused_before_the_base_recipe_runs(stand_in, share):
    done, handed = stand_in("--check", TOOLCANARY_TRAIN_NO_CALL_FRACTION=share)
    assert done.returncode == 2 and handed is None
    assert f"expected TOOLCANARY_TRAIN_NO_CALL_FRACTION in (0, 1], got '{share}'" in done.stderr
    assert "recipes/trustee-qwen3-4b/train.sh for the baseline" in done.stderr


@pytest.mark.slow
def test_check_runs_the_base_recipes_check_with_the_share_handed_to_every_worker(tmp_path, trustee_checkout,
                                                                                 tiny_dir):
    volumes = tmp_path / "volumes"
    env = {k: v for k, v in _env().items() if k not in ("TOOLCANARY_TRAIN_MODE", "TOOLCANARY_TRAIN_TRUSTEE_DIR")}
    env |= {"TOOLCANARY_RUNS_DIR": str(volumes / "runs"), "TOOLCANARY_RESULTS_DIR": str(volumes / "results"),
            "TOOLCANARY_CHECKPOINTS_DIR": str(volumes / "checkpoints"), "TRUSTEE_DIR": str(trustee_checkout),
            "TOOLCANARY_POLICY_MODEL": str(tiny_dir), "PYTHONDONTWRITEBYTECODE": "1"}
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    done = subprocess.run(["bash", str(ABSTAIN), "--check"], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "TOOLCANARY_TRAIN_NO_CALL_FRACTION': '0.2'" in done.stdout  # in the Ray workers' environment
    assert "TOOLCANARY_TRAIN_RUN': 'trustee-qwen3-4b-abstain'" in done.stdout
    assert (volumes / "runs" / "trustee-qwen3-4b-abstain" / "data" / "train.parquet").is_file()
    assert (volumes / "checkpoints" / "trustee-qwen3-4b-abstain" / "step_0000").is_dir()
