"""The simulator's HTTP server: uvicorn with limits on connections, on every phase of a request, and per client.

uvicorn closes an idle keep-alive connection, but any byte that arrives (a lone CRLF every few seconds) cancels
that timer, and it waits forever for a head or a body, so a few thousand connections that trickle bytes stay
open and starve every other client. `GuardedHttpToolsProtocol` gives each phase of a connection one deadline,
armed when the phase begins and never moved by the bytes that arrive:
- waiting for a request (a new connection, or between keep-alive requests): `idle_timeout_s` (a new
  connection: `head_timeout_s`);
- a request head begun but unfinished: `head_timeout_s`; one that grows past `MAX_HEAD_BYTES` is answered 431;
- a body announced but not all there: `body_timeout_s`;
- the app at work on a whole request: no deadline (a role call may take minutes).
An answer sent before the body was read (a 401, a 413) closes the connection, so that no body can trickle on
after it. `max_connections_per_client` bounds the connections one peer address holds; `limit_concurrency`
answers 503 at once beyond that many connections and requests in all, instead of queueing them. The parser is
httptools (C): the simulator answers thousands of role calls a second, and uvicorn's pure-Python h11 parser
cost about as much CPU per call as the role code itself.

    serve(create_app(settings), settings)     # what `python -m toolcanary.simulator serve` runs
"""

from __future__ import annotations

import asyncio
import gc
from collections import Counter
from typing import ClassVar

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from toolcanary.simulator.settings import SimulatorSettings

MAX_HEAD_BYTES = 64 * 1024  # the largest request head accepted


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with a deadline per phase of a connection and a per-client limit."""

    head_timeout_s: float = 10.0
    idle_timeout_s: float = 5.0
    body_timeout_s: float = 60.0
    max_connections_per_client: int = 1024
    # Connections per peer address, for one server (protocol_for makes a class per server).
    clients: ClassVar[Counter] = Counter()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._in_head, self._head_bytes, self._message_done = False, 0, True
        self._deadline: asyncio.TimerHandle | None = None
        peer = transport.get_extra_info("peername")
        self._peer = peer[0] if isinstance(peer, tuple) and peer else str(peer)
        self.clients[self._peer] += 1
        if self.clients[self._peer] > self.max_connections_per_client:
            self._refuse(503, "Service Unavailable", f"too many connections from {self._peer}: expected at most "
                         f"{self.max_connections_per_client} at once; reuse connections or wait")
            return
        self._set_deadline(self.head_timeout_s)  # a connection that sends nothing at all is closed too

    def _set_deadline(self, seconds: float | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(seconds, self._overdue) if seconds is not None else None

    def _overdue(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._in_head and not self.transport.is_closing():
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._refuse(431, "Request Header Fields Too Large", "request head too large: expected at most "
                             f"{MAX_HEAD_BYTES} bytes of request line and headers")

    def _refuse(self, status: int, reason: str, message: str) -> None:
        body = message.encode()
        self.transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: text/plain\r\ncontent-length: %d\r\n"
                             b"connection: close\r\n\r\n%s" % (status, reason.encode(), len(body), body))
        self.transport.close()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head, self._head_bytes, self._message_done = True, 0, False
        self._set_deadline(self.head_timeout_s)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._set_deadline(self.body_timeout_s)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._message_done = True
        # The app has the whole request now; if it already answered, the connection waits for the next one.
        self._set_deadline(self.idle_timeout_s if self.cycle.response_complete else None)
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if not self._message_done:  # answered before its body was read: no body may trickle on after it
            self.transport.close()
        else:
            self._set_deadline(self.idle_timeout_s)

    def connection_lost(self, exc: Exception | None) -> None:
        self._set_deadline(None)
        self.clients[self._peer] -= 1
        if self.clients[self._peer] <= 0:
            del self.clients[self._peer]
        super().connection_lost(exc)


def protocol_for(settings: SimulatorSettings) -> type[GuardedHttpToolsProtocol]:
    return type("SimulatorHttpProtocol", (GuardedHttpToolsProtocol,), {
        "head_timeout_s": settings.head_timeout_s, "idle_timeout_s": float(settings.timeout_keep_alive_s),
        "body_timeout_s": settings.body_timeout_s, "max_connections_per_client": settings.max_connections_per_client,
        "clients": Counter()})


def server_config(app, settings: SimulatorSettings) -> uvicorn.Config:
    """The uvicorn configuration the simulator serves under (tests start a server from it too)."""
    return uvicorn.Config(
        app, host=settings.host, port=settings.port, log_level=settings.log_level.lower(), workers=1,
        http=protocol_for(settings), limit_concurrency=settings.limit_concurrency,
        timeout_keep_alive=settings.timeout_keep_alive_s)


def serve(app, settings: SimulatorSettings) -> None:
    # What is built by now (the library, the stored tasks, the app) lives as long as the process: frozen out of
    # the collector's reach, so that a full collection walks only what role calls allocate (LOG.md, 2026-12-05).
    gc.collect()
    gc.freeze()
    uvicorn.Server(server_config(app, settings)).run()
