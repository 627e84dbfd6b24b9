"""Sum the JUnit reports of every suite into one closing line: 'tests: N passed, N failed, N skipped'.

    python3 scripts/sum_junit.py REPORTS_DIR [SUITE ...]

Each SUITE named must have left REPORTS_DIR/SUITE.xml: a suite whose pytest stopped before writing it (a
conftest that cannot be imported, a crash) ran no test that the sum could count, and is named as failed.
"""

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

reports, expected = Path(sys.argv[1]), sys.argv[2:]
totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
for report in sorted(reports.glob("*.xml")):
    for suite in ET.parse(report).getroot().iter("testsuite"):
        for key in totals:
            totals[key] += int(suite.get(key, 0))
missing = [name for name in expected if not (reports / f"{name}.xml").exists()]
failed = totals["failures"] + totals["errors"]
passed = totals["tests"] - failed - totals["skipped"]
line = f"tests: {passed} passed, {failed} failed, {totals['skipped']} skipped"
if missing:
    line += f"; suites that left no report (see their output above): {', '.join(missing)}"
print(line)
sys.exit(1 if failed or missing or totals["tests"] == 0 else 0)
