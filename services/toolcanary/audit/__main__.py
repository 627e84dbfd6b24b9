"""Command line of the contamination audit: one run, every BFCL item of the 17 offline categories.

    python -m toolcanary.audit --run RUN
    python -m toolcanary.audit --run RUN --library path/to/library.json

Writes `<results>/<run>/audit/{audit.csv,audit.md,robustness.csv}` and prints the flag counts.
"""

from __future__ import annotations

import argparse
import logging
import sys

from toolcanary.audit.bfcl_items import load_bfcl_items
from toolcanary.audit.item_audit import FLAGS
from toolcanary.audit.run_audit import run_audit
from toolcanary.audit.settings import MEASURES, AuditOptions, AuditSettings
from toolcanary.contract.errors import ContractError
from toolcanary.settings import add_flags, given

EPILOG = """examples:
  python -m toolcanary.audit --run demo
  python -m toolcanary.audit --run demo --library services/toolcanary/simulator/data/default_library.json
  python -m toolcanary.audit --run demo --categories simple_python live_simple --top-k 5
  TOOLCANARY_RESULTS_DIR=/data/results python -m toolcanary.audit --run demo --schema-threshold 0.85
"""


def build_parser(defaults: AuditSettings | None = None) -> argparse.ArgumentParser:
    """The audit's command line; the help shows `defaults`, the settings the environment gives."""
    parser = argparse.ArgumentParser(
        prog="python -m toolcanary.audit",
        description=__doc__.split("\n\n")[0],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inputs = parser.add_argument_group("inputs (settings also TOOLCANARY_AUDIT_<NAME>)")
    add_flags(inputs, AuditOptions, skip=("quiet",))
    add_flags(inputs, AuditSettings, skip=MEASURES, defaults=defaults)
    add_flags(parser, AuditSettings, only=MEASURES, defaults=defaults, title="thresholds (see docs/audit.md)")
    add_flags(parser, AuditOptions, only=("quiet",))
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        defaults = AuditSettings.from_env()
        args = build_parser(defaults).parse_args(argv)
        options = AuditOptions.of(args)
        logging.basicConfig(
            level=logging.WARNING if options.quiet else logging.INFO,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        settings = AuditSettings.from_env(**given(args, AuditSettings))
        items = load_bfcl_items(tuple(options.categories))
        result = run_audit(options.run, settings, items=items, progress=not options.quiet)
    except ContractError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    counts = {flag: sum(flag in a.flags for a in result.audits) for flag in FLAGS}
    print(
        f"audited {len(result.audits)} BFCL items against {result.library_tools} library tools, "
        f"{len(result.reading.task_tools)} task tools and {len(result.reading.tasks)} generated tasks"
    )
    print("flags: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + f"; flagged items {result.flagged}")
    if result.reading.skipped:
        print(f"skipped task lines: {dict(sorted(result.reading.skipped.items()))}")
    for problem in result.robustness.problems:
        print(f"robustness: {problem}")
    print(f"wrote {result.folder}/audit.md, audit.csv, robustness.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
