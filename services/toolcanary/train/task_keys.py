"""The prefix of every task key a run asks the simulator for: `<run>-<tag>`, with a tag no third party knows.

The simulator authors a task on the first request for a key and keeps it: whoever asks first owns the key.
Keys built from the run id alone (`<run>-s0001-g00`) could be claimed ahead of the trainer by anyone who can
reach the simulator and has read the run id from `/health`, so the trainer would meet 409s or tasks of
another's difficulty. The tag is 16 random hex digits made on the run's first start and kept in
`<runs>/<run>/trainer/task_key_tag`, so a resumed run, the GPU recipe's seed data and its agent-loop manager
all build the same keys, and keys stay deterministic given the tag (a redone step asks for the same tasks).
The simulator never sees the file: it mounts only its own records folder.

    prefix = task_key_prefix(settings.run_state(), settings.run)   # e.g. "r1-5f0c9a2e7b1d4c3a"
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from toolcanary.contract.errors import ContractError
from toolcanary.contract.training_files import TASK_KEY_TAG_FILE as TAG_FILE

_TAG = re.compile(r"[0-9a-f]{16}")


def task_key_prefix(state_dir: Path, run: str) -> str:
    """`<run>-<tag>`, creating the tag file (mode 0600) when the run has none; safe when two processes race."""
    path = Path(state_dir) / TAG_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written whole under another name, then linked into place: link fails when the file exists, so the
        # first of two racing processes wins and neither ever reads a half-written tag.
        draft = path.with_name(f".{TAG_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
        descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_hex(8) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    tag = path.read_text(encoding="utf-8", errors="replace").strip()
    if not _TAG.fullmatch(tag):
        raise ContractError(str(path), "16 lowercase hex digits (the run's task-key tag)", repr(tag[:40]),
                            "Restore the file from a backup; deleting it gives the run new task keys, so a "
                            "resumed step would ask the simulator for other tasks than it did before")
    return f"{run}-{tag}"
