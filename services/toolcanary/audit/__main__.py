"""Command line of the contamination audit: one run, every BFCL item of the 17 offline categories.

    python -m toolcanary.audit --run RUN
    python -m toolcanary.audit --run RUN --library path/to/library.json

Writes `<results>/<run>/audit/{audit.csv,audit.md,robustness.csv}` and prints the flag counts.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from toolcanary.audit.bfcl_items import load_bfcl_items
from toolcanary.audit.item_audit import FLAGS
from toolcanary.audit.run_audit import run_audit
from toolcanary.audit.settings import AuditSettings
from toolcanary.contract.bfcl import OFFLINE_CATEGORIES
from toolcanary.contract.errors import ContractError

EPILOG = """examples:
  python -m toolcanary.audit --run demo
  python -m toolcanary.audit --run demo --library services/toolcanary/simulator/data/default_library.json
  python -m toolcanary.audit --run demo --categories simple_python live_simple --top-k 5
  TOOLCANARY_RESULTS_DIR=/data/results python -m toolcanary.audit --run demo --schema-threshold 0.85
"""


def build_parser(defaults: AuditSettings) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m toolcanary.audit",
        description=__doc__.split("\n\n")[0],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inputs = parser.add_argument_group("inputs")
    inputs.add_argument(
        "--run", required=True, help="run name: reads <runs>/RUN/simulator, writes <results>/RUN/audit"
    )
    inputs.add_argument(
        "--library",
        type=Path,
        help="training tool library in TRUSTEE's format (default: TOOLCANARY_AUDIT_LIBRARY, else the library "
        "the run's simulator recorded in <runs>/RUN/simulator/libraries.jsonl)",
    )
    inputs.add_argument(
        "--trustee-dir",
        type=Path,
        help="the TRUSTEE checkout, where a trustee-mode run's ToolBench library is found (TRUSTEE_DIR)",
    )
    inputs.add_argument(
        "--runs-dir", type=Path, help=f"runs root (TOOLCANARY_RUNS_DIR; default {defaults.runs_dir})"
    )
    inputs.add_argument(
        "--results-dir",
        type=Path,
        help=f"results root (TOOLCANARY_RESULTS_DIR; default {defaults.results_dir})",
    )
    inputs.add_argument(
        "--categories",
        nargs="+",
        default=list(OFFLINE_CATEGORIES),
        metavar="CATEGORY",
        help="BFCL categories to audit (default: the 17 offline ones)",
    )
    measures = parser.add_argument_group("thresholds (see docs/audit.md)")
    measures.add_argument(
        "--schema-threshold", type=float, help=f"TF-IDF cosine (default {defaults.schema_threshold})"
    )
    measures.add_argument(
        "--query-threshold", type=float, help=f"query TF-IDF cosine (default {defaults.query_threshold})"
    )
    measures.add_argument(
        "--query-ngram", type=int, help=f"longest content-word n-gram (default {defaults.query_ngram})"
    )
    measures.add_argument(
        "--min-query-words",
        type=int,
        help=f"shortest turn judged, in content words (default {defaults.min_query_words})",
    )
    measures.add_argument(
        "--verbatim-ngram",
        type=int,
        help=f"n of the reported verbatim n-gram share (default {defaults.verbatim_ngram})",
    )
    measures.add_argument("--top-k", type=int, help=f"neighbours listed per item (default {defaults.top_k})")
    measures.add_argument(
        "--chunk-rows", type=int, help=f"rows per sparse product (default {defaults.chunk_rows})"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars, warnings only")
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        defaults = AuditSettings.from_env()
        args = build_parser(defaults).parse_args(argv)
        logging.basicConfig(
            level=logging.WARNING if args.quiet else logging.INFO,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        settings = defaults.replace(
            library=args.library,
            trustee_dir=args.trustee_dir,
            runs_dir=args.runs_dir,
            results_dir=args.results_dir,
            schema_threshold=args.schema_threshold,
            query_threshold=args.query_threshold,
            query_ngram=args.query_ngram,
            min_query_words=args.min_query_words,
            verbatim_ngram=args.verbatim_ngram,
            top_k=args.top_k,
            chunk_rows=args.chunk_rows,
        )
        items = load_bfcl_items(tuple(args.categories))
        result = run_audit(args.run, settings, items=items, progress=not args.quiet)
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
