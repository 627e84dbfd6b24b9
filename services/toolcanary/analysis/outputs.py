"""All-or-nothing output: everything is written into a staging folder inside the run folder, then moved.

A failure while computing or drawing leaves the run folder as it was (the staging folder is removed);
each final file appears by an atomic rename, so no reader ever sees a half-written table or figure.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from toolcanary.contract.errors import ContractError

log = logging.getLogger(__name__)


class Staging:
    """A scratch copy of the run folder's output tree; `path(rel)` is where to write `DIR/rel`."""

    def __init__(self, root: Path, target: Path) -> None:
        self.root, self.target = root, target
        self.files: list[Path] = []

    def path(self, relative: str) -> Path:
        staged = self.root / relative
        staged.parent.mkdir(parents=True, exist_ok=True)
        self.files.append(Path(relative))
        return staged

    def adopt(self, staged: Path) -> None:
        """Register a file some other writer put inside the staging folder."""
        self.files.append(staged.relative_to(self.root))

    def commit(self) -> list[Path]:
        final = []
        for relative in dict.fromkeys(self.files):
            destination = self.target / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.root / relative, destination)
            final.append(destination)
        return final


@contextmanager
def staged_outputs(target: Path) -> Iterator[Staging]:
    """Yield a `Staging` under `target`; the caller commits it when everything succeeded."""
    try:
        root = Path(tempfile.mkdtemp(prefix=".make_figures-", dir=target))
    except OSError as error:
        raise ContractError(str(target), "a writable run folder for tables/ and figures/", str(error),
                            "Mount the results folder read-write, or copy the two CSVs to a writable --data DIR") from error
    try:
        yield Staging(root, target)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        log.debug("removed staging folder %s", root)
