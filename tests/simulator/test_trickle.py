"""Connections that trickle bytes cannot hold the simulator: every phase of a connection has a deadline that the
bytes arriving do not move, an answer given before the body was read closes the connection, and one peer holds
a bounded number of connections.

The drill holds a few hundred trickling connections (a CRLF between requests, one body byte at a time, after a
401 and with a good token) on the loopback for several seconds and asks `/health` throughout: every answer
must come, 200, within a second, and every trickling connection must be closed by the server.
Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_trickle.py -q -s
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import httpx
from conftest import serving

TOKEN = "trickle-test-token-0123456789"
DEADLINES = {"timeout_keep_alive_s": 1, "head_timeout_s": 1.0, "body_timeout_s": 1.5}


def _closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closed `sock` (reading and discarding what it sends), None if it stayed open."""
    started = time.monotonic()
    sock.settimeout(0.2)
    while time.monotonic() - started < seconds:
        try:
            if sock.recv(65536) == b"":
                return time.monotonic() - started
        except TimeoutError:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - started
    return None


def _trickle(sock: socket.socket, data: bytes, every_s: float, stop: threading.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(OSError):
            sock.sendall(data)
        stop.wait(every_s)


def _closed_while_trickling(sock: socket.socket, data: bytes, within_s: float) -> float | None:
    """Send `data` every 0.3 s; seconds until the server closed `sock`, None if it stayed open `within_s`."""
    stop = threading.Event()
    threading.Thread(target=_trickle, args=(sock, data, 0.3, stop), daemon=True).start()
    try:
        return _closed_within(sock, within_s)
    finally:
        stop.set()


def test_crlf_between_requests_does_not_keep_a_connection_open(tmp_path):
    with serving(tmp_path, **DEADLINES) as (_, port), socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.settimeout(5)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        took = _closed_while_trickling(sock, b"\r\n", 6)
        assert took is not None and took < 3, took  # the 1 s keep-alive deadline, not moved by the CRLFs


def test_a_body_trickled_after_a_401_is_cut_off_by_the_closed_connection(tmp_path):
    with serving(tmp_path, token=TOKEN, **DEADLINES) as (_, port), socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"POST /v1/task HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000000\r\n\r\n{")
        sock.settimeout(5)
        answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 401") and b"connection: close" in answer.lower(), answer[:300]
        took = _closed_while_trickling(sock, b"x", 6)
        assert took is not None and took < 1, took


def test_a_body_trickled_with_a_good_token_is_closed_at_the_body_deadline(tmp_path):
    with serving(tmp_path, token=TOKEN, **DEADLINES) as (_, port), socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"POST /v1/task HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Authorization: Bearer " + TOKEN.encode() + b"\r\nContent-Length: 1000\r\n\r\n{")
        took = _closed_while_trickling(sock, b" ", 8)
        assert took is not None and took < 4, took  # body_timeout_s 1.5 from the head


def test_one_peer_holds_at_most_its_share_of_connections(tmp_path):
    with serving(tmp_path, max_connections_per_client=20, head_timeout_s=30) as (url, port):
        sockets = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
        try:
            with socket.create_connection(("127.0.0.1", port)) as extra:
                extra.settimeout(5)
                answer = extra.recv(65536)
                assert answer.startswith(b"HTTP/1.1 503") and b"at most 20" in answer, answer[:300]
            sockets.pop().close()
            time.sleep(0.2)
            assert httpx.get(f"{url}/health/live", timeout=5).status_code == 200  # a freed place is usable again
        finally:
            for sock in sockets:
                sock.close()


def test_drill_trickling_connections_never_starve_health(tmp_path, drill):
    kinds = {"crlf after a request": (b"GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n", b"\r\n"),
             "body after a 401": (b"POST /v1/tool HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n{", b"x"),
             "body with the token": (b"POST /v1/tool HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode()
                                     + b"\r\nContent-Length: 100000\r\n\r\n{", b" "),
             "unfinished head": (b"GET /health HTTP/1.1\r\nHost: x\r\n", b"x-a: b\r\n")}
    per_kind, stop, held = 100, threading.Event(), []
    with serving(tmp_path, token=TOKEN, limit_concurrency=2048, **DEADLINES) as (url, port):
        for opening, trickle in kinds.values():
            for _ in range(per_kind):
                sock = socket.create_connection(("127.0.0.1", port))
                sock.sendall(opening)
                held.append(sock)
                threading.Thread(target=_trickle, args=(sock, trickle, 0.5, stop), daemon=True).start()
        latencies, statuses, started = [], [], time.monotonic()
        try:
            while time.monotonic() - started < 6:
                asked = time.monotonic()
                statuses.append(httpx.get(f"{url}/health", timeout=5).status_code)
                latencies.append(time.monotonic() - asked)
                time.sleep(0.25)
            still_open = sum(_closed_within(sock, 0.05) is None for sock in held)
        finally:
            stop.set()
            for sock in held:
                sock.close()
    drill("trickling connections", held=len(held), kinds=len(kinds), health_answers=len(statuses),
          non_200=sum(s != 200 for s in statuses), slowest_health_s=round(max(latencies), 3),
          still_open_after_6_s=still_open)
    assert set(statuses) == {200} and max(latencies) < 1.0
    assert still_open == 0
