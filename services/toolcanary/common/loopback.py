"""Loopback helpers the launchers of every service share: a free port, and waiting until a URL answers 200.

Standard library only (like all of the contract), so every service and every image can import it.

    port = free_port()
    ok = wait_until_ok(f"http://127.0.0.1:{port}/health", timeout_s=60, alive=lambda: child.poll() is None)
"""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable

# Loopback URLs must not go through an HTTP(S)_PROXY from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on now (the OS picks it; another process may still take it first)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def wait_until_ok(url: str, timeout_s: float, *, alive: Callable[[], bool] = lambda: True,
                  tick: Callable[[], None] | None = None, poll_s: float = 0.5,
                  request_timeout_s: float = 5.0, accept: Callable[[bytes], bool] = lambda body: True) -> bool:
    """Poll GET `url` until it answers 200 with a body `accept` takes (True); False once `alive()` is false
    or `timeout_s` has passed.

    `tick` is called after every unanswered poll (progress output).
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive():
            return False
        try:
            with _OPENER.open(url, timeout=request_timeout_s) as response:
                if response.status == 200 and accept(response.read()):
                    return True
        except (urllib.error.URLError, OSError, ValueError):
            pass
        if tick is not None:
            tick()
        time.sleep(poll_s)
    return False
