"""Sum the JUnit reports of every suite into one closing line: 'tests: N passed, N failed, N skipped'."""

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
for report in sorted(Path(sys.argv[1]).glob("*.xml")):
    for suite in ET.parse(report).getroot().iter("testsuite"):
        for key in totals:
            totals[key] += int(suite.get(key, 0))
failed = totals["failures"] + totals["errors"]
passed = totals["tests"] - failed - totals["skipped"]
print(f"tests: {passed} passed, {failed} failed, {totals['skipped']} skipped")
sys.exit(1 if failed or totals["tests"] == 0 else 0)
