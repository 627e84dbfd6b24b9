"""The scripted backend: deterministic, seeded, no model; the embedded default for CPU runs and tests.

    from toolcanary.simulator.scripted import ScriptedBackend, gold_trajectory

The same seed and task key give the same task, and the same call gives the same result. See `author`, `roles`
and `plan` for what each role does, and `gold` for the ideal conversation of a task.
"""

from __future__ import annotations

from toolcanary.contract import (
    SimulatedTask,
    TaskRequest,
    TaskResponse,
    ToolRequest,
    UserRequest,
    VerifyRequest,
)
from toolcanary.simulator.backend import RoleOutput
from toolcanary.simulator.library_index import LibraryIndex
from toolcanary.simulator.scripted.author import make_task
from toolcanary.simulator.scripted.gold import gold_trajectory
from toolcanary.simulator.scripted.roles import tool_turn, user_turn, verify

__all__ = ["ScriptedBackend", "gold_trajectory", "make_task"]


class ScriptedBackend:
    name = "scripted"

    def __init__(self, index: LibraryIndex, seed: int = 0) -> None:
        self.index, self.seed = index, seed

    async def author(self, request: TaskRequest, abstain: bool) -> RoleOutput:
        task = make_task(self.index, request.difficulty, request.task_key, self.seed, abstain, draw=request.draw)
        return RoleOutput(TaskResponse(task=task))

    async def tool(self, task: SimulatedTask, request: ToolRequest) -> RoleOutput:
        hint = self.index.result_hints.get(request.call.function.name)
        return RoleOutput(tool_turn(task, request.history, request.call, hint))

    async def user(self, task: SimulatedTask, request: UserRequest) -> RoleOutput:
        return RoleOutput(user_turn(task, request.history))

    async def verify(self, task: SimulatedTask, request: VerifyRequest) -> RoleOutput:
        return RoleOutput(verify(task, request.trajectory, request.num_criteria))

    async def unavailable(self) -> list[dict[str, str]]:
        return []  # depends on nothing outside the process

    async def aclose(self) -> None:
        return None
