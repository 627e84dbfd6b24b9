"""What both backends derive from a request the same way: task ids, seeded RNGs, and the calls a conversation executed.

The scripted and the LLM backend import these from here, so that neither imports the other. A call counts as
executed successfully once a tool message answered it without an error; a call still waiting for its answer
satisfies nothing yet. Tool messages are paired with calls by `tool_call_id` when both carry one, otherwise
in order.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from typing import Any

from toolcanary.contract import AssistantMessage, ToolCall, ToolMessage


def task_id_for(seed: int, task_key: str) -> str:
    return "task_" + hashlib.sha256(f"{seed}\x00{task_key}".encode()).hexdigest()[:16]


def rng_for(*parts: Any) -> random.Random:
    """A RNG seeded by a stable hash of `parts` (stable across processes, unlike `hash`)."""
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


@dataclass
class Executed:
    call: ToolCall
    ok: bool
    answered: bool


def tool_failed(message: ToolMessage) -> bool:
    """Whether a tool message reports a failure.

    Current clients set `is_error`; the "Error:" prefix is still read because the contract lets a client
    leave `is_error` unset (it defaults to False), and older trainers and hand-written requests did so.
    """
    return message.is_error or message.content.lstrip().startswith("Error:")


def executed_calls(history: list) -> list[Executed]:
    """Every tool call of the assistant, with whether its tool message reported success."""
    out: list[Executed] = []
    pending: list[Executed] = []
    for message in history:
        if isinstance(message, AssistantMessage):
            pending = [Executed(call, ok=False, answered=False) for call in message.tool_calls]
            out.extend(pending)
        elif isinstance(message, ToolMessage):
            target = next((p for p in pending if not p.answered and message.tool_call_id is not None
                           and p.call.id == message.tool_call_id), None)
            target = target or next((p for p in pending if not p.answered), None)
            if target is not None:
                target.answered = True
                target.ok = not tool_failed(message)
    return out
