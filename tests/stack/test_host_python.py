"""The host-side targets' environments (eval for make eval-all / watch / audit, analysis for make figures) build
on Python 3.12 as well as 3.11, with the same locks, and their commands start there; an interpreter a recipe
does not allow is refused with the list it does allow.

Needs a runnable python3.12 (on PATH, or one of pyenv's versions); CI's machine has one.

    .venvs/dev/bin/python -m pytest tests/stack/test_host_python.py -q
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def runnable_python(version: str) -> str | None:
    """A python<version> that runs: PATH first, then pyenv's installed versions."""
    candidates = [shutil.which(f"python{version}")]
    if shutil.which("pyenv"):
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip()
        candidates += sorted(str(p) for p in Path(root).glob(f"versions/{version}*/bin/python{version}"))
    for candidate in filter(None, candidates):
        if subprocess.run([candidate, "-c", "pass"], capture_output=True).returncode == 0:
            return candidate
    return None


def setup(*args: str, timeout: float = 900, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "scripts/setup_venvs.py", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", **env})


@pytest.mark.slow
def test_the_eval_and_analysis_environments_build_and_start_on_python_3_12(tmp_path):
    python = runnable_python("3.12")
    if python is None:
        pytest.fail("no runnable python3.12 on this machine: install one (e.g. `pyenv install 3.12`)")
    # One at a time: `make test` runs this suite in its background lane, beside the suites on the other core.
    done = setup("eval", "analysis", "--python", python, "--into", str(tmp_path), "--jobs", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("eval", "analysis"):
        version = subprocess.run([tmp_path / name / "bin/python", "-c", "import sys; print(sys.version_info[:2])"],
                                 capture_output=True, text=True).stdout.strip()
        assert version == "(3, 12)", (name, version)
    # Each target's own command, as the Makefile runs it, and the pins that set the two stacks apart.
    evaluate = subprocess.run([tmp_path / "eval/bin/python", "-m", "toolcanary.evaluate", "eval-all", "--help"],
                              capture_output=True, text=True, cwd=ROOT)
    assert evaluate.returncode == 0 and "--gpus" in evaluate.stdout, evaluate.stderr
    pins = subprocess.run([tmp_path / "eval/bin/python", "-c", "import bfcl_eval, numpy; print(numpy.__version__)"],
                          capture_output=True, text=True)
    assert pins.returncode == 0 and pins.stdout.startswith("1.26."), pins.stderr
    figures = subprocess.run([tmp_path / "analysis/bin/make_figures", "--help"], capture_output=True, text=True)
    assert figures.returncode == 0 and "--table" in figures.stdout, figures.stderr
    # A second run finds both up to date instead of rebuilding.
    again = setup("eval", "analysis", "--python", python, "--into", str(tmp_path), timeout=120)
    assert again.returncode == 0 and again.stdout.count("is up to date") == 2, again.stdout + again.stderr


def test_an_interpreter_the_recipe_does_not_allow_is_refused_with_the_allowed_ones(tmp_path):
    for python in filter(None, (runnable_python("3.10"), "python3.0")):  # one that runs, one that does not exist
        done = setup("eval", "--python", python, "--into", str(tmp_path), timeout=120)
        assert done.returncode != 0 and "builds on python3.11 or python3.12" in done.stderr, done.stderr
        assert not (tmp_path / "eval").exists()


def test_a_failed_build_ends_the_setup_with_its_log_and_starts_no_further_one(tmp_path):
    """pip with nowhere to install from: the first environment fails at its first install, the next is never begun."""
    wheels = tmp_path / "no-wheels"
    wheels.mkdir()
    done = setup("dev", "simulator", "--jobs", "1", "--into", str(tmp_path / "venvs"), timeout=120,
                 PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheels))
    assert done.returncode != 0, done.stdout
    assert "setup: command failed" in done.stderr and f"see the log: {tmp_path / 'venvs' / 'dev.log'}" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "venvs" / "dev" / ".toolcanary-stamp").exists()
    assert not (tmp_path / "venvs" / "simulator").exists(), done.stdout
