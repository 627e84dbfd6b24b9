"""Child processes that are always stopped: at the end, on failure and on Ctrl-C.

Each child runs in its own process session with its output in a log file, so stopping it stops
everything it started too (vLLM's engine and workers, bfcl-eval's subprocesses).

    with ProcessGroup() as group:
        group.start("simulator", [...], log=run_dir / "logs" / "simulator.log")
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from pathlib import Path

from toolcanary.common.loopback import wait_until_ok

logger = logging.getLogger(__name__)


class ChildFailed(RuntimeError):
    """A child process exited with an error or never became ready; the message names its log."""


class ProcessGroup:
    """Starts children in new sessions and stops every one of them on exit, whatever the exit."""

    def __init__(self) -> None:
        self.children: dict[str, tuple[subprocess.Popen, Path]] = {}
        self._previous_handlers: dict[int, object] = {}

    def __enter__(self) -> ProcessGroup:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous_handlers[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc) -> None:
        self.stop_all()
        for sig, handler in self._previous_handlers.items():
            signal.signal(sig, handler)

    def _on_signal(self, signum, frame) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    def start(self, name: str, argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
        log.parent.mkdir(parents=True, exist_ok=True)
        handle = log.open("ab")
        merged = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        process = subprocess.Popen(
            argv, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=merged, start_new_session=True
        )
        handle.close()
        self.children[name] = (process, log)
        logger.info("started %s (pid %d), log %s", name, process.pid, log)
        return process

    def run(self, name: str, argv: list[str], log: Path, env: dict[str, str] | None = None, poll=None) -> None:
        """Run a child to completion, calling `poll()` every second (for progress); raise if it fails."""
        process = self.start(name, argv, log, env)
        while process.poll() is None:
            if poll is not None:
                poll()
            time.sleep(1.0)
        if poll is not None:
            poll()
        self.children.pop(name, None)
        if process.returncode != 0:
            raise ChildFailed(f"{name} exited with status {process.returncode}; see {log}\n{tail(log)}")

    def wait_http(self, name: str, url: str, timeout_s: float, tick=None) -> None:
        """Wait until `url` answers 200, failing early if the child dies."""
        process, log = self.children[name]
        if wait_until_ok(url, timeout_s, alive=lambda: process.poll() is None, tick=tick, poll_s=1.0):
            return
        if process.poll() is not None:
            raise ChildFailed(f"{name} exited (status {process.returncode}) before {url} answered; see {log}\n{tail(log)}")
        raise ChildFailed(f"{name} did not answer {url} within {timeout_s:.0f} s; see {log}\n{tail(log)}")

    def stop(self, name: str, grace_s: float = 15.0) -> None:
        process, _ = self.children.pop(name, (None, None))
        if process is None or process.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            try:
                process.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        # Reap whatever the child left behind in its session.
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def stop_all(self) -> None:
        for name in list(self.children):
            self.stop(name)


def tail(log: Path, lines: int = 15) -> str:
    try:
        text = log.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return "\n".join("    " + line[:300] for line in text)
