"""Append-only JSON-lines records of every role call, one file per training step, flushed per record.

    <runs_dir>/<run>/simulator/step_0007.jsonl     # calls whose request said step=7
    <runs_dir>/<run>/simulator/step_none.jsonl     # calls without a step
    <runs_dir>/<run>/simulator/libraries.jsonl     # the tool library of every start (a `LibraryRecord` each)

Each line is a `RoleRecord`, under the append-only rule of `toolcanary.contract.append_only`: a service killed
mid-write leaves at most one torn last line; the next service to open the file fences it off and starts on a
fresh line, and readers skip it with a warning, so nothing answered is lost. They are read back through the
contract's one reader (`simulator_api.iter_recorded_tasks`), the one the contamination audit reads them with: a
broken line that no writer fenced off is refused, so the service does not start on records it cannot trust; a
whole line that is not a RoleRecord (a record of another contract version, say) is skipped and counted.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from pydantic import ValidationError

from toolcanary.contract import (
    CONTRACT_VERSION,
    LIBRARIES_FILE,
    DifficultySettings,
    LibraryRecord,
    RoleRecord,
    SimulatedTask,
)
from toolcanary.contract.append_only import append_text, fence_torn_tail, json_line
from toolcanary.contract.simulator_api import (
    LEFT_OUT_LISTED,
    RoleRecordReading,
    iter_recorded_tasks,
    role_record_file,
)
from toolcanary.simulator.library_index import DEFAULT_LIBRARY_PATH, LibraryIndex
from toolcanary.simulator.settings import SimulatorSettings

log = logging.getLogger(__name__)
MAX_OPEN_FILES = 8


class RecordStore:
    """Writes `RoleRecord`s under one directory; safe to call from several threads. One process per run
    writes these files (the service is run with one worker), so appends need no lock between processes."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._open: OrderedDict[Path, IO[str]] = OrderedDict()
        self.skipped_lines = 0

    def _handle(self, path: Path) -> IO[str]:
        handle = self._open.get(path)
        if handle is not None:
            self._open.move_to_end(path)
            return handle
        fence_torn_tail(path)  # a torn line left by a killed service: fenced off, our records start fresh
        # 0640: a record holds every task and conversation of the run; nobody but its owner's group reads it.
        handle = os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640), "a", encoding="utf-8")
        self._open[path] = handle
        while len(self._open) > MAX_OPEN_FILES:
            self._open.popitem(last=False)[1].close()
        return handle

    def note_library(self, settings: SimulatorSettings, index: LibraryIndex) -> None:
        """Append which library this start draws tasks from, and what of it was left out (the audit reads it)."""
        path = Path(index.path).resolve()
        trustee = Path(settings.trustee_dir).resolve() if settings.mode == "trustee" else None
        record = LibraryRecord(
            contract_version=CONTRACT_VERSION, time=datetime.now(UTC).isoformat(timespec="seconds"),
            run=settings.run, mode=settings.mode, path=str(path), packaged=path == DEFAULT_LIBRARY_PATH.resolve(),
            sha256=index.sha256, tools=len(index),
            trustee_commit=settings.trustee_commit if trustee else None,
            in_checkout=str(path.relative_to(trustee)) if trustee and path.is_relative_to(trustee) else None,
            left_out=len(index.left_out), left_out_entries=index.left_out[:LEFT_OUT_LISTED])
        append_text(self.directory / LIBRARIES_FILE, json_line(record))

    def append(self, record: RoleRecord) -> Path:
        """Write one record and flush it to the operating system before returning."""
        path = self.directory / role_record_file(record.step)
        line = json_line(record)
        with self._lock:
            handle = self._handle(path)
            handle.write(line)
            handle.flush()
        return path

    def iter_tasks(self) -> Iterator[tuple[DifficultySettings, SimulatedTask]]:
        """(requested difficulty, task) of every task answered before, in the order they were answered."""
        for asked, task, _ in self.iter_drawn_tasks():
            yield asked, task

    def iter_drawn_tasks(self) -> Iterator[tuple[DifficultySettings, SimulatedTask, str | None]]:
        """`iter_tasks` with the draw each task was asked for (None: the request named none).

        Lines that held a record and are left out (torn, not a RoleRecord, no valid task, no valid difficulty)
        are counted in `skipped_lines` once the iteration ends; each was logged. Task calls that gave up are
        not: they answered no task.

        Raises:
            ContractError: a broken line that no writer fenced off (`simulator_api.iter_role_records`).
        """
        reading = RoleRecordReading()
        unusable = 0
        try:
            for record, task in iter_recorded_tasks(self.directory, reading):
                try:
                    asked = DifficultySettings.model_validate(record.request["difficulty"])
                except (KeyError, ValidationError) as err:
                    unusable += 1
                    log.warning("skipping the record of task %s: its request holds no valid difficulty (%s)",
                                task.task_id, str(err)[:120])
                    continue
                draw = record.request.get("draw")
                yield asked, task, draw if isinstance(draw, str) else None
        finally:
            self.skipped_lines = reading.lost + unusable

    def close(self) -> None:
        with self._lock:
            for handle in self._open.values():
                handle.close()
            self._open.clear()
