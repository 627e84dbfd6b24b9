"""Idempotent task keys: the n rollouts of one GRPO group get one task, even when they ask at the same time.

The first request for a key runs the task author; concurrent requests for the same key wait for that one
answer. Successful answers are kept; an aborted author call may be retried with the same key, unless the
registry keeps failures (`keep_failures`, the trustee mode: there a failed key is replaced by another key, and
every rollout of the group must see the same failure to move on together; kept in memory, the most recent
`4 x cache_size`). The registry is seeded from the persisted records at start-up, so keys answered before a
restart stay answered.

Memory stays bounded over a long run: only the `cache_size` most recently used tasks are kept as objects;
every answered key lives in a private SQLite database on disk (a temporary one, rebuilt from the records
at each start and deleted when the service stops), read back when an older key is asked for again. A
44-hour run answers thousands of keys; in memory that grew without bound, on disk it costs a few MB.

    registry = TaskRegistry(store.iter_tasks(), cache_size=256)
    output, cached = await registry.get_or_create(key, difficulty, lambda: backend.author(request, abstain))
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable

from toolcanary.contract import DifficultySettings, SimulatedTask, TaskResponse
from toolcanary.simulator.backend import RoleOutput

# SQLite's own page cache for the spill database: 2 MB, whatever the number of keys.
SPILL_CACHE_KIB = 2048


class TaskKeyConflict(Exception):
    """A key that was answered for other difficulty settings; reusing it would hand out the wrong task."""

    def __init__(self, key: str, before: DifficultySettings, now: DifficultySettings) -> None:
        self.key, self.before, self.now = key, before, now
        super().__init__(
            f"task_key {key!r}: expected the difficulty it was first asked with ({before.model_dump()}), "
            f"got {now.model_dump()}. Use a new task_key for new settings."
        )


class TaskRegistry:
    def __init__(self, known: Iterable[tuple[DifficultySettings, SimulatedTask]] = (),
                 cache_size: int = 256, keep_failures: bool = False) -> None:
        if cache_size < 1:
            raise ValueError(f"task cache size: expected at least 1, got {cache_size}")
        self.cache_size = cache_size
        self.keep_failures = keep_failures
        self._failed: OrderedDict[str, tuple[DifficultySettings, RoleOutput]] = OrderedDict()
        self._cache: OrderedDict[str, tuple[DifficultySettings, SimulatedTask]] = OrderedDict()
        self._pending: dict[str, tuple[DifficultySettings, asyncio.Future[RoleOutput]]] = {}
        # "": a temporary on-disk database, private to this connection and deleted when it closes; pages
        # beyond SQLite's cache go to a temporary file. The records stay the source of truth.
        self._db = sqlite3.connect("", check_same_thread=False, isolation_level=None)
        self._db_lock = threading.Lock()  # TestClient drives the app from another thread than create_app's
        with self._db_lock:
            self._db.execute(f"PRAGMA cache_size = -{SPILL_CACHE_KIB}")
            self._db.execute("PRAGMA journal_mode = OFF")
            self._db.execute("PRAGMA synchronous = OFF")
            self._db.execute("CREATE TABLE tasks (key TEXT PRIMARY KEY, difficulty TEXT NOT NULL, task TEXT NOT NULL)")
            self._db.execute("BEGIN")
            for asked, task in known:
                # The first answer for a key wins, as it did when the key was first asked.
                self._db.execute("INSERT OR IGNORE INTO tasks VALUES (?, ?, ?)",
                                 (task.task_key, asked.model_dump_json(), task.model_dump_json()))
            self._db.execute("COMMIT")
            self._count = self._db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]

    def __len__(self) -> int:
        return self._count

    @property
    def in_memory(self) -> int:
        return len(self._cache)

    def get(self, key: str) -> SimulatedTask | None:
        entry = self._lookup(key)
        return entry[1] if entry else None

    def _lookup(self, key: str) -> tuple[DifficultySettings, SimulatedTask] | None:
        entry = self._cache.get(key)
        if entry is not None:
            self._cache.move_to_end(key)
            return entry
        with self._db_lock:
            row = self._db.execute("SELECT difficulty, task FROM tasks WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        entry = (DifficultySettings.model_validate_json(row[0]), SimulatedTask.model_validate_json(row[1]))
        self._remember(key, entry)
        return entry

    def _remember(self, key: str, entry: tuple[DifficultySettings, SimulatedTask]) -> None:
        self._cache[key] = entry
        self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def _store(self, key: str, difficulty: DifficultySettings, task: SimulatedTask) -> None:
        with self._db_lock:
            inserted = self._db.execute("INSERT OR IGNORE INTO tasks VALUES (?, ?, ?)",
                                        (key, difficulty.model_dump_json(), task.model_dump_json())).rowcount
        self._count += inserted
        self._remember(key, (difficulty, task))

    def add(self, difficulty: DifficultySettings, task: SimulatedTask) -> None:
        """Issue `task` under its key as if the author had answered it (a task made elsewhere: tests, tools).

        The first task for a key wins, as with authored ones."""
        self._store(task.task_key, difficulty, task)

    async def get_or_create(
        self, key: str, difficulty: DifficultySettings, create: Callable[[], Awaitable[RoleOutput]]
    ) -> tuple[RoleOutput, bool]:
        """The task for `key` and whether it was answered before (or by a concurrent request).

        Raises:
            TaskKeyConflict: the key was answered for different difficulty settings.
        """
        known = self._lookup(key)
        if known is not None:
            asked, task = known
            if asked != difficulty:
                raise TaskKeyConflict(key, asked, difficulty)
            return RoleOutput(TaskResponse(task=task)), True
        failed = self._failed.get(key)
        if failed is not None:
            if failed[0] != difficulty:
                raise TaskKeyConflict(key, failed[0], difficulty)
            return failed[1], True
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
                self._store(key, difficulty, response.task)
            elif self.keep_failures:
                self._failed[key] = (difficulty, output)
                while len(self._failed) > 4 * self.cache_size:
                    self._failed.popitem(last=False)
            return output
        finally:
            self._pending.pop(key, None)

    def close(self) -> None:
        with self._db_lock:
            self._db.close()
