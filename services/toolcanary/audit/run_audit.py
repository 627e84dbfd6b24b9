"""One audit, end to end: read the library, the run's tasks and BFCL's items, score, recompute, write.

Outputs go to `<results>/<run>/audit/`: `audit.csv`, `audit.md` and `robustness.csv`. They are written to
temporary names first and renamed into place together at the end, so a failed audit leaves the previous
one whole.
"""

from __future__ import annotations

import difflib
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from toolcanary.audit.bfcl_items import BfclItem, load_bfcl_items
from toolcanary.audit.item_audit import ItemAudit, audit_items
from toolcanary.audit.report_csv import audit_csv, robustness_csv
from toolcanary.audit.report_md import AuditInputs, render
from toolcanary.audit.robustness import Robustness, recompute
from toolcanary.audit.settings import DEFAULT_LIBRARY, AuditSettings
from toolcanary.audit.training_inputs import TaskReading, library_tools, read_tasks, run_library
from toolcanary.contract.errors import ContractError
from toolcanary.contract.run_id import check_run_id

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AuditResult:
    folder: Path
    audits: list[ItemAudit]
    robustness: Robustness
    reading: TaskReading
    library_tools: int
    seconds: dict[str, float]
    """Wall time of each stage (library, tasks, bfcl, scoring, robustness, writing)."""

    @property
    def flagged(self) -> int:
        return sum(bool(a.flags) for a in self.audits)


def check_run(run: str, settings: AuditSettings) -> None:
    """The run name must be a plain folder name that exists under the runs or the results folder."""
    check_run_id(run)
    if (settings.runs_dir / run).is_dir() or (settings.results_dir / run).is_dir():
        return
    known = sorted(
        {
            p.name
            for d in (settings.runs_dir, settings.results_dir)
            if d.is_dir()
            for p in d.iterdir()
            if p.is_dir()
        }
    )
    near = difflib.get_close_matches(run, known, n=3)
    raise ContractError(
        "--run",
        f"a run folder under {settings.runs_dir} or {settings.results_dir}",
        f"no folder named {run!r}",
        f"Did you mean: {near}?" if near else f"Known runs: {known[:20]}",
    )


def write_outputs(folder: Path, files: dict[str, str]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    staged = []
    for name, text in files.items():
        tmp = folder / f".{name}.tmp"
        tmp.write_text(text)
        staged.append((tmp, folder / name))
    for tmp, final in staged:
        os.replace(tmp, final)
    return [final for _, final in staged]


def run_audit(
    run: str, settings: AuditSettings, *, items: list[BfclItem] | None = None, progress: bool = True
) -> AuditResult:
    """Audit one run and write its outputs.

    Args:
        run: the run's folder name under the runs and results folders.
        settings: thresholds, folders and the library (None: the simulator's default library).
        items: BFCL items to audit (default: every item of the 17 offline categories).
    Raises:
        ContractError: unknown run, unreadable library or BFCL data (nothing is written then).
    """
    check_run(run, settings)
    seconds: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        seconds[stage] = round(time.perf_counter() - clock, 3)
        clock = time.perf_counter()

    if settings.library is not None:
        library, found = settings.library, "given with --library or TOOLCANARY_AUDIT_LIBRARY"
    else:
        library, found = run_library(settings.runs_dir / run, DEFAULT_LIBRARY, settings.trustee_dir)
    tools = library_tools(library)
    log.info("library %s: %d tools (%s)", library, len(tools), found)
    lap("library")
    reading = read_tasks(settings.runs_dir / run, {(t.name, t.description) for t in tools}, progress)
    log.info(
        "run %s: %d generated tasks, %d extra task tools", run, len(reading.tasks), len(reading.task_tools)
    )
    lap("tasks")
    items = load_bfcl_items() if items is None else items
    lap("bfcl")
    audits = audit_items(items, tools + reading.task_tools, reading.tasks, settings, progress)
    lap("scoring")
    flagged = {(a.item.category, a.item.id) for a in audits if a.flags}
    robustness = recompute(settings.results_dir / run, flagged)
    lap("robustness")
    inputs = AuditInputs(run, str(library), len(tools), reading, settings, found)
    folder = settings.results_dir / run / "audit"
    write_outputs(
        folder,
        {
            "audit.csv": audit_csv(audits),
            "robustness.csv": robustness_csv(robustness),
            "audit.md": render(audits, robustness, inputs),
        },
    )
    lap("writing")
    log.info("wrote %s (%d of %d items flagged) in %s", folder, len(flagged), len(audits), seconds)
    return AuditResult(folder, audits, robustness, reading, len(tools), seconds)
