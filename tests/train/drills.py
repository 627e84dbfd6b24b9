"""Helpers of the trainer's fault drills: the real scripted simulator as a killable process on a fixed port,
the CPU run's command line as a process, and the comparison of two runs' files.

Everything listens on 127.0.0.1 and every process is stopped by the test that started it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from toolcanary.common.loopback import free_port
from toolcanary.contract.csv_schemas import read_train_metrics
from toolcanary.train.publisher import read_published
from toolcanary.train.task_keys import TAG_FILE

# The CPU run at its smallest: 2 groups x 2 episodes, 16-token turns, a 3-step warm start on 4 tasks.
SMALL = ["--tasks-per-step", "2", "--rollouts-per-task", "2", "--warm-start-tasks", "4", "--warm-start-steps", "3",
         "--max-turn-tokens", "16", "--quiet", "--log-level", "WARNING"]
# Columns that measure time, not what was trained.
TIMING = {"step_seconds"}


class SimulatorProcess:
    """`python -m toolcanary.simulator serve` on one port, which `kill` and `start` can take down and bring back.

    Without a TOOLCANARY_SIMULATOR_TOKEN in `env` it serves `--insecure`: the drills are about faults, not access.
    """

    def __init__(self, runs_dir: Path, run: str = "drill", *extra: str, env: dict | None = None,
                 ready: bool = True) -> None:
        self.runs_dir, self.run, self.extra = Path(runs_dir), run, extra
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLCANARY_")} | (env or {})
        self.ready = ready  # wait for readiness (else only for liveness: an llm backend with its upstream down)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.log = self.runs_dir / f"simulator-{self.port}.log"

    def start(self) -> SimulatorProcess:
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "toolcanary.simulator", "serve", "--host", "127.0.0.1", "--port",
                   str(self.port), "--run", self.run, "--runs-dir", str(self.runs_dir), "--log-level", "warning",
                   *(self.extra or ("--backend", "scripted")),
                   *(() if self.env.get("TOOLCANARY_SIMULATOR_TOKEN") else ("--insecure",))]
        with self.log.open("a") as log:
            self.process = subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        path = "/health/ready" if self.ready else "/health/live"
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                if httpx.get(f"{self.url}{path}", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.kill()  # never leave a process behind a failed start
        raise AssertionError(f"the simulator did not answer {path} within 60 s:\n{self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush beyond what each record already had."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=20)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def records(self, step: int) -> Path:
        return self.runs_dir / self.run / "simulator" / f"step_{step:04d}.jsonl"


def replay_tasks_of(reference: Path, root: Path, run: str = "drill") -> None:
    """Give the run under `root` the task-key tag of the one under `reference`, as a user reproduces a run:
    with the same tag, seed and settings it asks the simulator for the same tasks."""
    tag = Path("runs") / run / "trainer" / TAG_FILE
    (root / tag).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(reference / tag, root / tag)


def roots_env(root: Path, **extra: str) -> dict:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("TOOLCANARY_")},
            "TOOLCANARY_CHECKPOINTS_DIR": str(root / "checkpoints"), "TOOLCANARY_RESULTS_DIR": str(root / "results"),
            "TOOLCANARY_RUNS_DIR": str(root / "runs"), **extra}


def train_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "toolcanary.train", "cpu", *args]


def train(root: Path, *args: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
    """The CPU run's command line, to its end."""
    return subprocess.run(train_command(*args), env=roots_env(root, **env), capture_output=True, text=True,
                          timeout=timeout)


def train_process(root: Path, *args: str, **env: str) -> subprocess.Popen:
    """The CPU run's command line, started (for a drill that kills it)."""
    root.mkdir(parents=True, exist_ok=True)
    log = (root / "trainer.log").open("a")
    return subprocess.Popen(train_command(*args), env=roots_env(root, **env), stdout=log, stderr=subprocess.STDOUT)


def wait_for(predicate, timeout: float, poll_s: float = 0.002, process: subprocess.Popen | None = None) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        if process is not None and process.poll() is not None:
            return predicate()
        time.sleep(poll_s)
    return False


def metrics_rows(root: Path, run: str = "drill") -> dict[int, dict]:
    rows = read_train_metrics(root / "results" / run / "train_metrics.csv")
    return {int(r["step"]): {k: v for k, v in r.items() if k not in TIMING} for r in rows}


def episodes(root: Path, run: str = "drill") -> list[dict]:
    path = root / "results" / run / "episodes.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def published(root: Path, run: str = "drill") -> dict[int, str]:
    entries = read_published(root / "checkpoints" / run)
    steps = [e.step for e in entries]
    assert len(steps) == len(set(steps)), f"a step announced twice: {steps}"
    return {e.step: e.weights_sha256 for e in entries}


def same_rows(a: dict, b: dict) -> bool:
    """Equal rows, nan equal to nan."""
    return a.keys() == b.keys() and all(a[k] == b[k] or (a[k] != a[k] and b[k] != b[k]) for k in a)
