"""One tool turn of an episode: answer the calls of a policy turn, concurrently, as tool messages.

The mode's rules (episode_rules.py) choose the calls answered (at most `max_parallel_calls`, verl's rule; the
rest are counted as dropped) and the texts: a call to a tool the task does not offer is answered locally with
an error and a tool reward of -1, without the simulator (as TRUSTEE does); the rest go to the simulator's tool
role in parallel; an unreadable call is answered with an error and reward -1 (toolcanary mode), or a turn with
no readable call gets one error message and reward -1 (trustee mode, as TRUSTEE). Over-long results are cut
by the mode's rule. A tool role that gives up aborts the episode; the turn's messages are still returned (with
the mode's failure text for that call), for a mode whose verifier reads them. Every tool message carries the
contract's `is_error`, so the simulator reads a failed call from the flag rather than from the text.
"""

from __future__ import annotations

import asyncio

from toolcanary.contract.chat import ToolCall
from toolcanary.contract.simulator_api import ToolRequest, ToolResponse
from toolcanary.contract.tasks import SimulatedTask
from toolcanary.contract.training_files import EpisodeRecord
from toolcanary.train.episode import EpisodeSpec
from toolcanary.train.episode_rules import UNPARSED, EpisodeRules, Replies, Turn
from toolcanary.train.simulator_client import SimulatorClient


async def run_tool_turn(sim: SimulatorClient, task: SimulatedTask, history: list, turn: Turn, record: EpisodeRecord,
                        spec: EpisodeSpec, max_parallel_calls: int, max_chars: int, rules: EpisodeRules) -> Replies:
    """The tool messages of the turn; `aborted` when a tool role gave up (`record` says why)."""
    record.calls += len(turn.calls) + len(turn.unparsed)
    attempts = rules.calls_to_answer(turn, record, max_parallel_calls)
    if not attempts:
        record.tool_rewards.append(-1.0)
        return Replies([{"role": "tool", "content": UNPARSED, "is_error": True}])

    async def answer(attempt: ToolCall | str) -> tuple[str | None, ToolResponse]:
        if isinstance(attempt, str):
            return None, ToolResponse(result=f"Error: {attempt}.", is_error=True, reward=-1)
        name = attempt.function.name
        if task.tool(name) is None:
            return name, ToolResponse(result=rules.not_found(name, task), is_error=True, reward=-1)
        response = await sim.tool(ToolRequest(task_key=task.task_key, history=history, call=attempt, step=spec.step,
                                              episode_id=spec.episode_id))
        return name, response

    answers = await asyncio.gather(*(answer(a) for a in attempts))
    replies, rewards = Replies(), []
    for (name, response), attempt in zip(answers, attempts, strict=True):
        record.simulator_tokens += response.prompt_tokens + response.completion_tokens
        if response.outcome == "aborted":
            if not replies.aborted:
                record.abort("tool", response.abort_cause, response.abort_detail)
            replies.aborted = True
            text, failed = rules.tool_failed_text, True
        else:
            text, failed = rules.tool_text(response.result, max_chars), response.is_error
            if failed:
                record.invalid_calls += 1
            if response.reward is not None:
                rewards.append(float(response.reward))
        message = {"role": "tool", "content": text, "is_error": failed}
        if name is not None:
            message["name"] = name
        if isinstance(attempt, ToolCall) and attempt.id:
            message["tool_call_id"] = attempt.id
        replies.messages.append(message)
    if rewards and not replies.aborted:
        record.tool_rewards.append(sum(rewards) / len(rewards))
    return replies
