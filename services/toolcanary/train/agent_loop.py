"""The verl agent loop that runs one simulated episode: task, policy turns, tool/user roles, verifier.

Registered with verl as `toolcanary_simulated`. Token in, token out: the prompt is rendered once with the
task's own tools, policy tokens are appended as generated (mask 1) and tool/user replies are appended as
rendered deltas (mask 0) through verl's Continuous Token builder; the history is never re-rendered.
The builder is called inline rather than through verl's `ct_*` executor hops (rendering holds the GIL, so a
thread buys no parallelism and costs a hand-off per turn). Renders are shared across a worker's episodes
(`share_renders`): a task's prompt is the same for the n samples of its group, and every reply delta is
the difference between two renders whose first is one of a few fixed synthetic prefixes. Replies are rendered
without the tool schemas, most of each render's text, where the chat template renders them the same without
(checked once per tokenizer and kind of reply, by rendering both ways).
One loop for both modes (`run`: the task, then generate -> read the turn -> stop checks -> tool or user turn,
then verify and score); what the modes decide differently (`trustee`, the GPU recipe's: TRUSTEE's agent loop;
`toolcanary`: the project's own) is in their rules objects, episode_rules.py. A simulator failure aborts the
episode with its cause (see simulator_client): its response mask is zeroed (out of the loss and the group
statistics); the trainers count the causes, and stop the run on a refused token. A task whose prompt is longer
than the prompt budget is never cut (verl would cut its head off, a log line, no more): the trustee mode
replaces it, as TRUSTEE's curriculum does, the toolcanary mode aborts the episode (`too_large`).

verl builds one instance per sample; options arrive as keyword arguments from agent_loops.yaml:

    - name: toolcanary_simulated
      _target_: toolcanary.train.agent_loop.SimulatedEpisodeLoop
      simulator_url: http://simulator:8300
      mode: trustee
      trustee_dir: /trustee
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import socket
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

from pydantic import TypeAdapter
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from toolcanary.contract.append_only import json_line
from toolcanary.contract.chat import Message
from toolcanary.contract.simulator_api import TaskRequest, UserRequest, VerifyRequest
from toolcanary.contract.tasks import SimulatedTask
from toolcanary.contract.training_files import EpisodeRecord, step_episodes
from toolcanary.train.episode import EpisodeSpec
from toolcanary.train.episode_rules import LoopState, Replies, rules_for
from toolcanary.train.simulator_client import RoleTimeouts, SimulatorClient
from toolcanary.train.step_metrics import append_line
from toolcanary.train.tool_turn import run_tool_turn

AGENT_NAME = "toolcanary_simulated"
_MESSAGES = TypeAdapter(list[Message])
_CLIENTS: dict[tuple[str, int], SimulatorClient] = {}
RENDER_CACHE_SIZE = 512
# Per tokenizer (one per worker process): recent renders, most recent last, and whether a kind of reply
# renders the same without the tool schemas.
_RENDERS: WeakKeyDictionary[Any, OrderedDict[str, list[int]]] = WeakKeyDictionary()
_SCHEMA_FREE: WeakKeyDictionary[Any, dict[str, bool]] = WeakKeyDictionary()
_HEAP_FROZEN = False


def freeze_heap_once() -> None:
    """Move what the process has loaded so far (model, tokenizer, libraries) out of the collector's reach.

    The cyclic collector otherwise walks those long-lived objects on every full collection, and a rollout's
    many short-lived dicts trigger collections often. Called when the first episode loop is built, which is
    after the model loads in the CPU trainer.
    """
    global _HEAP_FROZEN
    if not _HEAP_FROZEN:
        gc.collect()
        gc.freeze()
        _HEAP_FROZEN = True


def share_renders(builder, template_options: str) -> None:
    """Serve the builder's chat-template renders from its tokenizer's cache of recent ones.

    verl's text builders (0.9.1) render through `_render_tokens`, a pure function of the messages, tools and
    template options; a builder lives for one episode, the cache for the worker.
    """
    cache = _RENDERS.setdefault(builder.tokenizer, OrderedDict())
    render = builder._render_tokens

    def cached(messages: list[dict], *, add_generation_prompt: bool, tools: list[dict] | None = None) -> list[int]:
        key = json.dumps([messages, add_generation_prompt, tools, template_options], sort_keys=True, default=str)
        ids = cache.get(key)
        if ids is None:
            ids = cache[key] = render(messages, add_generation_prompt=add_generation_prompt, tools=tools)
            if len(cache) > RENDER_CACHE_SIZE:
                cache.popitem(last=False)
        else:
            cache.move_to_end(key)
        return list(ids)

    builder._render_tokens = cached


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
                 mode: str = "toolcanary", trustee_dir: str | None = None, trustee_commit: str | None = None,
                 **kwargs) -> None:
        kwargs.pop("tools", None)
        kwargs.pop("name", None)
        super().__init__(*args, **kwargs)
        self.prompt_length = self.rollout_config.prompt_length
        self.response_length = self.rollout_config.response_length
        self.max_turn_tokens = max_turn_tokens
        self.max_parallel_calls = max_parallel_calls
        self.max_tool_response_chars = max_tool_response_chars
        self.sim_options = (simulator_url, RoleTimeouts(**(timeouts or {})), http_retries, max_in_flight)
        self.episode_log = Path(episode_log_dir) if episode_log_dir else None
        stops = [self.tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
        self.rules = rules_for(mode, self.tokenizer, {i for i in stops if isinstance(i, int) and i >= 0}, trustee_dir,
                               trustee_commit)
        # Part of every render-cache key: the same tokenizer may render under other template options.
        self.template_options = json.dumps(dict(self.continuous_token_builder.chat_template_kwargs),
                                           sort_keys=True, default=str)
        share_renders(self.continuous_token_builder, self.template_options)
        freeze_heap_once()

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        spec = EpisodeSpec.model_validate(dict(kwargs["extra_info"]))
        if kwargs.get("session_id") is not None:  # verl's V1 manager spawns the n rollouts of one row
            spec = spec.model_copy(update={"episode_id": f"{spec.episode_id}-r{int(kwargs['session_id']):02d}"})
        sim, rules = shared_client(*self.sim_options), self.rules
        record = EpisodeRecord(step=spec.step, episode_id=spec.episode_id, task_key=spec.task_key,
                               group_index=spec.group_index, curriculum_level=spec.curriculum_level,
                               call_expected=spec.difficulty.call_expected, split=spec.split,
                               attempt=spec.attempt)
        started = time.monotonic()
        # `messages` is what the policy's template renders (token side); `conversation` what the roles are shown.
        messages: list[dict] = [{"role": "system", "content": rules.system_prompt(spec.system_prompt_level)}]
        task, prompt_ids = await self._task(sim, spec, record, messages)
        if task is None:
            return self._output(prompt_ids, [self.tokenizer.eos_token_id], [0], None, record, started)
        conversation = list(messages)
        tools = [tool.model_dump(mode="json") for tool in task.tools]
        runtime, mask, logprobs = list(prompt_ids), [], []

        def history() -> list:
            return _MESSAGES.validate_python(rules.history(conversation))

        while True:
            cap = rules.turn_tokens(self.max_turn_tokens, self.prompt_length, self.response_length, len(runtime),
                                    len(mask))
            if cap <= 0 or len(mask) >= self.response_length:
                record.stop_reason = "response_length"
                break
            out = await self.server_manager.generate(request_id=spec.episode_id, prompt_ids=runtime,
                                                     sampling_params={**sampling_params, "max_tokens": cap})
            if out.log_probs is None:
                logprobs = None
            merged = self.continuous_token_builder.merge_assistant_tokens(runtime, out.token_ids)
            mask, logprobs = self.continuous_token_builder.align_response_metadata(
                merged, mask, logprobs, assistant_logprobs=out.log_probs if logprobs is not None else None)
            runtime = merged.token_ids
            record.assistant_turns += 1
            turn = await rules.read_turn(out.token_ids)
            if turn.attempted_call:
                record.tool_call_turns += 1
            else:
                record.response_turns += 1
            state = LoopState(record, spec, len(mask), self.response_length, turn)
            if reason := rules.stop_reason("after_generation", state):
                record.stop_reason = reason
                break
            messages.append(turn.message)
            conversation.append(turn.shown)
            if reason := rules.stop_reason("before_acting", state):
                record.stop_reason = reason
                break
            if turn.attempted_call:
                replies = await run_tool_turn(sim, task, history(), turn, record, spec, self.max_parallel_calls,
                                              self.max_tool_response_chars, rules)
            else:
                replies = await self._user_turn(sim, task, history(), spec, record)
            if rules.counts_attempted_turns or not (replies.aborted or replies.ended):
                if turn.attempted_call:
                    record.tool_turns += 1
                else:
                    record.user_turns += 1
            if replies.aborted:
                if rules.shows_failed_replies:
                    conversation.extend(replies.messages)
                break
            conversation.extend(replies.messages)
            if replies.messages:
                previous = list(messages)
                messages.extend(replies.messages)
                merged = self._merge_replies(previous, messages, runtime, tools)
                mask, logprobs = self.continuous_token_builder.align_response_metadata(merged, mask, logprobs)
                runtime = merged.token_ids
            if replies.ended:
                record.stop_reason = "user_terminated"
                break

        if rules.verifies(record):
            await self._verify(sim, task, history(), spec, record)
        rules.score(record, task)
        record.num_turns = len(messages) - 1
        record.transcript = messages[1:]
        response = runtime[len(prompt_ids):]
        return self._output(prompt_ids, response, mask, logprobs, record, started)

    async def _task(self, sim: SimulatorClient, spec: EpisodeSpec, record: EpisodeRecord,
                    messages: list[dict]) -> tuple[SimulatedTask | None, list[int]]:
        """The episode's task and its prompt tokens, with the task's first query appended to `messages`.

        A mode may replace a task the simulator could not make, or whose prompt is over the prompt budget, by
        another under a derived key (`<task_key>.rN`): every episode of the group derives the same keys and
        gets the same verdicts (a too-long prompt is too long for each; a trustee-mode simulator keeps a key's
        failure), so the group stays on one task. Without one, the episode is aborted (no task: (None, the
        system prompt's tokens)). A prompt is never cut: verl would cut it from the left (system prompt and
        tools first) with only a log warning.
        """
        prompt_ids: list[int] = []
        for attempt in range(self.rules.task_attempts):
            key, draw = (spec.task_key, spec.draw) if attempt == 0 else (
                f"{spec.task_key}.r{attempt}", spec.draw and f"{spec.draw}.r{attempt}")
            got = await sim.task(TaskRequest(task_key=key, draw=draw, difficulty=spec.difficulty, step=spec.step,
                                             episode_id=spec.episode_id))
            record.simulator_tokens += got.prompt_tokens + got.completion_tokens
            if got.outcome == "aborted" or got.task is None:
                cause, detail = got.abort_cause, got.abort_detail or "no task in the answer"
                prompt_ids = self.continuous_token_builder.build_initial_tokens(messages)
                continue
            task = got.task
            attempt_messages = [*messages, {"role": "user", "content": task.first_user_query}]
            prompt_ids = self.continuous_token_builder.build_initial_tokens(
                attempt_messages, tools=[tool.model_dump(mode="json") for tool in task.tools])
            if len(prompt_ids) > self.prompt_length:
                cause, detail = "too_large", (f"the task's prompt is {len(prompt_ids)} tokens, over the "
                                              f"{self.prompt_length}-token prompt budget (TRUSTEE drops such tasks)")
                prompt_ids = prompt_ids[-self.prompt_length:]
                continue
            messages.append(attempt_messages[-1])
            record.task_key, record.tasks_replaced = key, attempt
            record.task_id, record.call_expected = task.task_id, task.call_expected
            record.expected_calls = len(task.expected_tool_calls)
            return task, prompt_ids
        record.tasks_replaced = self.rules.task_attempts - 1
        record.abort("task", cause, detail)
        return None, prompt_ids

    async def _user_turn(self, sim: SimulatorClient, task: SimulatedTask, history: list, spec: EpisodeSpec,
                         record: EpisodeRecord) -> Replies:
        answer = await sim.user(UserRequest(task_key=task.task_key, history=history, step=spec.step,
                                            episode_id=spec.episode_id))
        record.simulator_tokens += answer.prompt_tokens + answer.completion_tokens
        if answer.outcome == "aborted":
            record.abort("user", answer.abort_cause, answer.abort_detail)
            return Replies([{"role": "user", "content": self.rules.user_failed_text}], aborted=True)
        if answer.reward is not None:
            record.user_rewards.append(float(answer.reward))
        ended = self.rules.user_ended(answer)
        reply = [{"role": "user", "content": answer.reply}]
        return Replies(reply if self.rules.keeps_final_reply or not ended else [], ended=ended)

    def _merge_replies(self, previous: list[dict], messages: list[dict], runtime: list[int],
                       tools: list[dict]):
        """Render the replies appended after `previous` and join them to the runtime tokens.

        The first time this worker merges a kind of reply (its roles), it renders with and without the tool
        schemas and keeps the verdict; a template whose replies differ without the schemas, or that fails
        without them, keeps getting them.
        """
        builder = self.continuous_token_builder
        kind = json.dumps([[m["role"] for m in messages[len(previous):]], self.template_options])
        verdicts = _SCHEMA_FREE.setdefault(self.tokenizer, {})
        if kind not in verdicts:
            merged = builder.merge_context_tokens(previous, messages, runtime, tools=tools)
            try:
                verdicts[kind] = builder.merge_context_tokens(previous, messages, runtime,
                                                              tools=None).token_ids == merged.token_ids
            except Exception:  # a template that cannot render without schemas keeps getting them
                verdicts[kind] = False
            return merged
        return builder.merge_context_tokens(previous, messages, runtime, tools=None if verdicts[kind] else tools)

    async def _verify(self, sim: SimulatorClient, task, trajectory: list, spec: EpisodeSpec,
                      record: EpisodeRecord) -> None:
        """Score the episode; an episode already aborted keeps its first cause (TRUSTEE verifies it anyway)."""
        verdict = await sim.verify(VerifyRequest(task_key=task.task_key, trajectory=trajectory, step=spec.step,
                                                 episode_id=spec.episode_id, num_criteria=spec.num_criteria))
        record.simulator_tokens += verdict.prompt_tokens + verdict.completion_tokens
        if verdict.outcome == "aborted" or verdict.reward is None:
            if record.outcome == "ok":
                record.abort("verify", verdict.abort_cause, verdict.abort_detail or "no reward in the verdict")
            return
        record.verifier_reward = verdict.reward
        record.reward = float(verdict.reward)

    def _output(self, prompt_ids, response_ids, mask, logprobs, record: EpisodeRecord, started: float):
        if record.outcome == "aborted":
            mask = [0] * len(mask)
        record.response_length = len(response_ids)
        record.policy_tokens = sum(mask)
        record.seconds = round(time.monotonic() - started, 4)
        if self.episode_log is not None:
            # One file per process and step, so the workers' lines never interleave and closing a step reads
            # that step's files only; appended under the append-only rule, so a worker killed mid-line costs
            # that line only and the driver's reader says so.
            writer = f"{socket.gethostname()}-{os.getpid()}.jsonl"
            append_line(step_episodes(self.episode_log, record.step) / writer, json_line(record))
        return AgentLoopOutput(
            prompt_ids=list(prompt_ids), response_ids=list(response_ids)[: self.response_length],
            response_mask=list(mask)[: self.response_length],
            response_logprobs=list(logprobs)[: self.response_length] if logprobs is not None else None,
            reward_score=record.reward, num_turns=record.num_turns + 1,
            metrics=AgentLoopMetrics(), extra_fields={"episode": record},
        )
