"""Fixtures of the stack tests: the repository root, the Compose binary and the example env file.

Run: .venvs/dev/bin/python -m pytest tests/stack -q
"""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from compose_env import ROOT, resolve, run_compose, with_ids  # noqa: E402


@pytest.fixture(scope="session")
def example_env(tmp_path_factory) -> Path:
    """.env.example with the two ids filled in, as `make env` writes it."""
    path = tmp_path_factory.mktemp("env") / "example.env"
    path.write_text(with_ids((ROOT / ".env.example").read_text()))
    return path


@pytest.fixture(scope="session")
def compose_cli(example_env):
    """`compose_cli(*args, env_file=..., env=...)` runs the Compose binary (default env file: example_env)."""
    def run(*args: str, env_file: str | os.PathLike = example_env, env: dict | None = None):
        return run_compose(*args, env_file=env_file, env=env)

    return run


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def resolved(example_env) -> dict:
    """The whole stack as Compose resolves it with the example env and every profile."""
    return resolve(example_env)
