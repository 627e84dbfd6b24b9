"""Helpers of the demo suite's tests: the volume roots a run writes under, and the processes still alive.

Run: .venvs/dev/bin/python -m pytest tests/demo -q
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def volume_env(root: Path) -> dict[str, str]:
    """The volume roots under `root`; the starting-policy cache make test shares between suites, when it sets one."""
    shared = os.environ.get("TOOLCANARY_TEST_STARTING_POLICY_CACHE")
    return {**os.environ, **{f"TOOLCANARY_{n.upper()}_DIR": str(root / n) for n in ("checkpoints", "runs", "results")},
            **({"TOOLCANARY_DEMO_STARTING_POLICY_CACHE": shared} if shared else {})}


def processes_mentioning(text: str) -> list[str]:
    """Live processes whose command line or environment mentions `text`. Every child of the demo inherits
    the volume variables, so this also finds vLLM's engine workers, whose command lines name nothing."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (proc / "environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if proc.name != str(os.getpid()) and (text in argv or text in environ):
            found.append(f"{proc.name}: {argv[:200]}")
    return found
