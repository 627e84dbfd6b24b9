"""Fixtures of the container tests: the engine, the base image, a copy of the project to run the stack in, and
the loopback server that hands the CPU images torch's CPU build.

The project copy is what git would check out (tracked and untracked-but-not-ignored files), so the stack runs
on a fresh tree, never on the developer's .env or volumes/. Commands run there as a user would type them.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from engine import ROOT, Engine, cpu_torch_wheelhouse, python_base  # noqa: E402


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


WHEELS_PORT = 18765


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # one line per pip request would bury the test's own output
        pass


@pytest.fixture(scope="session")
def wheels_url():
    """An HTTP folder of wheels on 127.0.0.1 (the image builds use the host network), or None."""
    folder = cpu_torch_wheelhouse()
    if folder is None:
        yield None
        return
    handler = functools.partial(QuietHandler, directory=str(folder))
    # The URL is a build argument of the install layers: a fixed port keeps their cache between runs.
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", WHEELS_PORT), handler)
    except OSError:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()


def checkout_copy(target: Path) -> Path:
    """The files of the repository as git sees them (tracked, and untracked but not ignored), copied."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name, follow_symlinks=False)
    return target


@pytest.fixture(scope="session")
def stack_user() -> tuple[int, int]:
    """The uid:gid the stack runs as: a user that is neither root nor the images' own (1000/1001)."""
    return (4242, 4242) if os.geteuid() == 0 else (os.getuid(), os.getgid())
