"""What both backends derive from a request the same way: task ids, seeded RNGs, the calls a conversation executed,
and the verdict on an abstention task's conversation.

The scripted and the LLM backend import these from here, so that neither imports the other. A call counts as
executed successfully once a tool message answered it without an error; a call still waiting for its answer
satisfies nothing yet. Tool messages are paired with calls by `tool_call_id` when both carry one, otherwise
in order. `abstention_verdict` is the one rule for an abstention task's verifier: the scripted backend's, which
the trustee mode plays too, since TRUSTEE's verifier prompt has no notion of a correct decline.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from typing import Any

from toolcanary.contract import AssistantMessage, ToolCall, ToolMessage, VerifyResponse

ABSTENTION_CRITERIA = ["declines or answers directly: no tool is called"]


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


def wrote_call_markup(history: list) -> bool:
    """Whether an assistant message has `<tool_call>` in its text: a call that was written but not executed (a
    malformed one, or, in the trustee mode's conversations, which carry the policy's text alone, any call)."""
    return any("<tool_call>" in (m.content or "") for m in history if isinstance(m, AssistantMessage))


def attempted_call(history: list) -> bool:
    """Whether the assistant tried to call a tool anywhere in the conversation: a structured call, call markup
    in its text, or a tool message, which only ever answers an attempt. The last covers a malformed call as the
    project's trainer sends it: the assistant turn without its unreadable markup, then the tool message
    "Error: malformed tool call ..." that answered it."""
    return bool(executed_calls(history)) or wrote_call_markup(history) or any(
        isinstance(m, ToolMessage) for m in history)


def abstention_verdict(trajectory: list) -> VerifyResponse:
    """The verifier's reward on an abstention task: 1 when the assistant never tried to call a tool, else -1."""
    if attempted_call(trajectory):
        return VerifyResponse(reward=-1, reasoning="A tool was called although no offered tool serves the request.",
                              criteria=list(ABSTENTION_CRITERIA))
    return VerifyResponse(reward=1, reasoning="No tool was called: the request was declined or answered directly, "
                          "as it should be.", criteria=list(ABSTENTION_CRITERIA))
