"""make_figures: the headline table, findings and figures of one run, recomputed from its two CSVs.

    .venvs/analysis/bin/make_figures --data volumes/results/RUN --table
    docker compose run analysis make_figures --table --findings --fig all

Tables and findings are printed and also written to DIR/tables/; figures go to DIR/figures/. Everything is
checked before anything is written, and written through a staging folder, so bad input changes nothing.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from toolcanary.analysis.data import BfclRun, TrainRun, data_paths, load_bfcl, load_training
from toolcanary.analysis.findings import bfcl_findings, bfcl_prose
from toolcanary.analysis.outputs import staged_outputs
from toolcanary.analysis.settings import FIGURES, FORMATS, RESULTS_DIR_ENV, RUN_ENV, AnalysisSettings
from toolcanary.analysis.table import EXTENSIONS, RENDERERS, headline_rows
from toolcanary.analysis.training import training_findings, training_prose
from toolcanary.contract.errors import ContractError
from toolcanary.settings import add_flags, given

EPILOG = """examples:
  make_figures --table                                  # $TOOLCANARY_RUN, else the newest run
  make_figures --run RUN --table --format latex         # volumes/results/RUN/
  make_figures --data volumes/results/RUN --table --format csv > table.csv
  make_figures --data volumes/results/RUN --findings --fig all
"""


def build_parser(defaults: AnalysisSettings) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="make_figures", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
    )
    inputs = parser.add_argument_group("input")
    inputs.add_argument("--data", type=Path, default=None, metavar="DIR",
                        help=f"run folder holding bfcl_by_category.csv and train_metrics.csv (default: the newest "
                             f"run under {defaults.results_dir}; ${RESULTS_DIR_ENV} moves that root)")
    inputs.add_argument("--run", default=None, metavar="RUN",
                        help=f"analyse {defaults.results_dir}/RUN when --data is not given (default: ${RUN_ENV}, "
                             "else the newest run)")
    inputs.add_argument("--train-metrics", type=Path, default=None, metavar="PATH",
                        help="train_metrics.csv, when it is not in the run folder (default: DIR/train_metrics.csv)")
    outputs = parser.add_argument_group("output")
    outputs.add_argument("--table", action="store_true", help="print the headline table (md: with the findings under it)")
    outputs.add_argument("--findings", action="store_true", help="print the findings, BFCL and training side, as JSON")
    outputs.add_argument("--fig", action="append", choices=[*FIGURES, "all"], default=[],
                         help="write this figure (PNG and PDF) under DIR/figures/; repeatable")
    outputs.add_argument("--format", choices=FORMATS, default="md", help="table format (default: %(default)s)")
    statistics = parser.add_argument_group("statistics")
    statistics.add_argument("--hac-maxlags", type=int, default=None, metavar="N",
                            help="Newey-West lags (default: floor(4 (n/100)^(2/9)), 2 for 21 checkpoints)")
    add_flags(statistics, AnalysisSettings, skip=("run", "hac_maxlags"), defaults=defaults)
    parser.add_argument("-v", "--verbose", action="store_true", help="log what is read and written")
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        defaults = AnalysisSettings.from_env()
    except ContractError as error:
        print(f"make_figures: error: {error}", file=sys.stderr)
        return 2
    parser = build_parser(defaults)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    figures = list(FIGURES) if "all" in args.fig else list(dict.fromkeys(args.fig))
    if not (args.table or args.findings or figures):
        parser.error("nothing to do: give --table, --findings and/or --fig")
    if args.hac_maxlags is not None and args.hac_maxlags < 0:
        parser.error(f"--hac-maxlags: expected a non-negative integer, got {args.hac_maxlags}")
    try:
        settings = AnalysisSettings.from_env(**given(args, AnalysisSettings))
        return analyse(args, figures, settings)
    except ContractError as error:
        print(f"make_figures: error: {error}", file=sys.stderr)
        return 2


def analyse(args: argparse.Namespace, figures: list[str], settings: AnalysisSettings) -> int:
    data = args.data if args.data is not None else settings.data_dir()
    bfcl_path, train_path = data_paths(data, args.train_metrics)
    bfcl: BfclRun = load_bfcl(bfcl_path, settings.baseline_step)
    needs_training = args.findings or "f1" in figures or args.train_metrics is not None
    train: TrainRun | None = load_training(train_path) if needs_training or train_path.is_file() else None
    rows = headline_rows(bfcl, settings)
    found = {"bfcl": bfcl_findings(bfcl, rows, settings),
             "training": training_findings(train, settings) if train is not None else None}
    table = RENDERERS[args.format](rows)
    prose = bfcl_prose(found["bfcl"], settings) + (training_prose(found["training"], settings) if train else [])
    findings_json = json.dumps(found, indent=2, allow_nan=False)

    with staged_outputs(data) as stage:
        if args.table:
            stage.path(f"tables/headline.{EXTENSIONS[args.format]}").write_text(table)
            # The full-precision CSV is always written too: it is what other tools read back.
            stage.path("tables/headline.csv").write_text(RENDERERS["csv"](rows))
            stage.path("tables/findings.txt").write_text("\n".join(prose) + "\n")
        if args.findings:
            stage.path("tables/findings.json").write_text(findings_json + "\n")
        if figures:
            from toolcanary.analysis.figures import render_figures

            (stage.root / "figures").mkdir()
            for path in render_figures(figures, stage.root / "figures", bfcl=bfcl, train=train,
                                       found=found, settings=settings):
                stage.adopt(path)
        written = stage.commit()

    if args.table:
        print(table, end="")
        if args.format == "md":
            print("\n" + "\n".join(prose))
    if args.findings:
        print(findings_json)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
