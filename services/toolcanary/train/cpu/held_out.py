"""Greedy first answers of a policy on held-out simulator tasks: will its calls parse once it is served?

A warm-started policy has to write calls that the serving side's tool parser (vLLM's hermes parser) decodes,
closing tags included; a policy that closes a call with `>` instead of `</tool_call>` scores nothing on BFCL.
This draws a fixed set of fresh first-level tasks, a quarter of them abstention tasks, under keys of their own
(`heldout-<run>-<tag>-warm-<seed>-<i>`: the run's private tag keeps anyone else who can reach the simulator
from claiming those keys first; the run's warm-start and training keys begin with `<run>-<tag>`), each drawn
from `heldout-warm-<seed>-<i>` (the request's `draw`), so every run is checked on the same tasks; builds each
prompt as a rollout's first turn does, generates greedily up to `max_turn_tokens` and keeps the
decoded text with its special tokens, as the server's parser will see it.

    python -m toolcanary.train starting-policy --run demo --policy smollm2 --held-out 16
    answers = asyncio.run(held_out_answers(model, tokenizer, url, count=16, run_prefix="demo-5eed0000c0ffee00"))
"""

from __future__ import annotations

import asyncio
import logging

from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

from toolcanary.contract.hermes import CALL_OPEN, parse_assistant_text
from toolcanary.contract.training_files import HeldOutAnswer
from toolcanary.train.cpu.generation_client import TransformersGenerationClient
from toolcanary.train.cpu.gold_conversations import warm_start_requests
from toolcanary.train.episode import SYSTEM_PROMPTS
from toolcanary.train.simulator_client import SimulatorClient

logger = logging.getLogger(__name__)
HELD_OUT_PREFIX = "heldout"
HELD_OUT_NO_CALL_FRACTION = 0.25


async def held_out_answers(model, tokenizer, url: str, *, count: int, run_prefix: str, seed: int = 0,
                           max_tools: int | None = 1, max_tokens: int = 128,
                           enable_thinking: bool = False) -> list[HeldOutAnswer]:
    """The policy's greedy first answer on each of `count` held-out tasks (tasks the simulator cannot author
    are left out; none at all raises). `run_prefix`: the run's `task_key_prefix` (run id and private tag)."""
    requests = warm_start_requests(key_prefix=f"{HELD_OUT_PREFIX}-{run_prefix}", seed=seed, count=count, task_pool=0,
                                   max_tools=max_tools, no_call_fraction=HELD_OUT_NO_CALL_FRACTION,
                                   draw_prefix=f"{HELD_OUT_PREFIX}-warm")
    async with SimulatorClient(url) as sim:
        answers = [await sim.task(request) for request in requests]
    tasks = [answer.task for answer in answers if answer.outcome == "ok" and answer.task is not None]
    for request, answer in zip(requests, answers, strict=True):
        if answer.task is None:
            logger.warning("held-out check: no task for %s (%s)", request.task_key, answer.abort_detail)
    if not tasks:
        raise RuntimeError(f"the simulator at {url} authored none of {count} held-out tasks")
    builder = create_continuous_token_builder(tokenizer, hf_model_type="qwen3",
                                              chat_template_kwargs={"enable_thinking": enable_thinking})
    client = TransformersGenerationClient(model, tokenizer, max_batch=len(tasks))
    params = {"temperature": 0.0, "max_tokens": max_tokens}

    async def answer(task) -> HeldOutAnswer:
        tools = [tool.model_dump(mode="json") for tool in task.tools]
        messages = [{"role": "system", "content": SYSTEM_PROMPTS[0]},
                    {"role": "user", "content": task.first_user_query}]
        prompt = builder.build_initial_tokens(messages, tools=tools)
        out = await client.generate(task.task_key, prompt_ids=prompt, sampling_params=params)
        finished = bool(out.token_ids) and out.token_ids[-1] in client.stop_ids
        body = out.token_ids[:-1] if finished else out.token_ids
        return HeldOutAnswer(task_key=task.task_key, call_expected=task.call_expected, tools=tools,
                             text=tokenizer.decode(body, skip_special_tokens=False), tokens=len(out.token_ids),
                             finished=finished)

    return list(await asyncio.gather(*(answer(task) for task in tasks)))


def answer_counts(answers: list[HeldOutAnswer]) -> dict[str, int]:
    """What the answers did, read with the project's Hermes reader: calls made, calls left malformed or unclosed,
    declines on the abstention tasks."""
    parsed = [(a, parse_assistant_text(a.text)) for a in answers]
    return {
        "tasks": len(answers),
        "call_tasks": sum(a.call_expected for a in answers),
        "answers_with_a_call": sum(CALL_OPEN in a.text for a in answers),
        "answers_with_a_malformed_call": sum(bool(p.malformed) for _, p in parsed),
        "call_tasks_called": sum(a.call_expected and bool(p.tool_calls) and not p.malformed for a, p in parsed),
        "abstention_tasks_declined": sum(not a.call_expected and CALL_OPEN not in a.text for a, _ in parsed),
    }
