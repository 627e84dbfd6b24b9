"""Defaults of the analysis service in one place, and where the results of a run are found.

Every default the CLI shows comes from `AnalysisSettings`; environment variables only wire paths, and the
names are the stack's shared ones (compose sets both):

    TOOLCANARY_RESULTS_DIR   folder holding one sub-folder per run (default: volumes/results/ of the checkout)
    TOOLCANARY_RUN           the run to analyse (default: the newest run folder under the results folder)
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from toolcanary.contract.csv_schemas import BFCL_BY_CATEGORY
from toolcanary.contract.errors import ContractError

RESULTS_DIR_ENV = "TOOLCANARY_RESULTS_DIR"
RUN_ENV = "TOOLCANARY_RUN"
FIGURES = ("f1", "f2", "f3", "f4")
FORMATS = ("md", "csv", "latex")


def repository_root() -> Path | None:
    """The checkout this package is installed from (editable install), or None inside an image."""
    candidate = Path(__file__).resolve().parents[3]
    return candidate if (candidate / "pyproject.toml").is_file() else None


def default_results_dir() -> Path:
    if os.environ.get(RESULTS_DIR_ENV):
        return Path(os.environ[RESULTS_DIR_ENV])
    root = repository_root()
    return (root if root is not None else Path.cwd()) / "volumes" / "results"


def newey_west_lags(n: int) -> int:
    """Newey and West's (1994) rule, floor(4 (n/100)^(2/9)): 2 lags for 21 checkpoints, 6 for 1,001."""
    return max(1, min(n - 1, math.floor(4 * (n / 100) ** (2 / 9))))


@dataclass(frozen=True)
class AnalysisSettings:
    """What the analysis computes and draws; the CLI flags override these fields."""

    results_dir: Path = field(default_factory=default_results_dir)
    """Where `--data` is looked for when not given: the `run` folder under it, else the newest run folder."""
    run: str | None = field(default_factory=lambda: os.environ.get(RUN_ENV) or None)
    """The run id whose folder under `results_dir` is analysed when `--data` is not given."""
    slope_steps: int = 10
    """Slopes are reported in percentage points per this many training steps."""
    hac_maxlags: int | None = None
    """Bartlett-kernel lags of the Newey-West variance; None applies `newey_west_lags`."""
    hac_small_sample: bool = True
    """Scale the HAC variance by n / (n - 2), as Stata's `newey` does (statsmodels: use_correction=True)."""
    min_segment: int = 3
    """Fewest checkpoints on each side of a level-shift breakpoint, so each side has a slope with a t."""
    significant_t: float = 2.0
    """|t| at or above which a slope inside a segment is called a trend in the findings' prose."""
    curriculum_ceiling: float = 100.0
    """TRUSTEE's highest curriculum level."""
    dpi: int = 200
    """Resolution of the PNG figures (the PDF copies are vector)."""

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
