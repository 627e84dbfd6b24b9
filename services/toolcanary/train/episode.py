"""What one episode needs (its spec, from the dataset row) and what it leaves (its record, one JSON line).

`EpisodeSpec` is the `extra_info` of a row: the GRPO group's task key, the difficulty drawn for it and the
level-bound limits. The record, what the agent loop returns in `extra_fields["episode"]` and what
`episodes.jsonl` holds, is the contract's `EpisodeRecord` (`toolcanary.contract.training_files`). The policy's system prompt ladder
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

class EpisodeSpec(BaseModel):
    """One row's `extra_info`: everything the loop needs besides the simulator and the policy."""

    task_key: str = Field(min_length=1, max_length=200)
    difficulty: DifficultySettings
    draw: str | None = Field(None, max_length=200, description=(
        "what the task is drawn from (the task request's `draw`): the seed and the group's place in the run, "
        "not the run's private key, so two runs of one seed ask for the same tasks"))
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
