"""The scripted tool, user and verifier roles: pure functions of the task and the conversation.

Rewards follow TRUSTEE's meanings, made exact:
- tool: -1 invalid call, a tool the task does not need, or any call on an abstention task; 0 an expected tool with
  other argument values, or a repeat; 1 a call that satisfies a not yet satisfied expected call;
- user: 1 progress (the stage is done and the next is asked for, or a needed detail is supplied), -1 an answer
  without doing the work; the user ends (`done`, empty reply) when all is done or after one unheeded reminder;
- verifier: the ordered criteria below, of which the first `num_criteria` count; 1 when all of them hold, 0 when
  at least half the expected calls were made correctly, -1 otherwise or when no tool was called. On an
  abstention task: 1 for declining or answering directly, -1 for any call, a malformed one included.
"""

from __future__ import annotations

import json
from typing import Any

from toolcanary.contract import (
    SimulatedTask,
    ToolCall,
    ToolResponse,
    UserResponse,
    VerifyResponse,
)
from toolcanary.simulator.calls import abstention_verdict, attempted_call, executed_calls, wrote_call_markup
from toolcanary.simulator.scripted.matching import call_matches, match_expected, user_texts
from toolcanary.simulator.scripted.plan import NUDGE, TaskPlan
from toolcanary.simulator.scripted.results import make_result
from toolcanary.simulator.validation import validate_call

CRITERIA = [
    "meets the user's intent: every expected call was made with the expected argument values",
    "uses the expected tools appropriately: no call to a tool the task does not need",
    "free of hallucination: no call to a tool that is not offered and no malformed call",
    "no redundant or incorrect trials: no call failed and none was repeated with the same arguments",
    "concise: at most one call more than the task needs",
]


def tool_turn(task: SimulatedTask, history: list, call: ToolCall, hint: dict[str, Any] | None) -> ToolResponse:
    error = validate_call(task, call)
    if error is not None:
        return ToolResponse(result=error, is_error=True, reward=-1)
    result = json.dumps(make_result(hint, call.function.name, call.function.arguments, task.task_id),
                        ensure_ascii=False)
    if not task.call_expected:
        return ToolResponse(result=result, reward=-1)
    satisfied = match_expected(task.expected_tool_calls, executed_calls(history))
    open_calls = [c for c, hit in zip(task.expected_tool_calls, satisfied, strict=True) if hit is None]
    if any(call_matches(c, call) for c in open_calls):
        reward = 1
    elif any(c.name == call.function.name for c in task.expected_tool_calls):
        reward = 0
    else:
        reward = -1
    return ToolResponse(result=result, reward=reward)


def user_turn(task: SimulatedTask, history: list) -> UserResponse:
    if not task.call_expected:
        return UserResponse(reply="", reward=-1 if attempted_call(history) else 1, done=True)
    plan = TaskPlan.of(task)
    said = user_texts(history)
    satisfied = match_expected(task.expected_tool_calls, executed_calls(history))
    current, start = None, 0
    for number, stage in enumerate(plan.stages):
        if any(hit is None for hit in satisfied[start : start + len(stage.calls)]):
            current = number
            break
        start += len(stage.calls)
    if current is None:
        return UserResponse(reply="", reward=1, done=True)
    for stage in plan.stages[1 : current + 1]:
        if stage.request_text not in said:
            return UserResponse(reply=stage.request_text, reward=1)
    stage = plan.stages[current]
    if stage.reveal_text and stage.reveal_text not in said:
        return UserResponse(reply=stage.reveal_text, reward=1)
    if any(text.startswith(NUDGE) for text in said):
        return UserResponse(reply="", reward=-1, done=True)
    return UserResponse(reply=plan.nudge_text(stage), reward=-1)


def verify(task: SimulatedTask, trajectory: list, num_criteria: int) -> VerifyResponse:
    if not task.call_expected:
        return abstention_verdict(trajectory)
    executed = executed_calls(trajectory)
    malformed = wrote_call_markup(trajectory)
    shown = CRITERIA[:num_criteria]
    if not executed:
        return VerifyResponse(reward=-1, reasoning="The agent did not call any tool.", criteria=shown)
    expected = task.expected_tool_calls
    satisfied = match_expected(expected, executed)
    made = sum(hit is not None for hit in satisfied)
    names = {c.name for c in expected}
    offered = {t.name for t in task.tools}
    keys = [(e.call.function.name, json.dumps(e.call.function.arguments, sort_keys=True, default=str))
            for e in executed]
    checks = [
        made == len(expected),
        all(e.call.function.name in names for e in executed),
        not malformed and all(e.call.function.name in offered for e in executed),
        all(e.ok for e in executed) and len(set(keys)) == len(keys),
        len(executed) <= len(expected) + 1,
    ][:num_criteria]
    failed = [text for text, ok in zip(shown, checks, strict=True) if not ok]
    reasoning = f"{made} of {len(expected)} expected calls were made with the expected arguments."
    if not failed:
        return VerifyResponse(reward=1, reasoning=reasoning + " All criteria hold.", criteria=shown)
    reasoning += " Not met: " + "; ".join(failed) + "."
    return VerifyResponse(reward=0 if 2 * made >= len(expected) else -1, reasoning=reasoning, criteria=shown)
