"""Async HTTP client for the simulator's four roles; a failure comes back as an aborted response with its cause.

Every call has its own timeout (per role). What the simulator answers decides what happens next:

| answer                                   | retried              | abort cause                    |
|------------------------------------------|----------------------|--------------------------------|
| 5xx, 408, 429, connection error          | yes, backoff doubling with jitter | `upstream` (after the last try) |
| no answer within the role's timeout      | yes                  | `timeout` (after the last try) |
| 413 (the request is too large)           | no                   | `too_large`                    |
| 401, 403 (the token is refused)          | no                   | `auth`: the run stops (faults.fatal_stop) |
| any other 4xx (422, 409, 400, 404, ...)  | no                   | `rejected`, with the simulator's reason |
| 200 that is not the role's response      | no                   | `parse`                        |

A refused token fails every later call of this client at once (no request sent): no retry can fix it,
and the step's other episodes should not each wait for their own 401. The aborted response goes into the
episode's record, which the trainers count and act on instead of crashing the step.

    async with SimulatorClient("http://127.0.0.1:8300") as sim:
        task = await sim.task(TaskRequest(task_key="s1-g0", difficulty=...))
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from dataclasses import dataclass
from typing import TypeVar

import aiohttp
from pydantic import BaseModel, ValidationError
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from toolcanary.contract.simulator_api import (
    GoldRequest,
    GoldResponse,
    TaskRequest,
    TaskResponse,
    ToolRequest,
    ToolResponse,
    UserRequest,
    UserResponse,
    VerifyRequest,
    VerifyResponse,
)

logger = logging.getLogger(__name__)
TOKEN_ENV = "TOOLCANARY_SIMULATOR_TOKEN"
R = TypeVar("R", bound=BaseModel)


@dataclass(frozen=True)
class RoleTimeouts:
    task: float = 300.0
    tool: float = 150.0
    user: float = 150.0
    verify: float = 300.0


class SimulatorClient:
    """One connection pool to one simulator; safe to share between the episodes of an event loop."""

    def __init__(self, base_url: str, timeouts: RoleTimeouts | None = None, retries: int = 2,
                 max_in_flight: int = 64, backoff_s: float = 0.2) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeouts = timeouts or RoleTimeouts()
        self.retries = retries
        self.backoff_s = backoff_s
        self._limit = asyncio.Semaphore(max_in_flight)
        # aiohttp rather than httpx: httpx's pool spent most of a 64-episode rollout assigning connections.
        # The simulator's optional bearer token is read from the same variable the service reads.
        token = os.environ.get(TOKEN_ENV)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=max_in_flight), headers=headers)
        self.calls = 0
        self.retried = 0
        self.refused: str | None = None  # the 401/403 detail, once the simulator refused the token

    async def __aenter__(self) -> SimulatorClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.close()

    async def gold(self, request: GoldRequest) -> GoldResponse:
        return await self._post("/v1/gold", request, GoldResponse, self.timeouts.verify)

    async def task(self, request: TaskRequest) -> TaskResponse:
        return await self._post("/v1/task", request, TaskResponse, self.timeouts.task)

    async def tool(self, request: ToolRequest) -> ToolResponse:
        return await self._post("/v1/tool", request, ToolResponse, self.timeouts.tool)

    async def user(self, request: UserRequest) -> UserResponse:
        return await self._post("/v1/user", request, UserResponse, self.timeouts.user)

    async def verify(self, request: VerifyRequest) -> VerifyResponse:
        return await self._post("/v1/verify", request, VerifyResponse, self.timeouts.verify)

    async def _post(self, path: str, request: BaseModel, kind: type[R], timeout: float) -> R:
        body = request.model_dump(mode="json", exclude_none=True)
        started = time.monotonic()
        if self.refused is not None:
            return kind(outcome="aborted", abort_cause="auth", abort_detail=self.refused, latency_s=0.0)
        retrying = AsyncRetrying(stop=stop_after_attempt(self.retries + 1), wait=self._backoff,
                                 retry=retry_if_exception_type(_Transient), before_sleep=self._count_retry,
                                 reraise=True)
        try:
            status, text = await retrying(self._send, path, body, timeout)
        except _Transient as err:
            return self._aborted(kind, err.cause, err.detail, started)
        if status in (401, 403):
            self.refused = f"{path}: HTTP {status}: {text[:300]}"
            return self._aborted(kind, "auth", self.refused, started)
        if status >= 400:
            # This one request is wrong (too large, malformed, a reused key); repeating it cannot help.
            return self._aborted(kind, "too_large" if status == 413 else "rejected",
                                 f"{path}: HTTP {status}: {text[:300]}", started)
        try:
            return kind.model_validate_json(text)
        except (ValueError, ValidationError) as err:
            return self._aborted(kind, "parse", f"{path}: an answer that is not a {kind.__name__}: {str(err)[:300]}",
                                 started)

    async def _send(self, path: str, body: dict, timeout: float) -> tuple[int, str]:
        """One try: the answer's status and text, or `_Transient` for what a later try may not meet."""
        try:
            async with self._limit:
                self.calls += 1
                async with self._http.post(f"{self.base_url}{path}", json=body,
                                           timeout=aiohttp.ClientTimeout(total=timeout)) as answer:
                    status, text = answer.status, await answer.text()
        except TimeoutError as err:
            raise _Transient("timeout", f"{path}: no answer within {timeout:g} s ({type(err).__name__})") from None
        except aiohttp.ClientError as err:
            raise _Transient("upstream", f"{path}: {type(err).__name__}: {err}") from None
        if status >= 500 or status in (408, 429):
            raise _Transient("upstream", f"{path}: HTTP {status}: {text[:300]}")
        return status, text

    def _backoff(self, state: RetryCallState) -> float:
        # Doubling, with jitter so that the episodes of a step do not come back all at once.
        return self.backoff_s * 2 ** (state.attempt_number - 1) * random.uniform(0.5, 1.5)

    def _count_retry(self, state: RetryCallState) -> None:
        self.retried += 1

    @staticmethod
    def _aborted(kind: type[R], cause: str, detail: str, started: float) -> R:
        logger.warning("simulator call aborted: %s", detail)
        return kind(outcome="aborted", abort_cause=cause, abort_detail=detail, latency_s=time.monotonic() - started)


class _Transient(Exception):
    """A failed try that a later one may not meet (5xx, 408, 429, no connection, no answer in time)."""

    def __init__(self, cause: str, detail: str) -> None:
        super().__init__(detail)
        self.cause, self.detail = cause, detail
