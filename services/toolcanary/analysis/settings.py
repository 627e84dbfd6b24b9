"""Defaults of the analysis service in one place, and where the results of a run are found.

Each field `name` is read from `TOOLCANARY_ANALYSIS_<NAME>` and set with `--name` (toolcanary.settings); the
two paths also take the stack's shared names, which compose sets:

    TOOLCANARY_RESULTS_DIR   folder holding one sub-folder per run (default: volumes/results/ of the checkout)
    TOOLCANARY_RUN           the run to analyse (default: the newest run folder under the results folder)
    TOOLCANARY_CHECKPOINTS_DIR  folder holding the runs' checkpoints, read by --report for the published steps

    settings = AnalysisSettings.from_env(run="r1")
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from toolcanary.contract.csv_schemas import BFCL_BY_CATEGORY
from toolcanary.contract.errors import ContractError
from toolcanary.contract.run_id import RunId
from toolcanary.settings import Cli, Options, ServiceSettings, env, volume

ENV_PREFIX = "TOOLCANARY_ANALYSIS_"
RESULTS_DIR_ENV = "TOOLCANARY_RESULTS_DIR"
RUN_ENV = "TOOLCANARY_RUN"
FIGURES = ("f1", "f2", "f3", "f4", "f5")
FORMATS = ("md", "csv", "latex")


def newey_west_lags(n: int) -> int:
    """Newey and West's (1994) rule, floor(4 (n/100)^(2/9)): 2 lags for 21 checkpoints, 6 for 1,001."""
    return max(1, min(n - 1, math.floor(4 * (n / 100) ** (2 / 9))))


class AnalysisSettings(ServiceSettings, env_prefix=ENV_PREFIX):
    """What the analysis computes and draws; the CLI flags override these fields."""

    model_config = SettingsConfigDict(frozen=True)

    results_dir: Path = Field(volume("results"), validation_alias=env(ENV_PREFIX + "RESULTS_DIR", RESULTS_DIR_ENV),
                              description="where --data is looked for when not given: the run folder under it, "
                                          "else the newest run folder")
    checkpoints_dir: Path = Field(volume("checkpoints"), validation_alias=env(ENV_PREFIX + "CHECKPOINTS_DIR",
                                                                              "TOOLCANARY_CHECKPOINTS_DIR"),
                                  description="where --report reads which checkpoints the run published "
                                              "(<checkpoints_dir>/<run>/published.jsonl)")
    run: Annotated[RunId | None, Cli(metavar="RUN")] = Field(
        None, validation_alias=env(ENV_PREFIX + "RUN", RUN_ENV),
        description=f"analyse <results_dir>/RUN when --data is not given (default: ${RUN_ENV}, else the newest run)")
    baseline_step: int = Field(0, ge=0, description="the step every change is measured from: 0, the base model "
                                                    "scored through the same pipeline. A run whose first scored step "
                                                    "is another is refused unless this names that step; scored steps "
                                                    "before it are left out")
    slope_steps: int = Field(10, ge=1, description="slopes are reported in percentage points per this many "
                                                   "training steps")
    hac_maxlags: Annotated[int | None, Cli(metavar="N")] = Field(None, ge=0, description="Newey-West lags (default: floor(4 (n/100)^(2/9)), 2 "
                                                            "for 21 checkpoints)")
    hac_small_sample: bool = Field(True, description="scale the HAC variance by n / (n - 2), as Stata's newey does "
                                                     "(statsmodels: use_correction=True)")
    min_segment: int = Field(3, ge=1, description="fewest checkpoints on each side of a level-shift breakpoint, so "
                                                  "each side has a slope with a t")
    verdict_level: float = Field(0.05, gt=0, lt=1, description="false-positive rate of every verdict the "
                                                               "findings print (a trend, a level shift, a "
                                                               "difference in sign or rate, beyond the repeat "
                                                               "noise, a significant item change)")
    null_replicates: int = Field(4000, ge=100, description="trend-free series simulated per correlation of the "
                                                          "trend test's null family (toolcanary.analysis.verdicts)")
    null_seed: int = Field(0, ge=0, description="seed of those simulations: the same seed gives the same p-values")
    curriculum_ceiling: float = Field(100.0, gt=0, description="TRUSTEE's highest curriculum level")
    dpi: int = Field(200, ge=10, description="resolution of the PNG figures (the PDF copies are vector)")
    bootstrap_replicates: int = Field(2000, ge=1, description="replicates of the paired bootstrap of --items "
                                                              "(items resampled within each category), and "
                                                              "permutations of its paired test")
    bootstrap_seed: int = Field(0, ge=0, description="seed of the numpy default_rng of the paired bootstrap and, "
                                                     "separately, of the paired test: the same seed gives the "
                                                     "same interval and p-values")
    interval_level: float = Field(0.95, gt=0, lt=1, description="coverage of the bootstrap interval of --items "
                                                                "(percentile interval)")

    def lags_for(self, n: int) -> int:
        return self.hac_maxlags if self.hac_maxlags is not None else newey_west_lags(n)

    def data_dir(self) -> Path:
        """The run folder to analyse when `--data` is not given."""
        if self.run is None:
            return newest_run(self.results_dir)
        folder = self.results_dir / self.run
        if not (folder / BFCL_BY_CATEGORY).is_file():
            raise ContractError(
                str(folder), f"a run folder holding {BFCL_BY_CATEGORY}", "no such file",
                f"Check the run id (--run or {RUN_ENV}), or pass --data DIR",
            )
        return folder


Figure = Literal["f1", "f2", "f3", "f4", "f5", "all"]
Format = Literal["md", "csv", "latex"]


class AnalysisOptions(Options):
    """What one make_figures command reads and writes (the settings above say how it computes)."""

    data: Annotated[Path | None, Cli(metavar="DIR")] = Field(
        None, description="run folder holding bfcl_by_category.csv and train_metrics.csv (default: the folder of "
                          "--run under --results-dir, else the newest run folder there)")
    train_metrics: Annotated[Path | None, Cli(metavar="PATH")] = Field(
        None, description="train_metrics.csv, when it is not in the run folder (default: DIR/train_metrics.csv)")
    table: Annotated[bool, Cli(off="")] = Field(False, description="print the headline table (md: with the "
                                                                   "findings under it)")
    findings: Annotated[bool, Cli(off="")] = Field(False, description="print the findings, BFCL and training side, "
                                                                      "as JSON")
    fig: Annotated[list[Figure], Cli(repeat=True)] = Field(
        [], description="write this figure (PNG and PDF) under DIR/figures/; repeatable; f5 needs the trainer's "
                        "episode records, and `all` leaves it out of a run without them")
    format: Format = Field("md", description="table format")
    items: Annotated[bool, Cli(off="")] = Field(
        False, description="compare two steps item by item (the change, a permutation test, a paired bootstrap "
                           "interval; lost and gained items, descriptive) from the pass folders; lost and gained ids "
                           "to DIR/tables/items_stepA_stepB.csv")
    steps: Annotated[list[int] | None, Cli(nargs=2, metavar=("A", "B"))] = Field(
        None, description="the two steps --items compares (default: the baseline and the last scored step)")
    stability: Annotated[bool, Cli(off="")] = Field(
        False, description="items whose outcome differs between repeat passes, and whether the same ones flip at "
                           "every repeated step, from the pass folders; the list to DIR/tables/stability.csv")
    compare: Annotated[list[str] | None, Cli(nargs=2, metavar=("RUNS_A", "RUNS_B"))] = Field(
        None, description="compare two arms, each a run or several separated by commas (other seeds of the same "
                          "recipe; ids under the results folder, or run folders with their pass folders): each "
                          "arm's mean change over the steps every run scored, B's minus A's with an interval (a t "
                          "interval on the runs' changes with three runs or more in all, else an item bootstrap "
                          "that leaves out the spread between training runs), refused when they were scored "
                          "differently; to {results}/_compare/A1+A2_vs_B1+B2/")
    report: Annotated[bool, Cli(off="")] = Field(
        False, description="write the run's report page, DIR/report/index.html (self-contained HTML): everything "
                           "--table --findings --fig all --items --stability compute, as far as the data reaches, "
                           "with where the run stands, the audit's summary and each pass's provenance; with "
                           "--compare, the comparison's page")
    verbose: Annotated[bool, Cli(flags=("-v", "--verbose"))] = Field(False, description="log what is read and "
                                                                                        "written")


def newest_run(results_dir: Path) -> Path:
    """The run folder under `results_dir` whose `bfcl_by_category.csv` changed last."""
    runs = sorted(
        (p for p in results_dir.glob(f"*/{BFCL_BY_CATEGORY}") if p.is_file()),
        key=lambda p: (p.stat().st_mtime, p.parent.name),
    )
    if not runs:
        raise ContractError(
            str(results_dir), f"at least one run folder holding {BFCL_BY_CATEGORY}", "none",
            f"Pass --data DIR, or set {RESULTS_DIR_ENV} to the folder that holds your runs",
        )
    return runs[-1].parent
