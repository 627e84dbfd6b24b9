"""The trainer's own files, typed: `episodes.jsonl` and `curriculum.json`, with their one reader and writer each.

- `<results>/<run>/episodes.jsonl` (the CPU run) and `<results>/<run>/episodes/step_NNNN/<host>-<pid>.jsonl`
  (one per verl worker process and training step, so that closing a step reads that step's records only, however
  long the run): one `EpisodeRecord` per line, under the append-only rule (`append_only`).
- `<results>/<run>/held_out_answers.jsonl` (the CPU run's starting-policy check): one `HeldOutAnswer` per line,
  the policy's greedy first answer on a held-out simulator task, as the served model's tool parser will read it.
- `<runs>/<run>/trainer/curriculum.json` (verl's hooks): the curriculum's state, its state after every closed
  step (`history`) and the attempt each dispatched step runs under (`attempts`); replaced atomically.

    append_episodes(path, [record])
    records = read_episodes(path)          # [EpisodeRecord, ...]; ContractError on a line that is not one
    state = read_curriculum(path)          # CurriculumFile, or None when there is none yet
    write_held_out(path, answers); answers = read_held_out(path)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolcanary.contract.append_only import append_text, iter_lines, json_line, refused_line
from toolcanary.contract.errors import ContractError

EPISODES_FILE = "episodes.jsonl"
EPISODES_DIR = "episodes"
CURRICULUM_FILE = "curriculum.json"
HELD_OUT_FILE = "held_out_answers.jsonl"
TASK_KEY_TAG_FILE = "task_key_tag"  # <runs>/<run>/trainer/: the prefix of the run's task keys (train.task_keys)

def step_episodes(episodes_dir: str | Path, step: int) -> Path:
    """The folder of one training step's episode files under `<results>/<run>/episodes/`."""
    return Path(episodes_dir) / f"step_{step:04d}"


StopReason = Literal[
    "response_length", "assistant_turns", "user_turns", "tool_turns", "user_terminated", "aborted"
]


class EpisodeRecord(BaseModel):
    """One JSON line of `episodes.jsonl`; the step metrics are computed from these alone. NaN and infinity
    (which Python's json reads from `NaN` / `Infinity`) are refused: a mean over them is not a measurement."""

    model_config = ConfigDict(allow_inf_nan=False)
    step: int
    episode_id: str
    task_key: str
    group_index: int = 0
    task_id: str | None = None
    # Mode trustee: tasks that could not be had (author failed, prompt too long) before `task_key`'s.
    tasks_replaced: int = 0
    call_expected: bool = True
    # The calls the task's author listed as expected (None: a record written before contract 1.8, or an
    # episode that got no task). 0 on a call task is a task the author left without an expected call.
    expected_calls: int | None = None
    curriculum_level: int = 1
    split: Literal["train", "val"] = "train"
    attempt: str | None = None
    outcome: Literal["ok", "aborted"] = "ok"
    abort_role: str | None = None
    abort_cause: str | None = None
    abort_detail: str | None = None
    stop_reason: StopReason | None = None
    reward: float = 0.0
    verifier_reward: float | None = None
    no_call_penalty: bool = False
    assistant_turns: int = 0
    tool_call_turns: int = 0
    response_turns: int = 0
    tool_turns: int = 0
    user_turns: int = 0
    calls: int = 0
    invalid_calls: int = 0
    dropped_calls: int = 0
    tool_rewards: list[float] = Field(default_factory=list)
    user_rewards: list[float] = Field(default_factory=list)
    response_length: int = 0
    policy_tokens: int = 0
    num_turns: int = 0
    simulator_tokens: int = 0
    seconds: float = 0.0
    transcript: list[dict] = Field(default_factory=list)

    def abort(self, role: str, cause: str | None, detail: str | None) -> None:
        self.outcome, self.stop_reason = "aborted", "aborted"
        self.abort_role, self.abort_cause, self.abort_detail = role, cause or "upstream", detail


def _first_problem(err: ValidationError) -> str:
    first = err.errors()[0]
    return f"{'.'.join(map(str, first['loc'])) or 'the line'}: {first['msg']}"


def episode_line(record: EpisodeRecord | dict) -> str:
    """One JSON line of an episode file, checked against `EpisodeRecord`."""
    try:
        model = record if isinstance(record, EpisodeRecord) else EpisodeRecord.model_validate(record)
    except ValidationError as err:
        raise ContractError("an episode record to write", "an EpisodeRecord", _first_problem(err),
                            "This is a bug in the writer: it must build records as EpisodeRecord") from None
    return json_line(model)


def append_episodes(path: str | Path, records: list[EpisodeRecord | dict]) -> None:
    """Append whole lines, fsynced before returning (a killed run keeps every finished record)."""
    append_text(path, "".join(episode_line(r) for r in records))


def read_episode_lines(path: str | Path) -> list[tuple[str, EpisodeRecord]]:
    """(line, record) of every whole line, under the append-only rule (torn lines skipped with a warning).

    Raises:
        ContractError: a line in the middle that is not JSON, or not an `EpisodeRecord`.
    """
    out = []
    for number, line in iter_lines(path):
        try:
            data = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            raise refused_line(path, number, "one JSON episode record", line[:200]) from None
        try:
            out.append((line, EpisodeRecord.model_validate(data)))
        except ValidationError as err:
            raise ContractError(f"{path}: line {number}", "one EpisodeRecord per line (toolcanary.contract."
                                "training_files)", _first_problem(err),
                                "The file was written by another version of the trainer or edited by hand; "
                                "move it aside to start the run's episode log afresh") from None
    return out


def read_episodes(path: str | Path) -> list[EpisodeRecord]:
    """The episode records of a file; see `read_episode_lines`. A missing file has none."""
    return [record for _, record in read_episode_lines(path)]


class CurriculumState(BaseModel):
    """`Curriculum.state_dict()`: what a restarted trainer needs to draw the same tasks."""

    model_config = ConfigDict(allow_inf_nan=False)

    level: int = Field(ge=1)
    step: int = Field(0, ge=0)
    epsilon: float
    no_call_fraction: float
    criteria_cap: int | None = None


class CurriculumFile(CurriculumState):
    """`curriculum.json`: the current state, its state after each closed step, and each open step's attempt."""

    history: dict[str, CurriculumState] = Field(default_factory=dict, description="closed step -> its state")
    attempts: dict[str, str] = Field(default_factory=dict, description="dispatched step -> its attempt id")


def read_curriculum(path: str | Path) -> CurriculumFile | None:
    """The state in `path`, or None when there is no file yet.

    Raises:
        ContractError: the file is not JSON, or not a `CurriculumFile`.
    """
    path = Path(path)
    if not path.exists():
        return None
    try:
        return CurriculumFile.model_validate_json(path.read_bytes())  # pydantic refuses non-UTF-8 and deep nesting
    except ValidationError as err:
        raise ContractError(str(path), "the trainer's curriculum state (toolcanary.contract.training_files."
                            "CurriculumFile)", _first_problem(err),
                            "Restore it from a copy, or delete it to restart the curriculum at its initial "
                            "level (the run's checkpoints stay)") from None


def write_curriculum(path: str | Path, state: CurriculumFile) -> None:
    """Replace `path` atomically (a reader never sees half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    tmp.write_text(json.dumps(state.model_dump(mode="json"), indent=1, sort_keys=True))
    os.replace(tmp, path)


class HeldOutAnswer(BaseModel):
    """One line of `held_out_answers.jsonl`: a task the policy never trained on and its greedy first answer."""

    model_config = ConfigDict(allow_inf_nan=False)

    task_key: str
    call_expected: bool
    tools: list[dict] = Field(description="the task's tool schemas, as the prompt offered them")
    text: str = Field(description="the decoded answer, special tokens kept, as a server's tool parser sees it")
    tokens: int = Field(ge=0, description="tokens generated")
    finished: bool = Field(description="the answer ended with the end-of-turn token within the budget")


def write_held_out(path: str | Path, answers: list[HeldOutAnswer]) -> None:
    """Replace `path` atomically with one line per answer."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    tmp.write_text("".join(json.dumps(a.model_dump(mode="json"), ensure_ascii=False) + "\n" for a in answers))
    os.replace(tmp, path)


def read_held_out(path: str | Path) -> list[HeldOutAnswer]:
    """The answers in `path`.

    Raises:
        ContractError: the file is missing, or a line is not a `HeldOutAnswer`.
    """
    path = Path(path)
    if not path.exists():
        raise ContractError(str(path), "held-out answers", "no such file",
                            "Write them with `python -m toolcanary.train starting-policy --held-out N`")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ContractError(str(path), "UTF-8 text", f"a byte that is not UTF-8 at offset {err.start}",
                            "Write the file again with `python -m toolcanary.train starting-policy`") from None
    answers = []
    for number, line in enumerate(text.split("\n"), start=1):  # "\n" only: U+2028 may be in an answer
        if not line.strip():
            continue
        try:
            answers.append(HeldOutAnswer.model_validate_json(line))
        except ValidationError as err:
            raise ContractError(f"{path}: line {number}", "one HeldOutAnswer per line (toolcanary.contract."
                                "training_files)", _first_problem(err),
                                "Write the file again with `python -m toolcanary.train starting-policy`") from None
    return answers
