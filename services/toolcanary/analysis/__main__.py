"""make_figures: the headline table, findings and figures of one run, recomputed from its two CSVs; with the
run's pass folders, the item-level comparison of two checkpoints and the stability of repeat passes; with the
trainer's episode records, what the simulator trained on; and two runs compared (--compare).

    .venvs/analysis/bin/make_figures --data volumes/results/RUN --table
    .venvs/analysis/bin/make_figures --data volumes/results/RUN --items --steps 0 150 --stability
    docker compose run analysis make_figures --table --findings --fig all --items --stability
    docker compose run analysis make_figures --compare RUN_A RUN_B

Tables and findings are printed and also written to DIR/tables/; figures go to DIR/figures/. Everything is
checked before anything is written, and written through a staging folder, so bad input changes nothing.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from toolcanary.analysis import compare
from toolcanary.analysis.data import BfclRun, TrainRun, data_paths, load_bfcl, load_training
from toolcanary.analysis.findings import bfcl_findings, bfcl_prose
from toolcanary.analysis.items import (
    changed_items_csv,
    default_steps,
    items_details,
    items_prose,
    paired_findings,
)
from toolcanary.analysis.outputs import staged_outputs
from toolcanary.analysis.passes import RunItems
from toolcanary.analysis.settings import FIGURES, FORMATS, RESULTS_DIR_ENV, RUN_ENV, AnalysisSettings
from toolcanary.analysis.stability import (
    STABILITY_FILE,
    flips_csv,
    stability_details,
    stability_findings,
    stability_prose,
)
from toolcanary.analysis.table import EXTENSIONS, RENDERERS, headline_rows, table_rows
from toolcanary.analysis.training import training_findings, training_prose
from toolcanary.analysis.training_distribution import (
    EpisodeSet,
    distribution_prose,
    distribution_report,
    load_episodes,
)
from toolcanary.contract.errors import ContractError
from toolcanary.contract.training_files import EPISODES_DIR, EPISODES_FILE
from toolcanary.settings import add_flags, given

EPILOG = """examples:
  make_figures --table                                  # $TOOLCANARY_RUN, else the newest run
  make_figures --run RUN --table --format latex         # volumes/results/RUN/
  make_figures --data volumes/results/RUN --table --format csv > table.csv
  make_figures --data volumes/results/RUN --findings --fig all
  make_figures --data volumes/results/RUN --items                  # baseline vs last step, item by item
  make_figures --data volumes/results/RUN --items --steps 0 150 --stability --findings
  make_figures --compare trustee-qwen3-4b trustee-qwen3-4b-abstain   # B's change minus A's, item-paired
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
                         help="write this figure (PNG and PDF) under DIR/figures/; repeatable; f5 needs the "
                              "trainer's episode records, and `all` leaves it out of a run without them")
    outputs.add_argument("--format", choices=FORMATS, default="md", help="table format (default: %(default)s)")
    outputs.add_argument("--items", action="store_true",
                         help="compare two steps item by item (gained, lost, McNemar, paired bootstrap) from the "
                              "pass folders; lost and gained ids to DIR/tables/items_stepA_stepB.csv")
    outputs.add_argument("--steps", type=int, nargs=2, default=None, metavar=("A", "B"),
                         help="the two steps --items compares (default: the baseline and the last scored step)")
    outputs.add_argument("--stability", action="store_true",
                         help="items whose outcome differs between repeat passes, and whether the same ones flip "
                              f"at every repeated step, from the pass folders; the list to DIR/{STABILITY_FILE}")
    outputs.add_argument("--compare", nargs=2, default=None, metavar=("RUN_A", "RUN_B"),
                         help="compare two runs (ids under the results folder, or run folders with their pass "
                              "folders): both changes over the steps both scored, B's minus A's with a bootstrap "
                              "interval, refused when they were scored differently; to {results}/_compare/A_vs_B/")
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
    if args.compare is not None and (args.table or args.findings or figures or args.items or args.stability
                                     or args.data is not None):
        parser.error("--compare makes its own table, findings and figure from two runs: give it alone")
    if not (args.table or args.findings or figures or args.items or args.stability or args.compare):
        parser.error("nothing to do: give --table, --findings, --fig, --items, --stability and/or --compare")
    if args.steps is not None and not args.items:
        parser.error("--steps names the two steps of --items: give --items too")
    if args.hac_maxlags is not None and args.hac_maxlags < 0:
        parser.error(f"--hac-maxlags: expected a non-negative integer, got {args.hac_maxlags}")
    try:
        settings = AnalysisSettings.from_env(**given(args, AnalysisSettings))
        if args.compare is not None:
            return compare_runs(*args.compare, settings)
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
    shown = table_rows(bfcl, rows, settings)
    table = RENDERERS[args.format](shown)
    prose = bfcl_prose(found["bfcl"], settings) + (training_prose(found["training"], settings) if train else [])
    distribution = None
    if args.table or args.findings or "f5" in figures:
        episodes = load_episodes(data)
        distribution = distribution_report(episodes, rows, train, settings)
        found["training_distribution"] = distribution.findings
        prose += distribution_prose(distribution.findings, settings)
        if "f5" in figures and not distribution.by_step:
            figures = without_f5(figures, args.fig, episodes)
    # The item-level parts, each (prose, per-category text, file under DIR, its content).
    item_level = []
    if args.items or args.stability:
        items = RunItems(bfcl, data)
        if args.items:
            paired, pairs = paired_findings(items, tuple(args.steps) if args.steps else default_steps(items),
                                            settings)
            found["items"] = paired
            item_level.append((items_prose(paired), items_details(paired), paired["changed_items_file"],
                               changed_items_csv(pairs)))
        if args.stability:
            stable, flips = stability_findings(items)
            found["stability"] = stable
            item_level.append((stability_prose(stable), stability_details(stable), STABILITY_FILE,
                               flips_csv(flips)))
    prose += [line for lines, *_ in item_level for line in lines]
    findings_json = json.dumps(found, indent=2, allow_nan=False)

    with staged_outputs(data) as stage:
        if args.table:
            stage.path(f"tables/headline.{EXTENSIONS[args.format]}").write_text(table)
            # The full-precision CSV is always written too: it is what other tools read back.
            stage.path("tables/headline.csv").write_text(RENDERERS["csv"](shown))
            stage.path("tables/findings.txt").write_text("\n".join(prose) + "\n")
        if args.findings:
            stage.path("tables/findings.json").write_text(findings_json + "\n")
        for *_, relative, content in item_level:
            stage.path(relative).write_text(content)
        for relative, content in (distribution.csv_files() if distribution is not None else {}).items():
            stage.path(relative).write_text(content)
        if figures:
            from toolcanary.analysis.figures import render_figures

            (stage.root / "figures").mkdir()
            for path in render_figures(figures, stage.root / "figures", bfcl=bfcl, train=train,
                                       found=found, settings=settings, distribution=distribution):
                stage.adopt(path)
        written = stage.commit()

    if args.table:
        print(table, end="")
        if args.format == "md":
            print("\n" + "\n".join(prose))
    if args.findings:
        print(findings_json)
    elif not args.table:
        # Neither the JSON nor the prose under a table shows them: print them as text.
        for lines, details, *_ in item_level:
            print("\n".join([*lines, *details]))
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


def without_f5(figures: list[str], asked: list[str], episodes: EpisodeSet) -> list[str]:
    """`--fig all` on a run without training episodes draws the others (the findings say why f5 is missing);
    `--fig f5` asked by name is refused."""
    if "all" in asked:
        logging.getLogger(__name__).info("f5 left out: no training episode records under %s", episodes.folder)
        return [f for f in figures if f != "f5"]
    raise ContractError(str(episodes.folder), f"the trainer's episode records for --fig f5 ({EPISODES_FILE}, or "
                        f"{EPISODES_DIR}/step_NNNN/*.jsonl, with training episodes)",
                        f"{len(episodes.files)} episode file(s), no training episode in them",
                        "Point --data at the run folder the trainer wrote, or leave f5 out")


def compare_runs(run_a: str, run_b: str, settings: AnalysisSettings) -> int:
    a = compare.load_compared(settings.results_dir, run_a, settings)
    b = compare.load_compared(settings.results_dir, run_b, settings)
    if a.data.resolve() == b.data.resolve():
        raise ContractError("--compare", "two different runs", f"{run_a} twice", "Name the run to compare it with")
    found = compare.json_ready(compare.compare_findings(a, b, settings))
    runs = dict(zip((a.name, b.name), compare.restricted_runs(a, b, found["common_steps"]), strict=True))
    headlines = {name: table_rows(run, headline_rows(run, settings), settings) for name, run in runs.items()}
    text = "\n".join([
        *(f"## {name} (steps {', '.join(str(int(s)) for s in run.steps)})\n\n{RENDERERS['md'](headlines[name])}"
          for name, run in runs.items()),
        f"## {b.name} (B) against {a.name} (A)\n", compare.render_markdown(found), *compare.prose(found)])
    folder = compare.compare_folder(settings.results_dir, a.name, b.name)
    folder.mkdir(parents=True, exist_ok=True)
    with staged_outputs(folder) as stage:
        stage.path("tables/compare.md").write_text(text + "\n")
        stage.path("tables/compare.csv").write_text(compare.render_csv(found))
        stage.path("tables/compare.json").write_text(json.dumps(found, indent=2, allow_nan=False) + "\n")
        from toolcanary.analysis.figures import render_compare_figure

        (stage.root / "figures").mkdir()
        for path in render_compare_figure(runs, found, stage.root / "figures", settings):
            stage.adopt(path)
        written = stage.commit()
    print(text)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
