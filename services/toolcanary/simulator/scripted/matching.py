"""Read a conversation back into executed calls and match them against a task's expected calls.

A call counts as executed successfully once a tool message answered it without an error; a call still
waiting for its answer (such as the one the tool role is asked about) satisfies nothing yet. Tool messages are paired with
calls by `tool_call_id` when both carry one, otherwise in order. Matching needs the name and, where the task
gives them, every expected argument value (`values.same_value`).
"""

from __future__ import annotations

from dataclasses import dataclass

from toolcanary.contract import AssistantMessage, ExpectedCall, ToolCall, ToolMessage, UserMessage
from toolcanary.simulator.scripted.values import same_value


@dataclass
class Executed:
    call: ToolCall
    ok: bool
    answered: bool


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
                target.ok = not (message.is_error or message.content.lstrip().startswith("Error:"))
    return out


def call_matches(expected: ExpectedCall, call: ToolCall) -> bool:
    if expected.name != call.function.name:
        return False
    if expected.arguments is None:
        return True
    return all(k in call.function.arguments and same_value(v, call.function.arguments[k])
               for k, v in expected.arguments.items())


def match_expected(expected: list[ExpectedCall], executed: list[Executed]) -> list[int | None]:
    """For each expected call, the index of the successful executed call that satisfies it (or None)."""
    used: set[int] = set()
    found: list[int | None] = []
    for want in expected:
        hit = next((j for j, ex in enumerate(executed) if j not in used and ex.ok and call_matches(want, ex.call)),
                   None)
        if hit is not None:
            used.add(hit)
        found.append(hit)
    return found


def user_texts(history: list) -> list[str]:
    return [m.content for m in history if isinstance(m, UserMessage)]


def assistant_texts(history: list) -> list[str]:
    return [m.content or "" for m in history if isinstance(m, AssistantMessage) and not m.tool_calls]
