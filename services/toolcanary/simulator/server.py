"""The simulator's HTTP server: uvicorn with limits on connections, idle time and unfinished request heads.

uvicorn closes an idle keep-alive connection, but it waits forever for the head of a first request, so a few
thousand half-open connections (opened, a partial header sent, never finished) stay open and starve every
other client. `HeadTimeoutH11Protocol` closes a connection that has not sent a whole request head within
`head_timeout_s`; `limit_concurrency` answers 503 at once beyond that many connections and requests, instead
of queueing them; the h11 parser holds at most `MAX_INCOMPLETE_EVENT_BYTES` of an unfinished head.

    serve(create_app(settings), settings)     # what `python -m toolcanary.simulator serve` runs
"""

from __future__ import annotations

import asyncio

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from toolcanary.simulator.settings import SimulatorSettings

MAX_INCOMPLETE_EVENT_BYTES = 64 * 1024  # the largest request head accepted (uvicorn's default is 16 KiB)


class HeadTimeoutH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose first request head is not whole in time."""

    head_timeout_s: float = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_deadline = self.loop.call_later(self.head_timeout_s, self._head_overdue)

    def _head_overdue(self) -> None:
        # `cycle` is set once a whole request head arrived; before that the client has sent nothing usable.
        if self.cycle is None and not self.transport.is_closing():
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_deadline.cancel()
        super().connection_lost(exc)


def protocol_for(settings: SimulatorSettings) -> type[HeadTimeoutH11Protocol]:
    return type("SimulatorH11Protocol", (HeadTimeoutH11Protocol,), {"head_timeout_s": settings.head_timeout_s})


def server_config(app, settings: SimulatorSettings) -> uvicorn.Config:
    """The uvicorn configuration the simulator serves under (tests start a server from it too)."""
    return uvicorn.Config(
        app, host=settings.host, port=settings.port, log_level=settings.log_level.lower(), workers=1,
        http=protocol_for(settings), limit_concurrency=settings.limit_concurrency,
        timeout_keep_alive=settings.timeout_keep_alive_s, h11_max_incomplete_event_size=MAX_INCOMPLETE_EVENT_BYTES)


def serve(app, settings: SimulatorSettings) -> None:
    uvicorn.Server(server_config(app, settings)).run()
