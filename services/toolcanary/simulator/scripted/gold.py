"""The ideal conversation for a task, played against the scripted tool and user roles.

    from toolcanary.simulator.scripted import gold_trajectory
    messages = gold_trajectory(task)          # [UserMessage, AssistantMessage, ToolMessage, ...]

The gold agent asks for held-back details before calling, makes each stage's expected calls in one turn
(parallel when there are several), reports back, and stops when the user is satisfied; on an abstention task it
declines without calling. The trainer can warm-start a policy on these; `verify` gives them reward 1.
"""

from __future__ import annotations

from toolcanary.contract import (
    AssistantMessage,
    FunctionCall,
    SimulatedTask,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from toolcanary.simulator.calls import executed_calls
from toolcanary.simulator.library_index import LibraryIndex, load_index
from toolcanary.simulator.scripted.matching import match_expected, user_texts
from toolcanary.simulator.scripted.plan import TaskPlan
from toolcanary.simulator.scripted.roles import tool_turn, user_turn
from toolcanary.simulator.scripted.values import humanize

MAX_TURNS = 40


def _decline(task: SimulatedTask) -> AssistantMessage:
    return AssistantMessage(content="I can't do that with the tools I have here, so I won't call any of them. "
                            "If you tell me more, I'm happy to help another way or answer directly.")


def gold_trajectory(task: SimulatedTask, index: LibraryIndex | None = None) -> list:
    """The ideal list of contract messages for `task`, starting with its first user query.

    Raises:
        RuntimeError: the scripted roles did not finish the conversation (a bug, never expected).
    """
    hints = (index or load_index()).result_hints
    messages: list = [UserMessage(content=task.first_user_query)]
    if not task.call_expected:
        return [*messages, _decline(task)]
    plan = TaskPlan.of(task)
    for _ in range(MAX_TURNS):
        satisfied = match_expected(task.expected_tool_calls, executed_calls(messages))
        start, stage = 0, None
        for candidate in plan.stages:
            if any(hit is None for hit in satisfied[start : start + len(candidate.calls)]):
                stage = candidate
                break
            start += len(candidate.calls)
        if stage is not None and stage.reveal_text and stage.reveal_text not in user_texts(messages):
            wanted = [humanize(k) for keys in stage.held.values() for k in keys]
            ask = "what exactly you need" if stage.vague else "the " + ", ".join(wanted)
            messages.append(AssistantMessage(content=f"Happy to help. Could you tell me {ask}?"))
        elif stage is not None:
            calls = [ToolCall(id=f"call_{len(messages)}_{n}", function=FunctionCall(name=c.name,
                                                                                   arguments=c.arguments or {}))
                     for n, c in enumerate(stage.calls)]
            messages.append(AssistantMessage(tool_calls=calls))
            for call in calls:
                answer = tool_turn(task, messages, call, hints.get(call.function.name))
                messages.append(ToolMessage(content=answer.result, tool_call_id=call.id, name=call.function.name,
                                            is_error=answer.is_error))
            messages.append(AssistantMessage(content=f"Done: I did {stage.full_text()}."))
        reply = user_turn(task, messages)
        if reply.done:
            return messages
        messages.append(UserMessage(content=reply.reply))
    raise RuntimeError(f"gold trajectory of {task.task_id} did not finish within {MAX_TURNS} turns")
