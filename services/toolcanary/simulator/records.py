"""Append-only JSON-lines records of every role call, one file per training step, flushed per record.

    <runs_dir>/<run>/simulator/step_0007.jsonl     # calls whose request said step=7
    <runs_dir>/<run>/simulator/step_none.jsonl     # calls without a step

Each line is a `RoleRecord`. A service killed mid-write leaves at most one partial last line; the next append
starts on a fresh line, and `load_tasks` skips (and counts) lines it cannot read, so nothing answered is lost.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from pathlib import Path
from typing import IO

from pydantic import ValidationError

from toolcanary.contract import DifficultySettings, RoleRecord, SimulatedTask

log = logging.getLogger(__name__)
MAX_OPEN_FILES = 8


def step_file_name(step: int | None) -> str:
    return "step_none.jsonl" if step is None else f"step_{step:04d}.jsonl"


class RecordStore:
    """Writes `RoleRecord`s under one directory; safe to call from several threads."""

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
        needs_newline = path.exists() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
        handle = path.open("a", encoding="utf-8")
        if needs_newline:
            handle.write("\n")
        self._open[path] = handle
        while len(self._open) > MAX_OPEN_FILES:
            self._open.popitem(last=False)[1].close()
        return handle

    def append(self, record: RoleRecord) -> Path:
        """Write one record and flush it to the operating system before returning."""
        path = self.directory / step_file_name(record.step)
        line = record.model_dump_json() + "\n"
        with self._lock:
            handle = self._handle(path)
            handle.write(line)
            handle.flush()
        return path

    def read_all(self, role: str | None = None) -> list[RoleRecord]:
        """Every readable record (of `role`, if given), file by file in name order.

        Unreadable lines are counted in `skipped_lines`. With `role`, lines that cannot be of that role are
        skipped before parsing, so reloading the tasks of a long run does not parse every tool call.
        """
        records: list[RoleRecord] = []
        self.skipped_lines = 0
        marker = f'"role":"{role}"' if role else ""
        for path in sorted(self.directory.glob("step_*.jsonl")):
            with path.open(encoding="utf-8") as lines:
                for number, line in enumerate(lines, 1):
                    if not line.strip() or marker not in line.replace(" ", "") and '"role":' in line:
                        continue
                    try:
                        record = RoleRecord.model_validate(json.loads(line))
                    except (json.JSONDecodeError, ValidationError) as err:
                        self.skipped_lines += 1
                        log.warning("skipping unreadable record %s:%d (%s)", path.name, number, str(err)[:120])
                        continue
                    if role is None or record.role == role:
                        records.append(record)
        return records

    def load_tasks(self) -> dict[str, tuple[DifficultySettings, SimulatedTask]]:
        """Task key -> (requested difficulty, task) of every task answered before; the first answer wins."""
        tasks: dict[str, tuple[DifficultySettings, SimulatedTask]] = {}
        for record in self.read_all("task"):
            if record.outcome != "ok" or not record.response.get("task"):
                continue
            try:
                task = SimulatedTask.model_validate(record.response["task"])
                asked = DifficultySettings.model_validate(record.request["difficulty"])
            except (KeyError, ValidationError) as err:
                self.skipped_lines += 1
                log.warning("skipping a task record that does not validate: %s", str(err)[:120])
                continue
            tasks.setdefault(task.task_key, (asked, task))
        return tasks

    def close(self) -> None:
        with self._lock:
            for handle in self._open.values():
                handle.close()
            self._open.clear()
