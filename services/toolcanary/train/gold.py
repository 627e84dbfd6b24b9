"""Gold conversations for the warm start: tasks from the running simulator, ideal turns from the scripted backend.

Tasks are requested over HTTP (so they come from the same simulator, library and seed the run trains
against): the run's fixed task pool when it has one, else first-level curriculum draws; the scripted backend's
`gold_trajectory` then plays the ideal agent against the scripted tool and user roles.

    requests = warm_start_requests(run="demo", seed=0, count=16, task_pool=8, max_tools=1)
    conversations = asyncio.run(gold_conversations("http://127.0.0.1:8300", requests))
"""

from __future__ import annotations

import logging
import random

from toolcanary.contract.simulator_api import TaskRequest
from toolcanary.contract.tasks import SimulatedTask
from toolcanary.simulator.scripted import gold_trajectory
from toolcanary.train.curriculum import Curriculum
from toolcanary.train.episode import SYSTEM_PROMPTS
from toolcanary.train.rollout import capped, pool_task
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
            conversations.append((answer.task, system, gold_trajectory(answer.task)))
    if not conversations:
        raise RuntimeError(f"the simulator at {url} authored none of {len(requests)} warm-start tasks")
    return conversations


def warm_start_requests(*, run: str, seed: int, count: int, task_pool: int, max_tools: int | None,
                        epsilon: float = 0.5, no_call_fraction: float = 0.0) -> list[TaskRequest]:
    """The tasks to imitate: the run's fixed pool when it has one, else `count` first-level draws."""
    curriculum = Curriculum(level=1, epsilon=epsilon, no_call_fraction=no_call_fraction)
    if task_pool:
        pairs = [pool_task(i, run=run, seed=seed, curriculum=curriculum, max_tools=max_tools)
                 for i in range(task_pool)]
    else:
        rng = random.Random(seed)
        pairs = [(f"{run}-warm-{seed}-{i:03d}", capped(curriculum.draw(rng), max_tools)) for i in range(count)]
    return [TaskRequest(task_key=key, difficulty=difficulty) for key, difficulty in pairs]
