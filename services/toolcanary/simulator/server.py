"""The simulator's HTTP server: uvicorn with limits on connections, idle time and unfinished request heads.

uvicorn closes an idle keep-alive connection, but it waits forever for the head of a request, so a few
thousand half-open connections (opened, a partial header sent, never finished) stay open and starve every
other client. `GuardedHttpToolsProtocol` closes a connection that has no whole request head
`head_timeout_s` after opening, or after the first read that left a head unfinished; it answers 431 and
closes one whose unfinished head grows past `MAX_HEAD_BYTES`. `limit_concurrency` answers 503 at once
beyond that many connections and requests, instead of queueing them. The parser is httptools (C): the
simulator answers thousands of role calls a second, and uvicorn's pure-Python h11 parser cost about as
much CPU per call as the role code itself.

    serve(create_app(settings), settings)     # what `python -m toolcanary.simulator serve` runs
"""

from __future__ import annotations

import asyncio

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from toolcanary.simulator.settings import SimulatorSettings

MAX_HEAD_BYTES = 64 * 1024  # the largest request head accepted


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with a deadline and a size limit on every request head."""

    head_timeout_s: float = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._in_head, self._head_bytes = False, 0
        self._head_deadline: asyncio.TimerHandle | None = None
        self._arm_head_deadline()  # a connection that sends nothing at all is closed too

    def _arm_head_deadline(self) -> None:
        if self._head_deadline is None:
            self._head_deadline = self.loop.call_later(self.head_timeout_s, self._head_overdue)

    def _disarm_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_overdue(self) -> None:
        self._head_deadline = None
        if not self.transport.is_closing():
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        # A deadline only for a head still unfinished after these bytes: a whole request in one read, the
        # usual case, costs no timer.
        if self._in_head and not self.transport.is_closing():
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._refuse_head()
            else:
                self._arm_head_deadline()

    def _refuse_head(self) -> None:
        message = f"request head too large: expected at most {MAX_HEAD_BYTES} bytes of request line and headers"
        self.transport.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain\r\n"
                             b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(message), message.encode()))
        self.transport.close()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head, self._head_bytes = True, 0

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._disarm_head_deadline()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        super().connection_lost(exc)


def protocol_for(settings: SimulatorSettings) -> type[GuardedHttpToolsProtocol]:
    return type("SimulatorHttpProtocol", (GuardedHttpToolsProtocol,), {"head_timeout_s": settings.head_timeout_s})


def server_config(app, settings: SimulatorSettings) -> uvicorn.Config:
    """The uvicorn configuration the simulator serves under (tests start a server from it too)."""
    return uvicorn.Config(
        app, host=settings.host, port=settings.port, log_level=settings.log_level.lower(), workers=1,
        http=protocol_for(settings), limit_concurrency=settings.limit_concurrency,
        timeout_keep_alive=settings.timeout_keep_alive_s)


def serve(app, settings: SimulatorSettings) -> None:
    uvicorn.Server(server_config(app, settings)).run()
