"""The simulator's core, free of HTTP: route a role request to the backend, time it, persist it, count it.

Whatever the backend does, a role call ends in a contract response: an exception inside the backend becomes an
aborted response (cause `upstream`, the exception in `abort_detail`), is logged with its traceback, recorded
and counted, and never surfaces as a server error or as a made-up reward.

The tool, user and verifier roles play the task this simulator authored under the request's `task_key`: the
request names the task, the service looks it up in its `TaskRegistry` and hands it to the backend next to the
request. A key it never issued is refused (`TaskNotIssued`, 422) before the backend runs, so it earns no
reward and leaves no record. The record of a role call stores the request as sent, so its `task_key` refers
to the task-author record that holds the task, instead of repeating the task in every line.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from toolcanary.contract import (
    CONTRACT_VERSION,
    Outcome,
    RoleRecord,
    SimulatedTask,
    TaskRequest,
    TaskResponse,
    ToolRequest,
    ToolResponse,
    UserRequest,
    UserResponse,
    VerifyRequest,
    VerifyResponse,
)
from toolcanary.simulator.backend import Backend, RoleOutput
from toolcanary.simulator.metrics import Metrics
from toolcanary.simulator.records import RecordStore
from toolcanary.simulator.settings import SimulatorSettings
from toolcanary.simulator.task_registry import TaskKeyConflict, TaskRegistry
from toolcanary.simulator.task_replay import TaskReplay


class TaskNotIssued(Exception):
    """A role request whose task key this simulator never answered a task for."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(
            f"task_key {key[:200]!r}: expected the key of a task this simulator authored (POST /v1/task), "
            "got a key it never issued; ask /v1/task for the task first and send back the task_key it answered")


log = logging.getLogger(__name__)


def abstains(seed: int, task_key: str, fraction: float) -> bool:
    """Whether `no_call_fraction` makes this key (or the request's draw) an abstention task (a stable coin per
    seed and key)."""
    if fraction <= 0:
        return False
    digest = hashlib.sha256(f"abstain\x00{seed}\x00{task_key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


class SimulatorService:
    def __init__(self, settings: SimulatorSettings, backend: Backend, store: RecordStore,
                 metrics: Metrics | None = None) -> None:
        self.settings, self.backend, self.store = settings, backend, store
        self.metrics = metrics or Metrics()
        self.registry = TaskRegistry(store.iter_tasks(), cache_size=settings.task_cache_size,
                                     keep_failures=settings.mode == "trustee")
        self.metrics.set("tasks_known", len(self.registry))
        self.metrics.set("tasks_in_memory", self.registry.in_memory)
        self.replay = TaskReplay.load(settings.runs_dir, settings.replay_tasks_of) if settings.replay_tasks_of else None
        if store.skipped_lines:
            log.warning("%d unreadable record lines skipped while reloading tasks", store.skipped_lines)

    async def task(self, request: TaskRequest) -> TaskResponse:
        abstain = not request.difficulty.call_expected or abstains(
            self.settings.seed, request.draw or request.task_key, self.settings.no_call_fraction)

        async def author() -> RoleOutput:
            if self.replay is not None:
                return self.replay.answer(request)
            return await self.backend.author(request, abstain)

        async def produce() -> RoleOutput:
            output, cached = await self.registry.get_or_create(request.task_key, request.difficulty, author)
            if cached:
                self.metrics.inc("task_cache_hits_total")
            return output

        response = await self._run("task", request, TaskResponse, produce)
        self.metrics.set("tasks_known", len(self.registry))
        self.metrics.set("tasks_in_memory", self.registry.in_memory)
        return response

    def resolve(self, key: str) -> SimulatedTask:
        """The task this simulator authored under `key`.

        Raises:
            TaskNotIssued: no task was authored under the key.
        """
        task = self.registry.get(key)
        if task is None:
            raise TaskNotIssued(key)
        return task

    async def tool(self, request: ToolRequest) -> ToolResponse:
        task = self.resolve(request.task_key)
        return await self._run("tool", request, ToolResponse, lambda: self.backend.tool(task, request))

    async def user(self, request: UserRequest) -> UserResponse:
        task = self.resolve(request.task_key)
        return await self._run("user", request, UserResponse, lambda: self.backend.user(task, request))

    async def verify(self, request: VerifyRequest) -> VerifyResponse:
        task = self.resolve(request.task_key)
        return await self._run("verify", request, VerifyResponse, lambda: self.backend.verify(task, request))

    async def _run(self, role: str, request, response_type: type, produce: Callable[[], Awaitable[RoleOutput]]):
        started = time.perf_counter()
        self.metrics.inc("in_flight", 1, role=role)
        try:
            output = await produce()
        except TaskKeyConflict:
            raise
        except Exception as err:  # noqa: BLE001 - a backend bug is recorded as an aborted call, not a 500
            log.exception("%s backend failed on a %s call", self.backend.name, role)
            output = RoleOutput(response_type(outcome="aborted", abort_cause="upstream",
                                              abort_detail=f"internal error: {type(err).__name__}: {err}"[:500]))
        finally:
            self.metrics.inc("in_flight", -1, role=role)
        response: Outcome = output.response.model_copy(update={"latency_s": round(time.perf_counter() - started, 6)})
        self._record(role, request, response, output.retries, output.backend or self.backend.name)
        return response

    def _record(self, role: str, request, response: Outcome, retries: int, backend: str) -> None:
        # Validated like every line a reader will trust: a field this process got wrong fails here, loudly,
        # instead of writing a line that the simulator's restart and the audit would skip.
        record = RoleRecord(
            contract_version=CONTRACT_VERSION, time=datetime.now(UTC).isoformat(timespec="milliseconds"),
            run=self.settings.run, step=request.step, role=role, backend=backend,
            episode_id=request.episode_id, request=request.model_dump(mode="json"),
            response=response.model_dump(mode="json"), outcome=response.outcome, abort_cause=response.abort_cause,
            latency_s=response.latency_s, prompt_tokens=response.prompt_tokens,
            completion_tokens=response.completion_tokens, retries=retries,
        )
        self.store.append(record)
        m = self.metrics
        m.inc("calls_total", role=role, backend=backend, outcome=response.outcome)
        if response.abort_cause:
            m.inc("aborts_total", role=role, cause=response.abort_cause)
        m.inc("retries_total", retries, role=role)
        m.inc("tokens_total", response.prompt_tokens, role=role, kind="prompt")
        m.inc("tokens_total", response.completion_tokens, role=role, kind="completion")
        reward = getattr(response, "reward", None)
        if reward is not None:
            m.inc("rewards_total", role=role, reward=f"{float(reward):g}")
        m.observe_latency(role, response.latency_s)
