"""The CPU generation client: tokens that do not depend on the batch, and batches that wait for every live episode.

Run: .venvs/train/bin/python -m pytest tests/train/test_generation_client.py -q
"""

from __future__ import annotations

import asyncio

import pytest

from toolcanary.train.cpu.generation_client import TransformersGenerationClient
from toolcanary.train.cpu.tiny_policy import load_policy

PARAMS = {"temperature": 1.0, "top_p": 1.0, "max_tokens": 6}


@pytest.fixture(scope="module")
def policy(tiny_dir):
    return load_policy(tiny_dir)


def make_client(policy, **options) -> TransformersGenerationClient:
    model, tokenizer = policy
    return TransformersGenerationClient(model, tokenizer, seed=3, **options)


async def ask(client, request_id: str, prompt: list[int], delay_s: float = 0.0) -> list[int]:
    await asyncio.sleep(delay_s)
    return (await client.generate(request_id, prompt_ids=prompt, sampling_params=PARAMS)).token_ids


def test_a_request_draws_the_same_tokens_alone_or_batched_with_longer_prompts(policy):
    # How the simulator's latency groups episodes into batches must not change a run (resumed runs compare).
    prompt = [11, 12, 13, 14, 15]
    alone = asyncio.run(ask(make_client(policy), "ep-a", prompt))
    client = make_client(policy)

    async def together():
        return await asyncio.gather(ask(client, "ep-b", list(range(20, 60))), ask(client, "ep-a", prompt),
                                    ask(client, "ep-c", list(range(30, 42))))

    batched = asyncio.run(together())
    assert client.batches == 1
    assert batched[1] == alone and len(alone) > 0


def test_a_batch_waits_until_every_live_episode_has_asked(policy):
    # The episodes' turns reach the client a few milliseconds apart (simulator replies): one batch, not three.
    client = make_client(policy, gather_s=0.001, max_wait_s=30.0)

    async def step():
        for _ in range(3):
            client.episode_started()
        await asyncio.gather(*(ask(client, f"ep-{i}", [11, 12, 13 + i], delay_s=0.02 * i) for i in range(3)))

    asyncio.run(step())
    assert client.batches == 1


def test_an_episode_that_ends_without_asking_releases_the_batch(policy):
    client = make_client(policy, max_wait_s=30.0)

    async def step():
        client.episode_started()
        client.episode_started()
        asking = asyncio.create_task(ask(client, "ep-0", [11, 12, 13]))
        await asyncio.sleep(0.05)
        client.episode_finished()  # its last reply was a final answer: it will not ask again
        return await asyncio.wait_for(asking, timeout=10.0)

    assert asyncio.run(step())
    assert client.batches == 1


def test_a_live_episode_that_does_not_ask_holds_a_batch_at_most_max_wait(policy):
    # A slow simulator call of one episode must not stall every other one.
    client = make_client(policy, max_wait_s=0.05)

    async def step():
        client.episode_started()
        client.episode_started()
        return await asyncio.wait_for(ask(client, "ep-0", [11, 12, 13]), timeout=10.0)

    assert asyncio.run(step())
    assert client.batches == 1
