"""make_figures: the headline table, findings and figures of one run, recomputed from its two CSVs; with the
run's pass folders, the item-level comparison of two checkpoints and the stability of repeat passes; with the
trainer's episode records, what the simulator trained on; two arms of runs compared (--compare); and all of it on
one self-contained HTML page (--report, toolcanary.analysis.report).

    .venvs/analysis/bin/make_figures --data volumes/results/RUN --table
    .venvs/analysis/bin/make_figures --data volumes/results/RUN --items --steps 0 150 --stability
    docker compose run analysis make_figures --table --findings --fig all --items --stability
    docker compose run analysis make_figures --compare RUN_A RUN_B
    docker compose run analysis make_figures --compare RUN_A1,RUN_A2 RUN_B1,RUN_B2
    docker compose run analysis make_figures --report

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
from toolcanary.analysis.passes import PASSES_DIR, RunItems
from toolcanary.analysis.report import RunReport, render_compare, run_status
from toolcanary.analysis.settings import ENV_PREFIX, FIGURES, AnalysisOptions, AnalysisSettings
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
from toolcanary.contract.errors import ContractError, UsageError
from toolcanary.contract.training_files import EPISODES_DIR, EPISODES_FILE
from toolcanary.contract.volumes import REPORT_FILE
from toolcanary.settings import add_flags, given

EPILOG = """examples:
  make_figures --table                                  # $TOOLCANARY_RUN, else the newest run
  make_figures --run RUN --table --format latex         # volumes/results/RUN/
  make_figures --data volumes/results/RUN --table --format csv > table.csv
  make_figures --data volumes/results/RUN --findings --fig all
  make_figures --data volumes/results/RUN --items                  # baseline vs last step, item by item
  make_figures --data volumes/results/RUN --items --steps 0 150 --stability --findings
  make_figures --compare trustee-qwen3-4b trustee-qwen3-4b-abstain   # B's change minus A's, one run per arm
  make_figures --compare base-s1,base-s2 abstain-s1,abstain-s2   # seeds per arm: a between-run t interval
  make_figures --run RUN --report                       # the run's page: RUN/report/index.html
  make_figures --compare RUN_A RUN_B --report           # the comparison's page too
"""


def build_parser(defaults: AnalysisSettings | None = None) -> argparse.ArgumentParser:
    """make_figures' command line: what to read and write (AnalysisOptions), then how to compute
    (AnalysisSettings, whose help shows `defaults`: the settings the environment gives)."""
    parser = argparse.ArgumentParser(
        prog="make_figures", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
    )
    inputs = parser.add_argument_group("input")
    add_flags(inputs, AnalysisOptions, only=("data", "train_metrics"))
    add_flags(inputs, AnalysisSettings, only=("run", "results_dir"), defaults=defaults)
    add_flags(parser, AnalysisOptions, title="output", skip=("data", "train_metrics", "verbose"))
    add_flags(parser, AnalysisSettings, title=f"statistics (each also {ENV_PREFIX}<NAME>)",
              skip=("run", "results_dir"), defaults=defaults)
    add_flags(parser, AnalysisOptions, only=("verbose",))
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        defaults = AnalysisSettings.from_env()
    except ContractError as error:
        print(f"make_figures: error: {error}", file=sys.stderr)
        return 2
    parser = build_parser(defaults)
    args = parser.parse_args(argv)
    options = AnalysisOptions.of(args)
    logging.basicConfig(level=logging.INFO if options.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    figures = list(FIGURES) if "all" in options.fig else list(dict.fromkeys(options.fig))
    if options.compare is not None and (options.table or options.findings or figures or options.items
                                        or options.stability or options.data is not None):
        parser.error("--compare makes its own table, findings and figure from two runs: give it alone "
                     "(--report adds its page)")
    if not (options.table or options.findings or figures or options.items or options.stability or options.compare
            or options.report):
        parser.error("nothing to do: give --table, --findings, --fig, --items, --stability, --report and/or "
                     "--compare")
    if options.steps is not None and not options.items:
        parser.error("--steps names the two steps of --items: give --items too")
    try:
        settings = AnalysisSettings.from_env(**given(args, AnalysisSettings))
        if options.compare is not None:
            return compare_runs(*options.compare, settings, report=options.report)
        return analyse(options, figures, settings)
    except ContractError as error:
        print(f"make_figures: error: {error}", file=sys.stderr)
        return 2


def missing_parts(bfcl: BfclRun, data: Path) -> dict[str, str]:
    """Why the report leaves out the item-level parts it cannot compute yet (none: both are computed)."""
    missing = {}
    has_passes = (data / PASSES_DIR).is_dir()
    no_passes = f"Not computed: no pass folders under {PASSES_DIR}/."
    if not (has_passes and len(bfcl.steps) >= 2):
        missing["items"] = no_passes if not has_passes else (
            "Not computed yet: one scored step, and the item-level comparison needs two.")
    if not (has_passes and any(len(indices) >= 2 for indices in bfcl.pass_indices)):
        missing["stability"] = no_passes if not has_passes else (
            "Not computed yet: no step scored more than once (make eval-all scores the repeat passes of the "
            "repeat steps).")
    return missing


def report_parts(options: AnalysisOptions, bfcl: BfclRun, data: Path, train_path: Path,
                 ) -> tuple[AnalysisOptions, list[str], dict[str, str]]:
    """--report: every part the run's data allows, and why each part left out is missing (for the page)."""
    missing = missing_parts(bfcl, data)
    figures = [f for f in FIGURES if f != "f1" or train_path.is_file()]
    chosen = options.model_copy(update={"table": True, "findings": True, "fig": ["all"],
                                        "items": "items" not in missing, "stability": "stability" not in missing})
    return chosen, figures, missing


def analyse(options: AnalysisOptions, figures: list[str], settings: AnalysisSettings) -> int:
    data = options.data if options.data is not None else settings.data_dir()
    bfcl_path, train_path = data_paths(data, options.train_metrics)
    bfcl: BfclRun = load_bfcl(bfcl_path, settings.baseline_step, min_steps=1 if options.report else 2)
    missing: dict[str, str] = {}
    if options.report:
        if len(bfcl.steps) < 2:
            return first_step_page(data, bfcl, train_path, settings)
        options, figures, missing = report_parts(options, bfcl, data, train_path)
    needs_training = ((options.findings and not options.report) or "f1" in figures
                      or options.train_metrics is not None)
    train: TrainRun | None = load_training(train_path) if needs_training or train_path.is_file() else None
    rows = headline_rows(bfcl, settings)
    found = {"bfcl": bfcl_findings(bfcl, rows, settings),
             "training": training_findings(train, settings) if train is not None else None}
    shown = table_rows(bfcl, rows, settings)
    table = RENDERERS[options.format](shown)
    prose = bfcl_prose(found["bfcl"], settings) + (training_prose(found["training"], settings) if train else [])
    page_findings = list(prose)  # the report page shows the distribution and item-level sentences in their sections
    distribution = None
    if options.table or options.findings or "f5" in figures:
        episodes = load_episodes(data)
        distribution = distribution_report(episodes, rows, train, settings)
        found["training_distribution"] = distribution.findings
        prose += distribution_prose(distribution.findings, settings)
        if "f5" in figures and not distribution.by_step:
            figures = without_f5(figures, options.fig, episodes)
    # The item-level parts, each (prose, per-category text, file under DIR, its content).
    item_level = []
    shown_parts: dict[str, tuple[list[str], list[str]]] = {}
    if options.items or options.stability:
        items = RunItems(bfcl, data)
        if options.items:
            paired, pairs = paired_findings(items, tuple(options.steps) if options.steps else default_steps(items),
                                            settings)
            found["items"] = paired
            item_level.append((items_prose(paired), items_details(paired), paired["changed_items_file"],
                               changed_items_csv(pairs)))
            shown_parts["items"] = item_level[-1][:2]
        if options.stability:
            stable, flips = stability_findings(items)
            found["stability"] = stable
            item_level.append((stability_prose(stable), stability_details(stable), STABILITY_FILE,
                               flips_csv(flips)))
            shown_parts["stability"] = item_level[-1][:2]
    prose += [line for lines, *_ in item_level for line in lines]
    findings_json = json.dumps(found, indent=2, allow_nan=False)

    with staged_outputs(data) as stage:
        if options.table:
            stage.path(f"tables/headline.{EXTENSIONS[options.format]}").write_text(table)
            # The full-precision CSV is always written too: it is what other tools read back.
            stage.path("tables/headline.csv").write_text(RENDERERS["csv"](shown))
            stage.path("tables/findings.txt").write_text("\n".join(prose) + "\n")
        if options.findings:
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
        if options.report:
            page = RunReport(
                run=data.name, data=data, status=run_status(data, data.name, settings.checkpoints_dir, bfcl),
                headline=shown, prose=page_findings, bfcl=bfcl, train=train, figure_folder=stage.root / "figures",
                items=shown_parts.get("items"), items_missing=missing.get("items", ""),
                stability=shown_parts.get("stability"), stability_missing=missing.get("stability", ""),
                distribution=distribution_prose(distribution.findings, settings) if distribution else [])
            stage.path(REPORT_FILE).write_text(page.render(), encoding="utf-8")
        written = stage.commit()

    if options.table:
        print(table, end="")
        if options.format == "md":
            print("\n" + "\n".join(prose))
    if options.findings:
        print(findings_json)
    elif not options.table:
        # Neither the JSON nor the prose under a table shows them: print them as text.
        for lines, details, *_ in item_level:
            print("\n".join([*lines, *details]))
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


def first_step_page(data: Path, bfcl: BfclRun, train_path: Path, settings: AnalysisSettings) -> int:
    """--report on a run scored at its baseline step only: the page shows that step's numbers and what waits;
    every change, trend and figure needs a second scored step."""
    step = int(bfcl.steps[0])
    missing = missing_parts(bfcl, data)
    missing.setdefault("stability", "Not computed yet: the repeat stability needs a second scored step.")
    page = RunReport(
        run=data.name, data=data, status=run_status(data, data.name, settings.checkpoints_dir, bfcl), headline=[],
        prose=[f"One scored step so far (step {step}): the changes, trends and figures need a second one."],
        bfcl=bfcl, train=load_training(train_path) if train_path.is_file() else None, figure_folder=None,
        items=None, items_missing=missing["items"], stability=None, stability_missing=missing["stability"],
        distribution=[])
    with staged_outputs(data) as stage:
        stage.path(REPORT_FILE).write_text(page.render(), encoding="utf-8")
        written = stage.commit()
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


def compare_runs(given_a: str, given_b: str, settings: AnalysisSettings, report: bool = False) -> int:
    """--compare A1,A2 B1,B2: each arm one run or several (comma-separated), compared by toolcanary.analysis.compare."""
    names = {"a": compare.arm_names(given_a), "b": compare.arm_names(given_b)}
    arms = {side: [compare.load_compared(settings.results_dir, run, settings) for run in runs]
            for side, runs in names.items()}
    seen: dict[Path, str] = {}
    for run in (*arms["a"], *arms["b"]):
        folder = run.data.resolve()
        if folder in seen:
            raise UsageError("--compare", "two different runs, each named once in either arm",
                             f"{seen[folder]} and {run.name} are the same run folder, {folder}",
                             "Name every run once; another seed of a recipe is another run")
        seen[folder] = run.name
    found = compare.json_ready(compare.compare_findings(arms, settings))
    runs = compare.restricted_runs(arms, found["common_steps"])
    headlines = {name: table_rows(run, headline_rows(run, settings), settings) for name, run in runs.items()}
    label_a, label_b = found["runs"]["a"], found["runs"]["b"]
    text = "\n".join([
        *(f"## {name} (steps {', '.join(str(int(s)) for s in run.steps)})\n\n{RENDERERS['md'](headlines[name])}"
          for name, run in runs.items()),
        f"## {label_b} (B) against {label_a} (A)\n", compare.render_markdown(found), *compare.prose(found)])
    folder = compare.compare_folder(settings.results_dir, names["a"], names["b"])
    folder.mkdir(parents=True, exist_ok=True)
    with staged_outputs(folder) as stage:
        stage.path("tables/compare.md").write_text(text + "\n")
        stage.path("tables/compare.csv").write_text(compare.render_csv(found))
        stage.path("tables/compare.json").write_text(json.dumps(found, indent=2, allow_nan=False) + "\n")
        from toolcanary.analysis.figures import render_compare_figure

        (stage.root / "figures").mkdir()
        for path in render_compare_figure(compare.arm_series(arms, found["common_steps"]), found,
                                          stage.root / "figures", settings):
            stage.adopt(path)
        if report:
            stage.path(REPORT_FILE).write_text(render_compare(label_a, label_b, text, stage.root / "figures"),
                                               encoding="utf-8")
        written = stage.commit()
    print(text)
    for warning in found["warnings"]:
        print(f"make_figures: warning: {warning}", file=sys.stderr)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0

if __name__ == "__main__":
    sys.exit(main())
