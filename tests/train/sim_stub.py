"""A programmable simulator stub on 127.0.0.1 that speaks the contract's four role endpoints and readiness.

Used where the real scripted simulator cannot produce a case (HTTP 500s, 4xx, hangs, aborted roles, another
contract version, fixed latency for the benchmark). It runs aiohttp in its own thread and records every
request it received. Like the real simulator it keeps the task it answered per key, and refuses (422) a role
request whose `task_key` it never answered.

The rollout benchmark runs it in a process of its own, as the simulator runs, so that its CPU is not counted
against the trainer: it prints its URL, serves until its standard input closes, then prints the number of
requests per role as JSON.

    python tests/train/sim_stub.py --delay-s 0.1 --per-episode-results
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field

from aiohttp import web

from toolcanary.contract import CONTRACT_VERSION
from toolcanary.contract.simulator_api import TaskRequest, ToolRequest, UserRequest, VerifyRequest

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Local time of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@dataclass
class StubBehaviour:
    """What each role answers. `fail[role]` is one of: aborted, hang, or httpNNN (an HTTP error status).

    `fail_from_step`: failures apply only to requests of that step and later. `contract_version`, `mode`,
    `trustee_commit` and `ready_status` shape the readiness answer (GET /v1/ready and /health); `token`, when
    set, is required on /v1/* as the real simulator requires it. `per_episode_results`: each tool result names
    its episode and differs from every other, as a real simulator's do (identical results would flatter any
    render cache).
    """

    delay_s: float = 0.0
    fail: dict[str, str] = field(default_factory=dict)
    fail_from_step: int = 0
    user_replies: list[str] = field(default_factory=list)
    verify_reward: int | None = None  # None: 1 when the expected tool was called (or, abstention, nothing)
    contract_version: str = CONTRACT_VERSION
    mode: str | None = "toolcanary"  # None: left out, as a simulator of contract 1.4 answers
    trustee_commit: str | None = None
    run: str | None = None  # None: the trainer's run, as TOOLCANARY_TRAIN_RUN says here, else "drill"
    ready_status: int = 200
    token: str | None = None
    per_episode_results: bool = False
    failing_task_keys: tuple[str, ...] = ()  # the author gives up on these keys
    oversized_task_keys: tuple[str, ...] = ()  # these keys' tasks offer a tool with a very long description


class StubSimulator:
    def __init__(self, behaviour: StubBehaviour | None = None) -> None:
        self.behaviour = behaviour or StubBehaviour()
        self.requests: dict[str, list[dict]] = {"task": [], "tool": [], "user": [], "verify": []}
        self.tasks: dict[str, dict] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.url = ""

    def __enter__(self) -> StubSimulator:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._release.set)  # lets hanging handlers finish
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _start(self) -> None:
        self._release = asyncio.Event()
        app = web.Application()
        for role in self.requests:
            app.router.add_post(f"/v1/{role}", self._handler(role))
        async def health(request: web.Request) -> web.Response:
            if request.path.startswith("/v1/") and not self._authorized(request):
                return web.json_response({"error": "missing or wrong bearer token", "detail": []}, status=401)
            if self.behaviour.ready_status != 200:
                return web.json_response({"error": "simulator unavailable: stub not ready", "detail": []},
                                         status=self.behaviour.ready_status)
            rules = {"mode": self.behaviour.mode, "trustee_commit": self.behaviour.trustee_commit}
            return web.json_response({"status": "ok", "contract_version": self.behaviour.contract_version,
                                      "backend": "scripted", "probe": "ready",
                                      "run": self.behaviour.run or os.environ.get("TOOLCANARY_TRAIN_RUN", "drill"),
                                      **({} if self.behaviour.mode is None else rules)})

        app.router.add_get("/health", health)
        app.router.add_get("/v1/ready", health)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def _authorized(self, request: web.Request) -> bool:
        token = self.behaviour.token
        return token is None or request.headers.get("Authorization") == f"Bearer {token}"

    def _handler(self, role: str):
        async def handle(request: web.Request) -> web.Response:
            body = await request.json()
            self.requests[role].append(body)
            if not self._authorized(request):
                return web.json_response({"error": "missing or wrong bearer token", "detail": []}, status=401)
            if self.behaviour.delay_s:
                await asyncio.sleep(self.behaviour.delay_s)
            failure = self.behaviour.fail.get(role) if (body.get("step") or 0) >= self.behaviour.fail_from_step \
                else None
            if failure and failure.startswith("http"):
                return web.json_response({"error": f"stub failure {failure}", "detail": []}, status=int(failure[4:]))
            if failure == "hang":
                await self._release.wait()
                return web.Response(status=503, text="stub shutting down")
            if failure == "aborted":
                return web.json_response({"outcome": "aborted", "abort_cause": "timeout", "abort_detail": "stub"})
            if role != "task" and body.get("task_key") not in self.tasks:
                # As the real simulator: the roles play only the tasks /v1/task answered.
                return web.json_response({"error": f"task_key {body.get('task_key')!r}: never issued",
                                          "detail": [{"field": "task_key"}]}, status=422)
            answer = getattr(self, f"_{role}")(body)
            answer.setdefault("prompt_tokens", 10)
            answer.setdefault("completion_tokens", 5)
            return web.json_response(answer)
        return handle

    def _task(self, body: dict) -> dict:
        request = TaskRequest.model_validate(body)
        if request.task_key in self.behaviour.failing_task_keys:
            return {"outcome": "aborted", "abort_cause": "parse", "abort_detail": "stub author"}
        if request.task_key not in self.tasks:
            expected = request.difficulty.call_expected
            self.tasks[request.task_key] = {
                "task_id": f"t-{len(self.tasks)}", "task_key": request.task_key, "category": "weather",
                "tools": [WEATHER, TIME][: max(1, min(2, request.difficulty.num_tools))],
                "expected_tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}] if expected else [],
                "user_intent": "know the weather in Paris" if expected else "hear a joke",
                "user_persona": "expert", "first_user_query": "Weather in Paris?" if expected else "Tell me a joke.",
                "difficulty": request.difficulty.model_dump(), "call_expected": expected,
            }
            if request.task_key in self.behaviour.oversized_task_keys:
                tools = self.tasks[request.task_key]["tools"] = [dict(t) for t in self.tasks[request.task_key]["tools"]]
                tools[0]["function"] = {**tools[0]["function"], "description": "weather " * 6000}
        return {"task": self.tasks[request.task_key]}

    def _tool(self, body: dict) -> dict:
        request = ToolRequest.model_validate(body)
        name, args = request.call.function.name, request.call.function.arguments
        result = f"{name}({args}) = sunny, 21 C"
        if self.behaviour.per_episode_results:
            result += f", observed for {request.episode_id} at station {len(self.requests['tool'])}"
        return {"result": result, "reward": 1 if name == "get_weather" else 0}

    def _user(self, body: dict) -> dict:
        UserRequest.model_validate(body)
        replies = self.behaviour.user_replies
        if replies:
            return {"reply": replies.pop(0), "reward": 0}
        return {"reply": "", "reward": 1, "done": True}

    def _verify(self, body: dict) -> dict:
        request = VerifyRequest.model_validate(body)
        if self.behaviour.verify_reward is not None:
            return {"reward": self.behaviour.verify_reward, "reasoning": "fixed"}
        called = any(getattr(m, "tool_calls", None) for m in request.trajectory)
        good = called if self.tasks[request.task_key]["call_expected"] else not called
        return {"reward": 1 if good else -1, "reasoning": "stub"}


def wait_until(predicate, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description="Serve the simulator stub until standard input closes.")
    parser.add_argument("--delay-s", type=float, default=0.0, help="seconds every role call waits")
    parser.add_argument("--per-episode-results", action="store_true", help="tool results differ per episode")
    args = parser.parse_args()
    with StubSimulator(StubBehaviour(delay_s=args.delay_s, per_episode_results=args.per_episode_results)) as sim:
        print(sim.url, flush=True)
        sys.stdin.read()
        print(json.dumps({role: len(requests) for role, requests in sim.requests.items()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
