"""What every simulator backend provides: one coroutine per role, returning a contract response.

The service (`service.py`) times each call, persists it and counts it; a backend only produces the response
and says how many retries it needed. The tool, user and verifier roles get the task the service resolved from
the request's `task_key` next to the request (the request names the task; it does not carry it). A backend never raises for bad model output: it returns an aborted
response with its cause. Anything it does raise is turned into an aborted response by the service.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from toolcanary.contract import (
    Outcome,
    SimulatedTask,
    TaskRequest,
    ToolRequest,
    UserRequest,
    VerifyRequest,
)

BackendName = Literal["scripted", "llm"]


@dataclass
class RoleOutput:
    response: Outcome
    retries: int = 0
    # Who produced the response when it was not the serving backend's own way: the trustee mode judges an
    # abstention task by the scripted backend's rule, and its record says so instead of "llm".
    backend: BackendName | None = None


class Backend(Protocol):
    name: BackendName

    async def author(self, request: TaskRequest, abstain: bool) -> RoleOutput: ...

    async def tool(self, task: SimulatedTask, request: ToolRequest) -> RoleOutput: ...

    async def user(self, task: SimulatedTask, request: UserRequest) -> RoleOutput: ...

    async def verify(self, task: SimulatedTask, request: VerifyRequest) -> RoleOutput: ...

    async def unavailable(self) -> list[dict[str, str]]:
        """What the backend depends on and cannot reach now, one {"upstream", "url", "error"} each; [] when
        it can serve. /health answers 503 while this is not empty."""
        ...

    async def aclose(self) -> None: ...
