"""Idempotent task keys: the n rollouts of one GRPO group get one task, even when they ask at the same time.

The first request for a key runs the task author; concurrent requests for the same key wait for that one
answer. Only successful answers are kept (an aborted author call may be retried with the same key). The
registry is seeded from the persisted records at start-up, so keys answered before a restart stay answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from toolcanary.contract import DifficultySettings, SimulatedTask, TaskResponse
from toolcanary.simulator.backend import RoleOutput


class TaskKeyConflict(Exception):
    """A key that was answered for other difficulty settings; reusing it would hand out the wrong task."""

    def __init__(self, key: str, before: DifficultySettings, now: DifficultySettings) -> None:
        self.key, self.before, self.now = key, before, now
        super().__init__(
            f"task_key {key!r}: expected the difficulty it was first asked with ({before.model_dump()}), "
            f"got {now.model_dump()}. Use a new task_key for new settings."
        )


class TaskRegistry:
    def __init__(self, known: dict[str, tuple[DifficultySettings, SimulatedTask]] | None = None) -> None:
        self._known = dict(known or {})
        self._pending: dict[str, tuple[DifficultySettings, asyncio.Future[RoleOutput]]] = {}

    def __len__(self) -> int:
        return len(self._known)

    def get(self, key: str) -> SimulatedTask | None:
        entry = self._known.get(key)
        return entry[1] if entry else None

    async def get_or_create(
        self, key: str, difficulty: DifficultySettings, create: Callable[[], Awaitable[RoleOutput]]
    ) -> tuple[RoleOutput, bool]:
        """The task for `key` and whether it was answered before (or by a concurrent request).

        Raises:
            TaskKeyConflict: the key was answered for different difficulty settings.
        """
        if key in self._known:
            asked, task = self._known[key]
            if asked != difficulty:
                raise TaskKeyConflict(key, asked, difficulty)
            return RoleOutput(TaskResponse(task=task)), True
        pending = self._pending.get(key)
        if pending is not None:
            if pending[0] != difficulty:
                raise TaskKeyConflict(key, pending[0], difficulty)
            return await asyncio.shield(pending[1]), True
        # The author call runs as its own task: a requester that goes away does not cancel it for the others.
        job = asyncio.ensure_future(self._create(key, difficulty, create))
        self._pending[key] = (difficulty, job)
        return await asyncio.shield(job), False

    async def _create(self, key: str, difficulty: DifficultySettings,
                      create: Callable[[], Awaitable[RoleOutput]]) -> RoleOutput:
        try:
            output = await create()
            response = output.response
            if isinstance(response, TaskResponse) and response.outcome == "ok" and response.task is not None:
                self._known[key] = (difficulty, response.task)
            return output
        finally:
            self._pending.pop(key, None)
