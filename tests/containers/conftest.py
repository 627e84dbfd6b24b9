"""Fixtures of the container tests: the engine, the base image, a copy of the project to run the stack in, and
the loopback server that hands the CPU images torch's CPU build.

The project copy is what git would check out (tracked and untracked-but-not-ignored files), so the stack runs
on a fresh tree, never on the developer's .env or volumes/. Commands run there as a user would type them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from engine import Engine, python_base, serve_wheels  # noqa: E402


@pytest.fixture(scope="session")
def engine():
    engine = Engine.start()
    try:
        yield engine
    finally:
        engine.stop()


@pytest.fixture(scope="session")
def base_image(engine) -> str:
    return python_base(engine)


@pytest.fixture(scope="session")
def wheels_url():
    """An HTTP folder of wheels on 127.0.0.1 (the image builds use the host network), or None."""
    with serve_wheels() as url:
        yield url


@pytest.fixture(scope="session")
def stack_user() -> tuple[int, int]:
    """The uid:gid the stack runs as: a user that is neither root nor the images' own (1000/1001)."""
    return (4242, 4242) if os.geteuid() == 0 else (os.getuid(), os.getgid())
