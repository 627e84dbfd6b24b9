"""The verl agent loop that runs one simulated episode: task, policy turns, tool/user roles, verifier.

Registered with verl as `toolcanary_simulated`. Token in, token out: the prompt is rendered once with the
task's own tools, policy tokens are appended as generated (mask 1) and tool/user replies are appended as
rendered deltas (mask 0) through verl's Continuous Token builder; the history is never re-rendered.
Reward: the verifier's, forced to -1 when the task expected a call and the policy made none. A simulator
failure aborts the episode with its cause (see simulator_client): its response mask is zeroed (out of the
loss and the group statistics); the trainers count the causes, and stop the run on a refused token.

verl builds one instance per sample; options arrive as keyword arguments from agent_loops.yaml:

    - name: toolcanary_simulated
      _target_: toolcanary.train.agent_loop.SimulatedEpisodeLoop
      simulator_url: http://simulator:8300
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from toolcanary.contract.chat import Message
from toolcanary.contract.hermes import parse_assistant_text
from toolcanary.contract.simulator_api import TaskRequest, UserRequest, VerifyRequest
from toolcanary.train.episode import SYSTEM_PROMPTS, EpisodeRecord, EpisodeSpec
from toolcanary.train.metrics import append_line
from toolcanary.train.simulator_client import RoleTimeouts, SimulatorClient
from toolcanary.train.tool_turn import run_tool_turn

AGENT_NAME = "toolcanary_simulated"
_MESSAGES = TypeAdapter(list[Message])
_CLIENTS: dict[tuple[str, int], SimulatorClient] = {}


def shared_client(url: str, timeouts: RoleTimeouts, retries: int, max_in_flight: int) -> SimulatorClient:
    """One client per simulator URL and event loop, so the episodes of a worker share connections."""
    key = (url, id(asyncio.get_running_loop()))
    if key not in _CLIENTS:
        _CLIENTS[key] = SimulatorClient(url, timeouts, retries=retries, max_in_flight=max_in_flight)
    return _CLIENTS[key]


async def close_shared_clients() -> None:
    """Close the clients of the running event loop (call before the loop ends)."""
    loop_id = id(asyncio.get_running_loop())
    for key in [k for k in _CLIENTS if k[1] == loop_id]:
        await _CLIENTS.pop(key).aclose()


@register(AGENT_NAME)
class SimulatedEpisodeLoop(AgentLoopBase):
    def __init__(self, *args, simulator_url: str = "http://127.0.0.1:8300", max_turn_tokens: int = 1024,
                 max_parallel_calls: int = 3, max_tool_response_chars: int = 512, http_retries: int = 2,
                 max_in_flight: int = 64, timeouts: dict | None = None, episode_log_dir: str | None = None,
                 **kwargs) -> None:
        kwargs.pop("tools", None)
        kwargs.pop("name", None)
        super().__init__(*args, **kwargs)
        self.response_length = self.rollout_config.response_length
        self.max_turn_tokens = max_turn_tokens
        self.max_parallel_calls = max_parallel_calls
        self.max_tool_response_chars = max_tool_response_chars
        self.sim_options = (simulator_url, RoleTimeouts(**(timeouts or {})), http_retries, max_in_flight)
        self.episode_log = Path(episode_log_dir) if episode_log_dir else None
        stops = [self.tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
        self.stop_ids = {i for i in stops if isinstance(i, int) and i >= 0}

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        spec = EpisodeSpec.model_validate(dict(kwargs["extra_info"]))
        if kwargs.get("session_id") is not None:  # verl's V1 manager spawns the n rollouts of one row
            spec = spec.model_copy(update={"episode_id": f"{spec.episode_id}-r{int(kwargs['session_id']):02d}"})
        sim = shared_client(*self.sim_options)
        record = EpisodeRecord(step=spec.step, episode_id=spec.episode_id, task_key=spec.task_key,
                               group_index=spec.group_index, curriculum_level=spec.curriculum_level,
                               call_expected=spec.difficulty.call_expected, split=spec.split,
                               attempt=spec.attempt)
        started = time.monotonic()
        messages: list[dict] = [{"role": "system", "content": SYSTEM_PROMPTS[spec.system_prompt_level]}]
        got = await sim.task(TaskRequest(task_key=spec.task_key, difficulty=spec.difficulty, step=spec.step,
                                         episode_id=spec.episode_id))
        record.simulator_tokens += got.prompt_tokens + got.completion_tokens
        if got.outcome == "aborted" or got.task is None:
            record.abort("task", got.abort_cause, got.abort_detail or "no task in the answer")
            prompt_ids = await self.ct_build_initial_tokens(messages)
            return self._output(prompt_ids, [self.tokenizer.eos_token_id], [0], None, record, started)
        task = got.task
        record.task_id, record.call_expected = task.task_id, task.call_expected
        messages.append({"role": "user", "content": task.first_user_query})
        tools = [tool.model_dump(mode="json") for tool in task.tools]
        prompt_ids = await self.ct_build_initial_tokens(messages, tools=tools)
        runtime, mask, logprobs = list(prompt_ids), [], []

        while True:
            budget = self.response_length - len(mask)
            if budget <= 0:
                record.stop_reason = "response_length"
                break
            params = {**sampling_params, "max_tokens": min(self.max_turn_tokens, budget)}
            out = await self.server_manager.generate(request_id=spec.episode_id, prompt_ids=runtime,
                                                     sampling_params=params)
            if out.log_probs is None:
                logprobs = None
            merged, mask, logprobs = await self.ct_merge_assistant_token(
                runtime, out.token_ids, mask, logprobs, out.log_probs if logprobs is not None else None)
            runtime = merged.token_ids
            record.assistant_turns += 1
            parsed = parse_assistant_text(self._decode(out.token_ids))
            messages.append(_assistant_message(parsed))
            if parsed.attempted_call:
                record.tool_call_turns += 1
            else:
                record.response_turns += 1
            if len(mask) >= self.response_length:
                record.stop_reason = "response_length"
                break
            if record.assistant_turns >= spec.max_assistant_turns:
                record.stop_reason = "assistant_turns"
                break
            if parsed.attempted_call:
                if record.tool_turns >= spec.max_tool_turns:
                    record.stop_reason = "tool_turns"
                    break
                appended = await run_tool_turn(sim, task, _history(messages), parsed, record, spec,
                                               self.max_parallel_calls, self.max_tool_response_chars)
                if appended is None:
                    break
                record.tool_turns += 1
            else:
                if record.user_turns >= spec.max_user_turns:
                    record.stop_reason = "user_turns"
                    break
                answer = await sim.user(UserRequest(task=task, history=_history(messages), step=spec.step,
                                                    episode_id=spec.episode_id))
                record.simulator_tokens += answer.prompt_tokens + answer.completion_tokens
                if answer.outcome == "aborted":
                    record.abort("user", answer.abort_cause, answer.abort_detail)
                    break
                if answer.reward is not None:
                    record.user_rewards.append(float(answer.reward))
                if answer.done or not answer.reply.strip():
                    record.stop_reason = "user_terminated"
                    break
                record.user_turns += 1
                appended = [{"role": "user", "content": answer.reply}]
            previous = list(messages)
            messages.extend(appended)
            merged, mask, logprobs = await self.ct_merge_context_msg(previous, messages, runtime, mask, logprobs,
                                                                     tools=tools)
            runtime = merged.token_ids
            if len(mask) >= self.response_length:
                record.stop_reason = "response_length"
                break

        if record.outcome == "ok":
            verdict = await sim.verify(VerifyRequest(task=task, trajectory=_history(messages), step=spec.step,
                                                     episode_id=spec.episode_id, num_criteria=spec.num_criteria))
            record.simulator_tokens += verdict.prompt_tokens + verdict.completion_tokens
            if verdict.outcome == "aborted" or verdict.reward is None:
                record.abort("verify", verdict.abort_cause, verdict.abort_detail or "no reward in the verdict")
            else:
                record.verifier_reward = verdict.reward
                record.reward = float(verdict.reward)
                if task.call_expected and record.tool_call_turns == 0:
                    record.reward, record.no_call_penalty = -1.0, True
        record.num_turns = len(messages) - 1
        record.transcript = messages[1:]
        response = runtime[len(prompt_ids):]
        return self._output(prompt_ids, response, mask, logprobs, record, started)

    def _decode(self, token_ids: list[int]) -> str:
        ids = list(token_ids)
        while ids and ids[-1] in self.stop_ids:
            ids.pop()
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def _output(self, prompt_ids, response_ids, mask, logprobs, record: EpisodeRecord, started: float):
        if record.outcome == "aborted":
            mask = [0] * len(mask)
            record.reward = 0.0
        record.response_length = len(response_ids)
        record.policy_tokens = sum(mask)
        record.seconds = round(time.monotonic() - started, 4)
        if self.episode_log is not None:
            # One file per process, so the workers' lines never interleave; appended under the append-only
            # rule, so a worker killed mid-line costs that line only and the driver's reader says so.
            append_line(self.episode_log / f"{socket.gethostname()}-{os.getpid()}.jsonl",
                        record.model_dump_json() + "\n")
        return AgentLoopOutput(
            prompt_ids=list(prompt_ids), response_ids=list(response_ids)[: self.response_length],
            response_mask=list(mask)[: self.response_length],
            response_logprobs=list(logprobs)[: self.response_length] if logprobs is not None else None,
            reward_score=record.reward, num_turns=record.num_turns + 1,
            metrics=AgentLoopMetrics(), extra_fields={"episode": record.model_dump(mode="json")},
        )


def _assistant_message(parsed) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": parsed.content}
    if parsed.reasoning is not None:
        message["reasoning_content"] = parsed.reasoning
    if parsed.tool_calls:
        message["tool_calls"] = [call.model_dump(mode="json") for call in parsed.tool_calls]
    return message


def _history(messages: list[dict]) -> list:
    """The conversation in contract shapes, for the simulator (the system prompt stays with the policy)."""
    return _MESSAGES.validate_python(messages[1:])
