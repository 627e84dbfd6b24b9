"""Requests and responses of the simulator's four roles: task author, tool, user and verifier.

The tool, user and verifier requests (and the gold request) name their task by `task_key`, the key the task
author answered it under: the simulator keeps every task it authored, so the task itself never travels again.

Every response says whether the role finished (`outcome="ok"`) or gave up after its retries
(`outcome="aborted"`, with the cause). An aborted response carries no reward: the trainer drops the
episode from the loss instead of inventing a score.

The simulator records every role call as a `RoleRecord` line in `<runs>/<run>/simulator/step_NNNN.jsonl`;
`iter_role_records` and `iter_recorded_tasks` are the one reader of those files, for the simulator (reloading
its tasks) and the contamination audit alike, so both count the same tasks:

    reading = RoleRecordReading()
    for record, task in iter_recorded_tasks(runs / run / "simulator", reading): ...
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from toolcanary.contract.append_only import ReadLines, iter_lines, refused_line
from toolcanary.contract.chat import Message, ToolCall
from toolcanary.contract.errors import ContractError
from toolcanary.contract.tasks import DifficultySettings, LeftOutEntry, SimulatedTask

# A role's score: -1, 0 or 1 from the scripted backend and the toolcanary mode; the trustee mode keeps what
# TRUSTEE keeps, any number the model wrote clamped into [-1, 1] (a verifier's 0.5 stays 0.5).
Reward = Annotated[float, Field(ge=-1, le=1)]
Role = Literal["task", "tool", "user", "verify"]
# Whose rules the simulator plays; the trainer has the same two modes and must meet a simulator of its own.
SimulatorMode = Literal["toolcanary", "trustee"]
# Why a role call gave up. The simulator reports the first four (its model timed out, answered unreadably,
# answered out of range, or its upstream failed). The trainer's client adds the last three for calls the
# simulator itself refused: `too_large` (HTTP 413), `rejected` (another 4xx that describes one bad request,
# such as 422 or 409) and `auth` (401/403: the token is wrong, which no retry can fix, so the run stops).
AbortCause = Literal["timeout", "parse", "validation", "upstream", "too_large", "rejected", "auth"]
ABORT_CAUSES: tuple[str, ...] = get_args(AbortCause)
ROLES: tuple[Role, ...] = ("task", "tool", "user", "verify")
MAX_STEP = 100_000  # a training step beyond any run; a larger one is refused (it names a record file: a
# token holder opens at most this many)


TaskKey = Annotated[str, Field(min_length=1, max_length=200)]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")
    step: int | None = Field(None, ge=0, le=MAX_STEP, description="training step, for the per-step record file")
    episode_id: str | None = Field(None, max_length=200, description="the trainer's episode id, for tracing")


class Outcome(BaseModel):
    """Common part of every role response."""

    outcome: Literal["ok", "aborted"] = "ok"
    abort_cause: AbortCause | None = None
    abort_detail: str | None = None
    latency_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @model_validator(mode="after")
    def _abort_has_cause(self) -> Outcome:
        if self.outcome == "aborted" and self.abort_cause is None:
            raise ValueError("an aborted outcome needs abort_cause")
        return self


# --- task author --------------------------------------------------------------------------------
class TaskRequest(_Request):
    task_key: TaskKey = Field(description="same key, same task (one per GRPO group)")
    difficulty: DifficultySettings
    draw: TaskKey | None = Field(None, description="what the scripted author seeds the task's content from (None: "
                                                   "the key): a run's private keys then name the same tasks in every "
                                                   "run (warm start, held-out check); the llm author ignores it")


class TaskResponse(Outcome):
    task: SimulatedTask | None = None


# --- tool ---------------------------------------------------------------------------------------
class ToolRequest(_Request):
    task_key: TaskKey = Field(description="the key /v1/task answered the task under")
    history: list[Message] = Field(default_factory=list, max_length=512)
    call: ToolCall


class ToolResponse(Outcome):
    result: str = ""
    is_error: bool = False
    reward: Reward | None = None


# --- user ---------------------------------------------------------------------------------------
class UserRequest(_Request):
    task_key: TaskKey = Field(description="the key /v1/task answered the task under")
    history: list[Message] = Field(default_factory=list, max_length=512)


class UserResponse(Outcome):
    reply: str = ""
    reward: Reward | None = None
    done: bool = False


# --- verifier -----------------------------------------------------------------------------------
class VerifyRequest(_Request):
    task_key: TaskKey = Field(description="the key /v1/task answered the task under")
    trajectory: list[Message] = Field(max_length=1024)
    num_criteria: int = Field(2, ge=1, le=5, description="how many of the ordered criteria apply")


class VerifyResponse(Outcome):
    reward: Reward | None = None
    reasoning: str = ""
    criteria: list[str] = Field(default_factory=list)


# --- service ------------------------------------------------------------------------------------
class GoldRequest(_Request):
    """`POST /v1/gold`: the ideal conversation for a task the simulator authored, for a warm start."""

    task_key: TaskKey = Field(description="the key /v1/task answered the task under")


class GoldResponse(Outcome):
    messages: list[Message] = Field(default_factory=list, description="from the first user query on")


class Health(BaseModel):
    """The 200 answer of the simulator's health routes.

    `probe` says which question was answered: `live` (/health/live: the process serves HTTP; nothing else is
    checked) or `ready` (/health, /health/ready and the token-guarded /v1/ready: role calls can be answered
    now; `checks` lists what was checked). Readiness that fails is a 503 with an `ErrorBody` instead.
    `mode` and `trustee_commit` say whose rules the simulator plays, so that a trainer of the other mode (or of
    another TRUSTEE commit) refuses it before step 1 instead of training against the wrong prompts and library.
    """

    status: Literal["ok"] = "ok"
    contract_version: str
    backend: Literal["scripted", "llm"]
    mode: SimulatorMode = Field(description="whose prompts and library the simulator plays: trustee (TRUSTEE's, "
                                            "from a checkout) or toolcanary (the project's own)")
    trustee_commit: str | None = Field(None, description="the commit of the TRUSTEE checkout it plays (mode "
                                                         "trustee); None in mode toolcanary")
    run: str
    probe: Literal["live", "ready"] = "ready"
    checks: list[str] = Field(default_factory=list, description="what readiness checked, one line each")


class ErrorBody(BaseModel):
    """The body of every 4xx answer (what was wrong, field by field) and of /health's 503 (which upstream
    does not answer, and how)."""

    error: str
    detail: list[dict] = Field(default_factory=list)


class RoleRecord(BaseModel):
    """One JSON line of `volumes/runs/<run>/simulator/step_NNNN.jsonl`: a role call as it happened.

    Written and flushed per call, so a killed service loses nothing it answered. Task-author records hold
    the generated task in `response["task"]`, which is what the contamination audit reads; every other record
    holds the request as sent, whose `task_key` refers to that task.
    """

    contract_version: str
    time: str = Field(description="ISO-8601 UTC time the call finished")
    run: str
    step: int | None = None
    role: Role
    backend: Literal["scripted", "llm"]
    episode_id: str | None = None
    request: dict
    response: dict
    outcome: Literal["ok", "aborted"]
    abort_cause: AbortCause | None = None
    latency_s: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0


ROLE_RECORD_FILES = "step_*.jsonl"
# Why a whole record line yields nothing; each is counted in `RoleRecordReading.skipped` and logged.
NOT_A_ROLE_RECORD = "not a RoleRecord"
NO_VALID_TASK = "no valid SimulatedTask in response.task"
# The first `"role": "..."` of a line: in a line written from a RoleRecord, the record's own role, since the
# fields before it (version, time, run, step) hold no object. Inside a JSON string a quote is escaped, so text
# cannot match.
_FIRST_ROLE = re.compile(r'"role"\s*:\s*"([a-z]+)"')
log = logging.getLogger(__name__)


def role_record_file(step: int | None) -> str:
    """The record file of a training step's role calls (`step_none.jsonl`: calls that named no step)."""
    return "step_none.jsonl" if step is None else f"step_{step:04d}.jsonl"


@dataclass
class RoleRecordReading:
    """What `iter_role_records` and `iter_recorded_tasks` left out, so that a reader can say how much it saw.

    `torn`: torn last lines and torn lines a writer fenced off (the append-only rule; each was logged).
    `other_roles`: whole lines of another role than the one asked for. `aborted_tasks`: task-author records of a
    call that gave up, which hold no task. `skipped`: whole lines that yielded nothing, by reason (each logged).
    """

    files: int = 0
    torn: int = 0
    other_roles: int = 0
    aborted_tasks: int = 0
    skipped: Counter[str] = field(default_factory=Counter)

    @property
    def lost(self) -> int:
        """Lines that held a record this reading could not use: torn, or whole but not readable as asked."""
        return self.torn + sum(self.skipped.values())


def iter_role_records(folder: str | Path, role: Role | None = None,
                      reading: RoleRecordReading | None = None) -> Iterator[RoleRecord]:
    """Every `RoleRecord` (of `role`, if given) in `folder`'s step files, file by file in name order, streamed.

    The append-only rule of `toolcanary.contract.append_only`: a torn last line and torn lines a writer fenced
    off are skipped with a warning. A whole line that is JSON but not a RoleRecord (a record of another contract
    version, say) is skipped with a warning. With `role`, a line that starts like a record of another role and
    ends like a whole JSON object is counted in `other_roles` without being parsed: tool, user and verifier
    lines are most of the log and carry whole conversations. `reading` (when given) receives the counts.

    Raises:
        ContractError: a line that is not JSON and that no writer fenced off (the file was cut, edited or written
            without the rule), naming the file and the line; or a record file that cannot be read.
    """
    for _, _, record in _numbered_records(Path(folder), role, reading or RoleRecordReading()):
        yield record


def iter_recorded_tasks(folder: str | Path,
                        reading: RoleRecordReading | None = None) -> Iterator[tuple[RoleRecord, SimulatedTask]]:
    """(record, task) of every task the task author answered in `folder`, in the order they were answered.

    `iter_role_records(folder, "task")`, less the calls that gave up (counted in `aborted_tasks`) and the records
    whose `response["task"]` is not a valid `SimulatedTask` (skipped with a warning). Repeats are kept: a task
    answered twice under one key was answered twice.

    Raises:
        ContractError: as `iter_role_records`.
    """
    reading = reading if reading is not None else RoleRecordReading()
    for path, number, record in _numbered_records(Path(folder), "task", reading):
        if record.outcome != "ok":
            reading.aborted_tasks += 1
            continue
        try:
            task = SimulatedTask.model_validate(record.response.get("task"))
        except ValidationError as err:
            reading.skipped[NO_VALID_TASK] += 1
            log.warning("%s: line %d skipped, %s (%s)", path, number, NO_VALID_TASK, _first_error(err))
            continue
        yield record, task


def _numbered_records(folder: Path, role: Role | None,
                      reading: RoleRecordReading) -> Iterator[tuple[Path, int, RoleRecord]]:
    """(file, line number, record) of `iter_role_records`."""
    for path in sorted(folder.glob(ROLE_RECORD_FILES)):
        reading.files += 1
        lines = ReadLines()
        try:
            for number, line in iter_lines(path, lines):
                if role is not None and line.startswith("{") and line.endswith("}"):
                    first = _FIRST_ROLE.search(line)
                    if first and first.group(1) in ROLES and first.group(1) != role:
                        reading.other_roles += 1
                        continue
                try:
                    record = RoleRecord.model_validate_json(line)
                except ValidationError as err:
                    if any(error["type"] == "json_invalid" for error in err.errors()):
                        raise refused_line(path, number, "a JSON RoleRecord", line) from None
                    reading.skipped[NOT_A_ROLE_RECORD] += 1
                    log.warning("%s: line %d skipped, %s (%s)", path, number, NOT_A_ROLE_RECORD, _first_error(err))
                    continue
                if role is not None and record.role != role:
                    reading.other_roles += 1
                    continue
                yield path, number, record
        except OSError as err:
            raise ContractError(str(path), "a readable simulator record file", f"an unreadable file ({err})",
                                "Give the reader permission to read the run's records, or restore the file "
                                "from a copy") from None
        finally:
            reading.torn += len(lines.skipped)


def _first_error(err: ValidationError) -> str:
    first = err.errors()[0]
    return f"{'.'.join(map(str, first['loc'])) or 'line'}: {first['msg']}"[:160]


LIBRARIES_FILE = "libraries.jsonl"
LEFT_OUT_LISTED = 50  # entries left out that the simulator names in a LibraryRecord; a broken file could have thousands


class LibraryRecord(BaseModel):
    """One line of `<runs>/<run>/simulator/libraries.jsonl`, appended at every start of the simulator: the tool
    library its task author draws from, so that the contamination audit checks the library the run trained on.

    `packaged`: the library that ships with ToolCanary (its path differs from image to image; `sha256` says which
    version). Otherwise `path` is where the simulator read it; `in_checkout` is that path inside the TRUSTEE
    checkout (trustee mode), so that a reader with the checkout elsewhere (the host, not /trustee) finds it.
    `tools` counts the usable entries, entries with the same name included; `left_out` counts the entries the
    simulator could not use (`toolcanary.contract.tasks` has the rule) and `left_out_entries` lists the first
    LEFT_OUT_LISTED of them. Lines written before these two fields read as none left out, which they were: the
    simulator then refused a library with any such entry.
    """

    contract_version: str
    time: str = Field(description="ISO-8601 UTC time the simulator started")
    run: str
    mode: Literal["trustee", "toolcanary"]
    path: str
    packaged: bool
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    tools: int = Field(ge=0)
    trustee_commit: str | None = None
    in_checkout: str | None = None
    left_out: int = Field(0, ge=0)
    left_out_entries: list[LeftOutEntry] = Field(default_factory=list)
