"""Gold conversations for the warm start: tasks and their ideal turns from the running simulator.

Both come over HTTP (so they come from the same simulator, library and seed the run trains against): tasks
from `/v1/task`, the run's fixed task pool when it has one, else first-level curriculum draws; their ideal
conversations from `/v1/gold`, where the simulator plays the ideal agent against its scripted tool and user
roles.

    requests = warm_start_requests(key_prefix="demo-5f0c9a2e7b1d4c3a", seed=0, count=16, task_pool=8, max_tools=1)
    conversations = asyncio.run(gold_conversations("http://127.0.0.1:8300", requests))
"""

from __future__ import annotations

import logging
import random

from toolcanary.contract.chat import AssistantMessage
from toolcanary.contract.simulator_api import GoldRequest, TaskRequest
from toolcanary.contract.tasks import SimulatedTask
from toolcanary.train.curriculum import Curriculum
from toolcanary.train.episode import SYSTEM_PROMPTS
from toolcanary.train.rollout import abstention, capped, pool_task
from toolcanary.train.simulator_client import SimulatorClient

logger = logging.getLogger(__name__)


async def gold_conversations(url: str, requests: list[TaskRequest],
                             seed: int = 0) -> list[tuple[SimulatedTask, str, list]]:
    """(task, system prompt, messages) per request; tasks the simulator could not author are skipped."""
    rng = random.Random(seed)
    conversations = []
    async with SimulatorClient(url) as sim:
        for request in requests:
            answer = await sim.task(request)
            if answer.outcome != "ok" or answer.task is None:
                logger.warning("warm start: no task for %s (%s)", request.task_key, answer.abort_detail)
                continue
            # Mostly the level-1 prompt the run starts with, sometimes another rung of the ladder.
            system = SYSTEM_PROMPTS[0 if rng.random() < 0.75 else rng.randint(1, 3)]
            gold = await sim.gold(GoldRequest(task_key=answer.task.task_key))
            if gold.outcome != "ok":
                logger.warning("warm start: no gold conversation for %s (%s)", request.task_key, gold.abort_detail)
                continue
            conversations.append((answer.task, system, gold.messages))
    if not conversations:
        raise RuntimeError(f"the simulator at {url} authored none of {len(requests)} warm-start tasks")
    return conversations


def warm_start_requests(*, key_prefix: str, seed: int, count: int, task_pool: int, max_tools: int | None,
                        epsilon: float = 0.5, no_call_fraction: float = 0.0,
                        draw_prefix: str = "warm") -> list[TaskRequest]:
    """The tasks to imitate: the run's fixed pool of call tasks when it has one, else `count` first-level draws;
    and, in both cases, round(no_call_fraction * count) abstention tasks, whose gold answer declines.

    Which fresh draws are abstention tasks is seeded, so the warm start's mix is what the recipe states, not
    what a coin gave. With a pool the abstention tasks come on top of it: a policy that has only ever imitated
    calls never declines, and its GRPO groups on abstention tasks then all score alike and teach nothing.
    """
    rng = random.Random(seed)
    curriculum = Curriculum(level=1, epsilon=epsilon)
    declined = set(random.Random(f"warm-abstain-{seed}").sample(range(count), round(no_call_fraction * count)))
    pairs, draws = [], []
    if task_pool:
        # The pool's (call) tasks, under the keys and draws GRPO asks for them with.
        pool = [pool_task(i, key_prefix=key_prefix, seed=seed, curriculum=curriculum, max_tools=max_tools)
                for i in range(task_pool)]
        pairs, draws = [(key, difficulty) for key, _, difficulty in pool], [draw for _, draw, _ in pool]
    for i in range(count):
        difficulty = capped(curriculum.draw(rng), max_tools)
        if i in declined:
            difficulty = abstention(difficulty)
        elif task_pool:
            continue
        pairs.append((f"{key_prefix}-warm-{seed}-{i:03d}", difficulty))
        draws.append(f"{draw_prefix}-{seed}-{i:03d}")
    # What a task is comes from the seed and its index, not from the run's private key: every run of the same
    # settings imitates the same conversations (and shares the starting-policy cache).
    return [TaskRequest(task_key=key, difficulty=difficulty, draw=draw)
            for (key, difficulty), draw in zip(pairs, draws, strict=True)]


def conversation_mix(conversations: list[tuple[SimulatedTask, str, list]]) -> dict[str, int]:
    """How many gold conversations call at once, ask a question before calling, or decline without a call."""
    mix = {"call": 0, "ask first": 0, "decline": 0}
    for _, _, messages in conversations:
        assistant = [m for m in messages if isinstance(m, AssistantMessage)]
        first_call = next((i for i, m in enumerate(assistant) if m.tool_calls), None)
        mix["decline" if first_call is None else "ask first" if first_call > 0 else "call"] += 1
    return mix
