"""Read a conversation back into executed calls and match them against a task's expected calls.

A call counts as executed successfully once a tool message answered it without an error; a call still
waiting for its answer (such as the one the tool role is asked about) satisfies nothing yet. Tool messages are paired with
calls by `tool_call_id` when both carry one, otherwise in order. Matching needs the name and, where the task
gives them, every expected argument value (`values.same_value`).
"""

from __future__ import annotations

from toolcanary.contract import ExpectedCall, ToolCall, UserMessage
from toolcanary.simulator.calls import Executed
from toolcanary.simulator.scripted.values import same_value


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
