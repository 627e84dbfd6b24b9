"""One tool turn of an episode: answer every call of a policy turn, concurrently, as tool messages.

Calls to a tool the task does not offer are answered locally with an error and a tool reward of -1 (no
simulator call), as TRUSTEE does; the rest go to the simulator's tool role in parallel. Only the first
`max_parallel_calls` calls of a turn are answered (verl's rule); the rest are counted as dropped. A tool role
that gives up aborts the episode. Calls that do not parse: the toolcanary mode answers each with an error and
reward -1; the trustee mode, as TRUSTEE, drops them beside parsed calls and answers a turn with none parsed by
one error message, reward -1. Over-long results keep their head and tail (`truncate_middle`, TRUSTEE's cut in
the trustee mode). Every tool message carries the contract's `is_error`, so the simulator reads a failed call
from the flag rather than from the text.
"""

from __future__ import annotations

import asyncio

from toolcanary.contract.chat import ToolCall
from toolcanary.contract.hermes import ParsedTurn
from toolcanary.contract.simulator_api import ToolRequest, ToolResponse
from toolcanary.contract.tasks import SimulatedTask
from toolcanary.contract.training_files import EpisodeRecord
from toolcanary.train.episode import EpisodeSpec, truncate_middle, truncate_middle_trustee
from toolcanary.train.simulator_client import SimulatorClient

UNPARSED = "Error: Tool call is malformed or could not be parsed"


async def run_tool_turn(sim: SimulatorClient, task: SimulatedTask, history: list, parsed: ParsedTurn,
                        record: EpisodeRecord, spec: EpisodeSpec, max_parallel_calls: int,
                        max_chars: int, trustee: bool = False) -> list[dict] | None:
    """The tool messages to append, or None when the episode was aborted (`record` says why)."""
    malformed = [f"malformed tool call ({m.error})" for m in parsed.malformed]
    record.calls += len(parsed.tool_calls) + len(malformed)
    if trustee:
        record.invalid_calls += len(malformed)
        record.dropped_calls += max(0, len(parsed.tool_calls) - max_parallel_calls)
        if not parsed.tool_calls:
            record.tool_rewards.append(-1.0)
            return [{"role": "tool", "content": UNPARSED, "is_error": True}]
        attempts: list[ToolCall | str] = list(parsed.tool_calls[:max_parallel_calls])
    else:
        attempts = [*parsed.tool_calls, *malformed]
        record.dropped_calls += max(0, len(attempts) - max_parallel_calls)
        attempts = attempts[:max_parallel_calls]
    cut = truncate_middle_trustee if trustee else truncate_middle

    async def answer(attempt: ToolCall | str) -> tuple[str | None, ToolResponse]:
        if isinstance(attempt, str):
            return None, ToolResponse(result=f"Error: {attempt}.", is_error=True, reward=-1)
        name = attempt.function.name
        if task.tool(name) is None:
            offered = ", ".join(t.name for t in task.tools)
            text = (f"Error: Tool {name} not found" if trustee
                    else f"Error: tool '{name}' not found. Available tools: {offered}.")
            return name, ToolResponse(result=text, is_error=True, reward=-1)
        response = await sim.tool(ToolRequest(task_key=task.task_key, history=history, call=attempt, step=spec.step,
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
        message = {"role": "tool", "content": cut(response.result, max_chars), "is_error": response.is_error}
        if name is not None:
            message["name"] = name
        if isinstance(attempt, ToolCall) and attempt.id:
            message["tool_call_id"] = attempt.id
        messages.append(message)
    if rewards:
        record.tool_rewards.append(sum(rewards) / len(rewards))
    return messages
