"""Progress of the demo's long phases, read from the files the services write (never from their logs).

    bar = FileProgress("train (GRPO)", 12, lambda: row_count(results_dir / "train_metrics.csv"), "step")
    bar.poll()   # whenever convenient; bar.close() at the end
"""

from __future__ import annotations

import csv
from pathlib import Path

from tqdm import tqdm


def _rows(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(newline="") as handle:
            return list(csv.DictReader(handle))
    except (OSError, csv.Error):
        return []


def row_count(csv_path: Path) -> int:
    """Rows below the header: steps of train_metrics.csv or warm_start.csv (one row per step)."""
    return len(_rows(csv_path))


def scored_passes(bfcl_csv: Path) -> int:
    return len({(row.get("step"), row.get("pass")) for row in _rows(bfcl_csv)})


class FileProgress:
    """A tqdm bar whose position is a count read from a file each time `poll()` is called."""

    def __init__(self, description: str, total: int, count, unit: str) -> None:
        self.count = count
        self.bar = tqdm(total=total, desc=description, unit=unit,
                        dynamic_ncols=True, leave=True, mininterval=5.0)

    def poll(self) -> None:
        if self.bar.disable:  # closed
            return
        done = min(self.count(), self.bar.total)
        if done > self.bar.n:
            self.bar.update(done - self.bar.n)
        if done >= self.bar.total:  # stop its clock when full, not when the whole phase ends
            self.bar.close()

    def close(self) -> None:
        self.poll()
        self.bar.close()
