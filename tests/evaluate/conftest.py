"""Shared fixtures for the evaluation client's tests: stub servers, the CLI runner, fake checkpoints.

Every BFCL pass costs two fresh bfcl-eval processes (about 9 s of imports each on a small machine), so
passes that several tests read are module-scoped fixtures. Stub servers bind 127.0.0.1 on a free port
and are shut down when their fixture ends.

    .venvs/eval/bin/python -m pytest tests/evaluate -q
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from stub_server import StubServer  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
# A handful of categories of every kind keeps a pass near 30 s: AST (Python, Java, JavaScript, live),
# both abstention buckets, relevance and multi-turn.
SMALL = ["simple_python", "simple_java", "simple_javascript", "irrelevance", "live_multiple", "live_irrelevance",
         "live_relevance", "multi_turn_base", "multi_turn_miss_func"]


@pytest.fixture(scope="module")
def make_stub():
    servers: list[StubServer] = []

    def start(mode: str, model: str = "stub-step0000", **kwargs) -> StubServer:
        server = StubServer(0, model, mode, **kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def cli(results: Path, *args: str, checkpoints: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `python -m toolcanary.evaluate` the way a user does, with results under `results`."""
    env = {**os.environ, "TOOLCANARY_RESULTS_DIR": str(results),
           "TOOLCANARY_CHECKPOINTS_DIR": str(checkpoints or results / "checkpoints"),
           "TOOLCANARY_EVALUATE_THREADS": "4", "TOOLCANARY_EVALUATE_REQUEST_RETRIES": "0",
           "TOOLCANARY_EVALUATE_REQUEST_TIMEOUT_S": "20"}
    return subprocess.run([sys.executable, "-m", "toolcanary.evaluate", *args], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def run_args(run: str, server: StubServer, *extra: str, step: int = 0, pass_index: int = 1) -> list[str]:
    return ["run", "--run", run, "--step", str(step), "--pass", str(pass_index), "--base-url", server.base_url,
            "--model", server.model, *extra]


def make_checkpoint(root: Path, run: str, step: int, payload: bytes = b"weights") -> Path:
    """A published-looking checkpoint folder with a valid manifest (weights are a few bytes)."""
    folder = root / run / f"step_{step:04d}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.safetensors").write_bytes(payload)
    manifest = {"contract_version": "1.0", "run": run, "step": step, "base_model": "Qwen/Qwen3-4B",
                "weights_sha256": hashlib.sha256(payload).hexdigest(), "weight_files": ["model.safetensors"],
                "commit": "0" * 40, "curriculum_level": 1, "created_at": "2026-01-01T00:00:00Z"}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def read_csv(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []
