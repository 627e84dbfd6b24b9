"""What one episode needs (its spec, from the dataset row) and what it leaves (its record, one JSON line).

`EpisodeSpec` is the `extra_info` of a row: the GRPO group's task key, the difficulty drawn for it and the
level-bound limits. `EpisodeRecord` is what the agent loop returns in `extra_fields["episode"]` and what
`episodes.jsonl` holds: turns, rewards, outcome and why it stopped. The policy's system prompt ladder
(TRUSTEE's four levels, reworded) lives here too.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from toolcanary.contract.tasks import DifficultySettings

SYSTEM_PROMPTS = (
    # 0: detailed
    "You are an assistant that solves the user's request over several turns with the tools listed below. "
    "Think about what the user needs, decide whether one of the tools serves it, and if so call it: each "
    "call is a JSON object with \"name\" and \"arguments\" inside <tool_call></tool_call>. You may make several "
    "calls at once. Read each <tool_response> and use the conversation so far. When no tool fits, answer "
    "directly or ask the user for what is missing.",
    # 1: medium
    "Use the tools when they help: calls go inside <tool_call></tool_call> as JSON with name and arguments. "
    "Several calls at once are allowed. Answer directly when no tool fits.",
    # 2: brief
    "You are a multi-turn dialogue assistant that can make tool calls.",
    # 3: default
    "You are a helpful assistant.",
)

StopReason = Literal[
    "response_length", "assistant_turns", "user_turns", "tool_turns", "user_terminated", "aborted"
]


class EpisodeSpec(BaseModel):
    """One row's `extra_info`: everything the loop needs besides the simulator and the policy."""

    task_key: str = Field(min_length=1, max_length=200)
    difficulty: DifficultySettings
    step: int = Field(0, ge=0)
    episode_id: str = Field(min_length=1, max_length=200)
    group_index: int = 0
    curriculum_level: int = Field(1, ge=1, le=100)
    system_prompt_level: int = Field(0, ge=0, le=3)
    num_criteria: int = Field(2, ge=1, le=5)
    max_user_turns: int = Field(1, ge=0)
    max_assistant_turns: int = Field(2, ge=1)
    max_tool_turns: int = Field(1, ge=0)
    split: Literal["train", "val"] = Field("train", description="val: a fixed held-out task, never trained on")
    attempt: str | None = Field(None, max_length=64, description=(
        "which dispatch of its step this is; a step redone after a restart gets a new one, so a step's "
        "metrics are folded from one attempt's episodes only"))


class EpisodeRecord(BaseModel):
    """One JSON line of `episodes.jsonl`; the step metrics are computed from these alone."""

    step: int
    episode_id: str
    task_key: str
    group_index: int = 0
    task_id: str | None = None
    call_expected: bool = True
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


def truncate_middle(text: str, limit: int) -> str:
    """Keep the head and tail of an over-long tool result, `limit` characters in all, the marker included."""
    if len(text) <= limit:
        return text
    marker = "\n...(truncated)...\n"
    keep = max(0, limit - len(marker))
    return text[: keep // 2] + marker + text[len(text) - (keep - keep // 2):]


def truncate_middle_trustee(text: str, limit: int) -> str:
    """TRUSTEE's middle cut: half the limit from each end around its marker, so the result exceeds `limit`."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + "...(truncated)..." + text[len(text) - half:]
