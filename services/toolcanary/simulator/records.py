"""Append-only JSON-lines records of every role call, one file per training step, flushed per record.

    <runs_dir>/<run>/simulator/step_0007.jsonl     # calls whose request said step=7
    <runs_dir>/<run>/simulator/step_none.jsonl     # calls without a step
    <runs_dir>/<run>/simulator/libraries.jsonl     # the tool library of every start (a `LibraryRecord` each)

Each line is a `RoleRecord`, under the append-only rule of `toolcanary.contract.append_only`: a service killed
mid-write leaves at most one torn last line; the next service to open the file fences it off and starts on a
fresh line, and readers skip it with a warning, so nothing answered is lost. A broken line that no writer fenced
off is refused: the service does not start on records it cannot trust. A whole line that is not a RoleRecord
(a record of another contract version, say) is skipped and counted.
"""

from __future__ import annotations

import json
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
from toolcanary.contract.append_only import (
    ReadLines,
    append_text,
    fence_torn_tail,
    iter_lines,
    json_line,
    refused_line,
)
from toolcanary.contract.simulator_api import LEFT_OUT_LISTED
from toolcanary.simulator.library_index import DEFAULT_LIBRARY_PATH, LibraryIndex
from toolcanary.simulator.settings import SimulatorSettings

log = logging.getLogger(__name__)
MAX_OPEN_FILES = 8


def step_file_name(step: int | None) -> str:
    return "step_none.jsonl" if step is None else f"step_{step:04d}.jsonl"


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
        path = self.directory / step_file_name(record.step)
        line = json_line(record)
        with self._lock:
            handle = self._handle(path)
            handle.write(line)
            handle.flush()
        return path

    def iter_records(self, role: str | None = None) -> Iterator[RoleRecord]:
        """Every record (of `role`, if given), file by file in name order, streamed.

        Torn lines (a torn last line; torn lines a writer fenced off) are skipped with a warning and counted
        in `skipped_lines`, as are whole lines that are not RoleRecords. A broken line that no writer fenced
        off raises ContractError. With `role`, a whole line that names another role is skipped before it is
        parsed, so reloading the tasks of a long run does not parse every tool call.
        """
        self.skipped_lines = 0
        marker = f'"role":"{role}"' if role else ""
        for path in sorted(self.directory.glob("step_*.jsonl")):
            for number, line in iter_lines(path, reading := ReadLines()):
                if marker and marker not in line.replace(" ", "") and '"role":' in line and line.endswith("}"):
                    continue
                try:
                    raw = json.loads(line)
                except json.JSONDecodeError:
                    raise refused_line(path, number, "a JSON RoleRecord", line) from None
                try:
                    record = RoleRecord.model_validate(raw)
                except ValidationError as err:
                    self.skipped_lines += 1
                    log.warning("skipping record %s:%d, not a RoleRecord (%s)", path.name, number, str(err)[:120])
                    continue
                if role is None or record.role == role:
                    yield record
            self.skipped_lines += len(reading.skipped)

    def iter_tasks(self) -> Iterator[tuple[DifficultySettings, SimulatedTask]]:
        """(requested difficulty, task) of every task answered before, in the order they were answered."""
        for asked, task, _ in self.iter_drawn_tasks():
            yield asked, task

    def iter_drawn_tasks(self) -> Iterator[tuple[DifficultySettings, SimulatedTask, str | None]]:
        """`iter_tasks` with the draw each task was asked for (None: the request named none)."""
        for record in self.iter_records("task"):
            if record.outcome != "ok" or not record.response.get("task"):
                continue
            try:
                task = SimulatedTask.model_validate(record.response["task"])
                asked = DifficultySettings.model_validate(record.request["difficulty"])
            except (KeyError, ValidationError) as err:
                self.skipped_lines += 1
                log.warning("skipping a task record that does not validate: %s", str(err)[:120])
                continue
            draw = record.request.get("draw")
            yield asked, task, draw if isinstance(draw, str) else None

    def close(self) -> None:
        with self._lock:
            for handle in self._open.values():
                handle.close()
            self._open.clear()
