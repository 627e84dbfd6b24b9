"""The closing line of `make test` (scripts/sum_junit.py): counts from the suites' JUnit reports, and a suite
that left no report (its conftest failed to import, pytest crashed) is a failure, not a silent zero."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="{errors}"
failures="{failures}" skipped="{skipped}" tests="{tests}"></testsuite></testsuites>"""


def summarise(reports: Path, *suites: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "sum_junit.py"), str(reports), *suites],
                          capture_output=True, text=True)


def write(reports: Path, suite: str, **counts: int) -> None:
    reports.mkdir(exist_ok=True)
    (reports / f"{suite}.xml").write_text(REPORT.format(**{"errors": 0, "failures": 0, "skipped": 0, **counts}))


def test_the_line_sums_every_report(tmp_path):
    write(tmp_path, "contract", tests=10, skipped=1)
    write(tmp_path, "stack", tests=5, failures=1, errors=1)
    done = summarise(tmp_path, "contract", "stack")
    assert done.stdout.strip() == "tests: 12 passed, 2 failed, 1 skipped"
    assert done.returncode == 1


def test_a_suite_that_left_no_report_fails_the_run_by_name(tmp_path):
    write(tmp_path, "contract", tests=10)
    done = summarise(tmp_path, "contract", "simulator")
    assert done.stdout.strip() == ("tests: 10 passed, 0 failed, 0 skipped; suites that left no report (see their "
                                   "output above): simulator")
    assert done.returncode == 1
    assert summarise(tmp_path, "contract").returncode == 0
