"""Start the scripted simulator as a child process on a free loopback port, and stop it again.

The CPU run uses this when no `--simulator-url` is given; tests use it to run against the real service.
The child is guarded by a bearer token: the one in TOOLCANARY_SIMULATOR_TOKEN if set, else a random one made for
this start, which is put in this process's environment while the simulator runs, so that the trainer's
clients (which read that variable) send it. Another local user who finds the port gets 401s.

    with EmbeddedSimulator(run="demo", runs_dir=Path("volumes/runs")) as url:
        ...  # POST f"{url}/v1/task"
"""

from __future__ import annotations

import logging
import os
import secrets
import subprocess
import sys
from pathlib import Path

from toolcanary.common.loopback import free_port, wait_until_ok
from toolcanary.train.simulator_client import TOKEN_ENV

logger = logging.getLogger(__name__)


class EmbeddedSimulator:
    """`python -m toolcanary.simulator serve --mode toolcanary --backend scripted` as a context manager yielding
    its URL (the mode is named: the scripted backend plays no other, whatever TOOLCANARY_SIMULATOR_MODE says)."""

    def __init__(self, run: str, runs_dir: Path, seed: int = 0, startup_timeout_s: float = 60.0,
                 replay_tasks_of: str | None = None) -> None:
        self.run, self.runs_dir, self.seed, self.replay_tasks_of = run, Path(runs_dir), seed, replay_tasks_of
        self.startup_timeout_s = startup_timeout_s
        self.process: subprocess.Popen | None = None
        self.url = ""
        self.token = ""
        self._token_was: str | None = None

    def __enter__(self) -> str:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        log_dir = self.runs_dir / self.run
        log_dir.mkdir(parents=True, exist_ok=True)
        self._log = (log_dir / "embedded_simulator.log").open("ab")
        self._token_was = os.environ.get(TOKEN_ENV)
        self.token = self._token_was or secrets.token_urlsafe(32)
        os.environ[TOKEN_ENV] = self.token
        env = {**os.environ, "TOOLCANARY_RUNS_DIR": str(self.runs_dir)}
        command = [sys.executable, "-m", "toolcanary.simulator", "serve", "--host", "127.0.0.1", "--port", str(port),
                   "--mode", "toolcanary", "--backend", "scripted", "--run", self.run, "--runs-dir", str(self.runs_dir),
                   "--seed", str(self.seed), *(["--replay-tasks-of", self.replay_tasks_of] if self.replay_tasks_of else [])]
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        if wait_until_ok(f"{self.url}/health", self.startup_timeout_s, alive=lambda: self.process.poll() is None,
                         poll_s=0.2, request_timeout_s=1.0):
            logger.info("scripted simulator up at %s (pid %d)", self.url, self.process.pid)
            return self.url
        exited = self.process.poll()
        self._stop()
        if exited is not None:
            raise RuntimeError(f"the scripted simulator exited with {exited} during startup; "
                               f"see {log_dir / 'embedded_simulator.log'}")
        raise RuntimeError(f"the scripted simulator did not answer /health within {self.startup_timeout_s:g} s")

    def __exit__(self, *exc) -> None:
        self._stop()

    def _stop(self) -> None:
        if self.token and self._token_was is None:
            os.environ.pop(TOKEN_ENV, None)
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if getattr(self, "_log", None):
            self._log.close()
