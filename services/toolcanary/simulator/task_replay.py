"""Serve the tasks another run's simulator authored, matched by each request's draw, instead of authoring anew.

A task request names its `draw` (the seed and the group's place in the run: `0-s0012-g03`, `warm-0-007`), which
is the same in every run of one seed, whatever the run's private task keys. With `--replay-tasks-of RUN` the
simulator reads RUN's task-author records (`<runs_dir>/RUN/simulator/step_*.jsonl`, through `RecordStore`) once at
start and answers each task request with the task RUN answered for the same draw, under the new key. So a rerun
of RUN's recipe trains on RUN's tasks even where the author is an LLM, which never writes the same task twice.
The tool, user and verifier roles still play each call afresh (on the LLM backend they are not reproducible; on
the scripted one they are a function of the task and the seed).

A request that the replayed run cannot answer is an aborted task (cause `rejected`), never a new task: a
request without a draw, a draw RUN never asked for, or a draw RUN asked for with other difficulty settings
(another seed or curriculum). The trainer counts it as the simulator's failure, and its circuit breaker stops a
run that replays the wrong RUN.

    replay = TaskReplay.load(settings.runs_dir, "run-a")     # ValueError when RUN has no task with a draw
    output = replay.answer(request)                          # RoleOutput with the replayed task, or aborted
"""

from __future__ import annotations

from pathlib import Path

from toolcanary.contract import DifficultySettings, SimulatedTask, TaskRequest, TaskResponse
from toolcanary.simulator.backend import RoleOutput
from toolcanary.simulator.records import RecordStore


class TaskReplay:
    def __init__(self, run: str, tasks: dict[str, tuple[DifficultySettings, SimulatedTask]]) -> None:
        self.run, self.tasks = run, tasks

    @classmethod
    def load(cls, runs_dir: Path, run: str) -> TaskReplay:
        """Every task RUN's simulator answered for a request with a draw (the last answer per draw)."""
        folder = Path(runs_dir) / run / "simulator"
        if not folder.is_dir():
            raise ValueError(f"replay_tasks_of {run!r}: expected the records of that run's simulator in {folder}, "
                             "found no such folder; name a run whose simulator ran under this runs_dir")
        tasks: dict[str, tuple[DifficultySettings, SimulatedTask]] = {}
        for asked, task, draw in RecordStore(folder).iter_drawn_tasks():
            if draw is not None:
                tasks[draw] = (asked, task)
        if not tasks:
            raise ValueError(f"replay_tasks_of {run!r}: expected task records that name their draw in {folder}, "
                             "found none (records written before contract 1.8 name no draw); replay a run of this "
                             "version")
        return cls(run, tasks)

    def answer(self, request: TaskRequest) -> RoleOutput:
        if request.draw is None:
            return _refused(f"replaying the tasks of run {self.run!r}: a task request must name its draw; "
                            "this one names none (a trainer of contract 1.8 or later sends it)")
        found = self.tasks.get(request.draw)
        if found is None:
            return _refused(f"replaying the tasks of run {self.run!r}: it never drew {request.draw!r}; replay a run "
                            "of the same seed that reached this step")
        asked, task = found
        if asked != request.difficulty:
            return _refused(f"replaying the tasks of run {self.run!r}: it drew {request.draw!r} with "
                            f"{asked.model_dump()}, this request asks {request.difficulty.model_dump()}; the runs' "
                            "seeds or curricula differ")
        return RoleOutput(TaskResponse(task=task.model_copy(update={"task_key": request.task_key})))


def _refused(detail: str) -> RoleOutput:
    return RoleOutput(TaskResponse(outcome="aborted", abort_cause="rejected", abort_detail=detail))
