"""Drill (simulator soak): 256 concurrent episodes against the scripted backend for 90 s, loopback only.

The real service runs as `python -m toolcanary.simulator serve --backend scripted` in a process of its own;
256 episode loops share one aiohttp session. Each episode is a GRPO rollout: a task (one new task key per
pair of episodes, so the registry keeps growing fast), then the gold conversation's tool and user calls,
then the verifier, with a 1 s pause before each call where a policy would generate. Expected: not one 5xx (nor
any other non-200), and the service's resident memory at the end within 10 % of what it was after the first
fifth of the run (18 s; the in-memory task registry of 256 is full within seconds), although thousands of
task keys and role records were written meanwhile.

Bounded: 256 coroutines, `SOAK_S` seconds (90; `TOOLCANARY_TEST_SOAK_S` changes it, e.g. 1800 for a
longer check), one
process on 127.0.0.1; the record folder (a few hundred MB) is deleted at the end.

Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_soak.py -q
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections import Counter

import aiohttp
import httpx
import psutil
import pytest

from toolcanary.common.loopback import free_port
from toolcanary.contract import SimulatedTask
from toolcanary.simulator.scripted import gold_trajectory

SOAK_S = float(os.environ.get("TOOLCANARY_TEST_SOAK_S", "90"))
EPISODES_IN_FLIGHT = 256
# Episodes per task key. A GRPO group of 8 shares one key; 2 ages the registry four times as fast as training
# would, so that five minutes stand for a long run (and the original, unbounded registry shows its growth).
GROUP = 2
THINK_S = 1.0  # where the policy would generate, before each call (a GPU policy turn takes longer)
FIRST_MINUTE_S = min(60.0, SOAK_S / 5)
TOLERANCE = 0.10


def difficulty(**overrides) -> dict:
    return {"num_tools": 4, "expected_calls": 1, "user_persona": 0, "query_ambiguity": 0, "expected_turns": 0} | overrides


def rss(pid: int) -> int:
    return psutil.Process(pid).memory_info().rss


@pytest.fixture
def soak_simulator(tmp_path):
    port = free_port()
    runs = tmp_path / "runs"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLCANARY_")}
    log = (tmp_path / "simulator.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "toolcanary.simulator", "serve", "--insecure", "--backend", "scripted", "--run", "soak",
         "--runs-dir", str(runs), "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()  # never leave a process behind a failed start
            raise AssertionError("the simulator did not become ready within 60 s:\n"
                                 + (tmp_path / "simulator.log").read_text()[-2000:])
        try:
            if httpx.get(f"{url}/health/ready", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.1)
    yield url, process
    process.terminate()
    process.wait(timeout=30)
    log.close()
    shutil.rmtree(runs, ignore_errors=True)  # hundreds of MB of records


async def soak(url: str, pid: int, seconds: float) -> dict:
    statuses: Counter[int] = Counter()
    samples: list[tuple[float, int]] = []
    counters = {"episodes": 0, "calls": 0, "started": 0}
    started = time.monotonic()
    deadline = started + seconds

    async def post(session: aiohttp.ClientSession, path: str, body: dict) -> dict | None:
        await asyncio.sleep(THINK_S)
        async with session.post(f"{url}{path}", json=body) as answer:
            statuses[answer.status] += 1
            counters["calls"] += 1
            return await answer.json() if answer.status == 200 else None

    async def episode_loop(session: aiohttp.ClientSession) -> None:
        while time.monotonic() < deadline:
            number = counters["started"]
            counters["started"] += 1
            group = number // GROUP
            # A new key per group, settings varying by group, 16 groups per training step.
            body = {"task_key": f"soak-{group}", "step": group // 64, "episode_id": f"soak-ep-{number}",
                    "difficulty": difficulty(num_tools=1 + group % 6, expected_calls=1 + group % 2,
                                             expected_turns=group % 3, query_ambiguity=group % 2)}
            answer = await post(session, "/v1/task", body)
            if answer is None or answer["outcome"] != "ok":
                continue
            task = answer["task"]
            gold = [m.model_dump(mode="json") for m in gold_trajectory(SimulatedTask.model_validate(task))]
            context = {"task_key": task["task_key"], "step": body["step"], "episode_id": body["episode_id"]}
            for position, message in enumerate(gold):
                if message["role"] != "assistant":
                    continue
                if message.get("tool_calls"):
                    for call in message["tool_calls"]:
                        await post(session, "/v1/tool", {**context, "history": gold[: position + 1], "call": call})
                else:
                    await post(session, "/v1/user", {**context, "history": gold[: position + 1]})
            await post(session, "/v1/verify", {**context, "trajectory": gold, "num_criteria": 2})
            counters["episodes"] += 1

    async def sample_memory() -> None:
        while time.monotonic() < deadline:
            samples.append((time.monotonic() - started, rss(pid)))
            await asyncio.sleep(5)
        samples.append((time.monotonic() - started, rss(pid)))

    connector = aiohttp.TCPConnector(limit=EPISODES_IN_FLIGHT)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        await asyncio.gather(sample_memory(), *(episode_loop(session) for _ in range(EPISODES_IN_FLIGHT)))
    return {"statuses": statuses, "samples": samples, **counters, "seconds": time.monotonic() - started}


@pytest.mark.slow
def test_drill_soak_256_concurrent_episodes_no_5xx_and_flat_memory(soak_simulator, drill):
    url, process = soak_simulator
    result = asyncio.run(soak(url, process.pid, SOAK_S))
    statuses, samples = result["statuses"], result["samples"]
    after_first_minute = next(value for at, value in samples if at >= FIRST_MINUTE_S)
    at_end = samples[-1][1]
    growth = at_end / after_first_minute - 1
    metrics = httpx.get(f"{url}/metrics", timeout=10).text
    known = next(int(float(line.split()[-1])) for line in metrics.splitlines()
                 if line.startswith("toolcanary_simulator_tasks_known "))
    in_memory = next(int(float(line.split()[-1])) for line in metrics.splitlines()
                     if line.startswith("toolcanary_simulator_tasks_in_memory "))
    fives = sum(n for status, n in statuses.items() if status >= 500)
    mib = 1 << 20
    drill("simulator soak", seconds=f"{result['seconds']:.0f}", episodes=result["episodes"],
          calls=result["calls"], http_5xx=fives, other_non_200=sum(n for s, n in statuses.items() if 400 <= s < 500),
          task_keys=known, tasks_in_memory=in_memory,
          rss=f"{after_first_minute / mib:.1f} MiB after {FIRST_MINUTE_S:.0f} s -> {at_end / mib:.1f} MiB at the end "
              f"({growth:+.1%})")
    assert fives == 0 and set(statuses) == {200}, statuses
    assert result["episodes"] > EPISODES_IN_FLIGHT  # every loop finished several episodes
    assert growth <= TOLERANCE, [(round(at), round(value / mib, 1)) for at, value in samples]
