"""What training showed the policy: the tool library and the generated tasks a run persisted.

The library is the one the run's simulator recorded in `<runs>/<run>/simulator/libraries.jsonl` at each start
(`run_library`): the packaged library, or a file it read (TRUSTEE's ToolBench library in the trustee mode, found
again through `trustee_dir` when the audit runs outside the container). Its SHA-256 must match what the
simulator read; a run whose starts used different libraries needs `--library` to say which.

Tasks come from `<runs>/<run>/simulator/step_*.jsonl` (one `RoleRecord` per line; task-author lines hold the
`SimulatedTask` in `response["task"]`). They are read through the reader the simulator reloads them with
(`toolcanary.contract.simulator_api.iter_recorded_tasks`), so the two count the same tasks: a torn last line or
a line a writer fenced off is skipped with a warning; a broken line in the middle that no writer fenced off
stops the audit, naming the file and line; a whole JSON line that is not a record, or holds no valid task, is
skipped and counted per reason, as is a task call that gave up. A tool a generated task offers that is not in the library (an LLM author may invent or edit one)
joins the training tools too, because the policy saw it.

Used by `python -m toolcanary.audit --run RUN` (see its --help).
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from tqdm import tqdm

from toolcanary.contract.append_only import read_lines, refused_line
from toolcanary.contract.errors import ContractError
from toolcanary.contract.simulator_api import (
    LIBRARIES_FILE,
    ROLE_RECORD_FILES,
    LibraryRecord,
    RoleRecordReading,
    iter_recorded_tasks,
)
from toolcanary.contract.tasks import load_tool_library

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainingTool:
    key: str
    """Where the tool came from: `category/toolset/name` in the library, `task:<task_id>/name` otherwise."""
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class GeneratedTask:
    task_id: str
    query: str
    """first_user_query and user_intent, the text the policy and the user simulator were given."""


@dataclass
class TaskReading:
    """The tasks of a run and what could not be read, so audit.md can say how much it saw."""

    folder: Path
    files: int = 0
    tasks: list[GeneratedTask] = field(default_factory=list)
    task_tools: list[TrainingTool] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    other_roles: int = 0
    duplicates: int = 0


def library_tools(path: Path) -> list[TrainingTool]:
    """Every tool of a library file in TRUSTEE's format (ContractError when the file is not one), by the rule
    the simulator reads it with: entries that are not usable tools are left out, with a warning, as the
    simulator left them out of the tasks it made."""
    library = load_tool_library(path)
    if library.left_out:
        shown = "; ".join(str(entry) for entry in library.left_out[:5])
        log.warning("%s: %d entries left out, not usable as tools: %s%s", path, len(library.left_out), shown,
                    "; ..." if len(library.left_out) > 5 else "")
    return [
        TrainingTool(
            f"{t.category}/{t.toolset_name}/{t.schema_.name}",
            t.schema_.name,
            t.schema_.function.description,
            t.schema_.function.parameters,
        )
        for t in library.all_tools()
    ]


def read_tasks(
    run_folder: Path, known_tools: set[tuple[str, str]] | None = None, progress: bool = False
) -> TaskReading:
    """Read the generated tasks of one run folder (`<runs>/<run>`); a missing folder gives no tasks.

    Raises:
        ContractError: a broken line in the middle of a record file that no writer fenced off, or a record file
            that cannot be read.
    """
    reading = TaskReading(run_folder / "simulator")
    known = set(known_tools or ())
    seen: set[str] = set()
    records = RoleRecordReading()
    files = len(list(reading.folder.glob(ROLE_RECORD_FILES)))
    with tqdm(total=files, desc="task records", unit="file", disable=not progress or files < 2, leave=False) as bar:
        for _, task in iter_recorded_tasks(reading.folder, records):
            bar.update(records.files - bar.n)
            if task.task_id in seen:
                reading.duplicates += 1
                continue
            seen.add(task.task_id)
            reading.tasks.append(GeneratedTask(task.task_id, f"{task.first_user_query}\n{task.user_intent}"))
            for tool in task.tools:
                signature = (tool.name, tool.function.description)
                if signature not in known:
                    known.add(signature)
                    reading.task_tools.append(
                        TrainingTool(
                            f"task:{task.task_id}/{tool.name}",
                            tool.name,
                            tool.function.description,
                            tool.function.parameters,
                        )
                    )
        bar.update(records.files - bar.n)
    reading.files, reading.other_roles = records.files, records.other_roles
    reading.skipped.update(records.skipped)
    if records.aborted_tasks:
        reading.skipped["aborted task call"] += records.aborted_tasks
    if reading.skipped:
        log.warning(
            "%s: skipped %d lines (%s)", reading.folder, sum(reading.skipped.values()), dict(reading.skipped)
        )
    return reading


def run_library(run_folder: Path, packaged: Path, trustee_dir: Path | None = None) -> tuple[Path, str]:
    """The library the run's simulator drew tasks from, and how it was found.

    Raises:
        ContractError: the run used several libraries, or the one it used is not here or has changed.
    """
    path = run_folder / "simulator" / LIBRARIES_FILE
    records = []
    for number, line in read_lines(path).lines:
        try:
            records.append(LibraryRecord.model_validate_json(line))
        except ValidationError:
            raise refused_line(path, number, "a LibraryRecord (one simulator start)", line) from None
    if not records:
        return packaged, "the packaged library (the run recorded none)"
    distinct = {r.sha256: r for r in records}
    if len(distinct) > 1:
        listed = "; ".join(f"{r.path} ({r.tools} tools, sha256 {r.sha256[:12]})" for r in distinct.values())
        raise ContractError(str(path), "one library for the whole run", f"{len(distinct)}: {listed}",
                            "Pass --library with the one to audit")
    record = next(iter(distinct.values()))
    if record.packaged:
        candidates = [packaged]
    else:
        candidates = [Path(record.path)]
        if record.in_checkout and trustee_dir is not None:
            candidates.insert(0, Path(trustee_dir) / record.in_checkout)
    for candidate in candidates:
        if candidate.is_file():
            if hashlib.sha256(candidate.read_bytes()).hexdigest() != record.sha256:
                fix = "Audit with the version the run used (--library)"
                if record.trustee_commit:
                    fix += f", or check out TRUSTEE at {record.trustee_commit}"
                raise ContractError(str(candidate), f"the library the run's simulator read (sha256 {record.sha256})",
                                    "a file with other contents", fix)
            return candidate, f"recorded by the run's simulator ({record.mode} mode)"
    raise ContractError(str(path), f"the run's library ({record.path}) readable here", "not found at "
                        + ", ".join(map(str, candidates)),
                        "Set TRUSTEE_DIR (or --trustee-dir) to the TRUSTEE checkout, or pass --library")
