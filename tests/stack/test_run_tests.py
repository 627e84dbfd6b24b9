"""`make test`'s runner (scripts/run_tests.sh): the demo suite runs beside the containers suite, and a suite run
beside the others counts like any other, its output shown and its failure failing the run.

Each test runs the real script in a stand-in checkout: the script and sum_junit.py copied, two small suites
under tests/demo and tests/containers, and `.venvs/dev/bin/python` handing over to this environment's Python.

Run: .venvs/dev/bin/python -m pytest tests/stack/test_run_tests.py -q
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The demo suite's test waits for a file the containers suite's test writes: it passes only when the two suites
# run at the same time.
WAITS_FOR_THE_CONTAINERS_SUITE = """
import os, time
from pathlib import Path

def test_the_containers_suite_runs_meanwhile():
    marker = Path(os.environ["MARKER"])
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert time.monotonic() < deadline, "the containers suite did not run beside this one"
        time.sleep(0.1)
"""
WRITES_THE_MARKER = """
import os
from pathlib import Path

def test_write_the_marker():
    Path(os.environ["MARKER"]).write_text("here")
"""
FAILS = """
def test_planted_failure():
    assert False, "planted failure of the demo suite"
"""


def stand_in_checkout(root: Path, demo_suite: str) -> Path:
    (root / "scripts").mkdir(parents=True)
    for script in ("run_tests.sh", "sum_junit.py"):
        shutil.copy2(ROOT / "scripts" / script, root / "scripts" / script)
    for suite, source in (("demo", demo_suite), ("containers", WRITES_THE_MARKER)):
        (root / "tests" / suite).mkdir(parents=True)
        (root / "tests" / suite / f"test_{suite}_side.py").write_text(source)
    python = root / ".venvs" / "dev" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    return root


def run_tests(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(root / "scripts" / "run_tests.sh"), "demo", "containers"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "MARKER": str(root / "marker"), "PYTEST_ARGS": ""})


def test_the_demo_suite_runs_beside_the_containers_suite_and_both_count(tmp_path):
    done = run_tests(stand_in_checkout(tmp_path / "checkout", WAITS_FOR_THE_CONTAINERS_SUITE))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "=== tests/demo in .venvs/dev" in done.stdout  # the demo suite's own output, shown when it ended
    assert done.stdout.splitlines()[-1] == "tests: 2 passed, 0 failed, 0 skipped"


def test_a_failure_beside_the_others_fails_the_run_with_its_output_shown(tmp_path):
    done = run_tests(stand_in_checkout(tmp_path / "checkout", FAILS))
    assert done.returncode == 1, done.stdout[-3000:]
    assert "planted failure of the demo suite" in done.stdout
    assert done.stdout.splitlines()[-1] == "tests: 1 passed, 1 failed, 0 skipped"
