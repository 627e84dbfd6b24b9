"""One tool turn of an episode: answer every call of a policy turn, concurrently, as tool messages.

Malformed calls and calls to a tool the task does not offer are answered locally with an error and a
tool reward of -1 (no simulator call), as TRUSTEE does; the rest go to the simulator's tool role in
parallel. Only the first `max_parallel_calls` calls of a turn are answered (verl's rule); the rest are
counted as dropped. A tool role that gives up aborts the episode.
"""

from __future__ import annotations

import asyncio

from toolcanary.contract.chat import ToolCall
from toolcanary.contract.hermes import ParsedTurn
from toolcanary.contract.simulator_api import ToolRequest, ToolResponse
from toolcanary.contract.tasks import SimulatedTask
from toolcanary.train.episode import EpisodeRecord, EpisodeSpec, truncate_middle
from toolcanary.train.simulator_client import SimulatorClient


async def run_tool_turn(sim: SimulatorClient, task: SimulatedTask, history: list, parsed: ParsedTurn,
                        record: EpisodeRecord, spec: EpisodeSpec, max_parallel_calls: int,
                        max_chars: int) -> list[dict] | None:
    """The tool messages to append, or None when the episode was aborted (`record` says why)."""
    attempts: list[ToolCall | str] = [*parsed.tool_calls, *(f"malformed tool call ({m.error})" for m in parsed.malformed)]
    record.calls += len(attempts)
    record.dropped_calls += max(0, len(attempts) - max_parallel_calls)
    attempts = attempts[:max_parallel_calls]

    async def answer(attempt: ToolCall | str) -> tuple[str | None, ToolResponse]:
        if isinstance(attempt, str):
            return None, ToolResponse(result=f"Error: {attempt}.", is_error=True, reward=-1)
        name = attempt.function.name
        if task.tool(name) is None:
            offered = ", ".join(t.name for t in task.tools)
            return name, ToolResponse(result=f"Error: tool '{name}' not found. Available tools: {offered}.",
                                      is_error=True, reward=-1)
        response = await sim.tool(ToolRequest(task=task, history=history, call=attempt, step=spec.step,
                                              episode_id=spec.episode_id))
        return name, response

    answers = await asyncio.gather(*(answer(a) for a in attempts))
    messages, rewards = [], []
    for (name, response), attempt in zip(answers, attempts, strict=True):
        record.simulator_tokens += response.prompt_tokens + response.completion_tokens
        if response.outcome == "aborted":
            record.abort("tool", response.abort_cause, response.abort_detail)
            return None
        if response.is_error:
            record.invalid_calls += 1
        if response.reward is not None:
            rewards.append(float(response.reward))
        message = {"role": "tool", "content": truncate_middle(response.result, max_chars)}
        if name is not None:
            message["name"] = name
        if isinstance(attempt, ToolCall) and attempt.id:
            message["tool_call_id"] = attempt.id
        messages.append(message)
    if rewards:
        record.tool_rewards.append(sum(rewards) / len(rewards))
    return messages
