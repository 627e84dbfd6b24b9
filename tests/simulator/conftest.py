"""Shared fixtures of the simulator tests: settings in a temporary runs root, in-process clients, a stub upstream.

Run: .venvs/simulator/bin/python -m pytest tests/simulator -q
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
import warnings
from collections import deque
from pathlib import Path

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).parent))  # `from conftest import serving` in the test modules
warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
from fastapi.testclient import TestClient  # noqa: E402

from toolcanary.common.loopback import free_port  # noqa: E402
from toolcanary.contract import SimulatedTask  # noqa: E402
from toolcanary.simulator.app import create_app  # noqa: E402
from toolcanary.simulator.settings import SimulatorSettings  # noqa: E402


def difficulty(**overrides) -> dict:
    base = {"num_tools": 4, "expected_calls": 1, "user_persona": 0, "query_ambiguity": 0, "expected_turns": 0}
    return base | overrides


@pytest.fixture
def settings(tmp_path) -> SimulatorSettings:
    return SimulatorSettings(run="test", runs_dir=tmp_path / "runs")


@pytest.fixture
def make_client(tmp_path):
    """`make_client(**settings)` -> a started TestClient; every client is closed at the end of the test."""
    clients = []

    def make(**overrides) -> TestClient:
        values = {"run": "test", "runs_dir": tmp_path / "runs"} | overrides
        client = TestClient(create_app(SimulatorSettings(**values)))
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client):
    return make_client()


def _new_task(client, key="g0", **diff) -> dict:
    response = client.post("/v1/task", json={"task_key": key, "difficulty": difficulty(**diff)})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["outcome"] == "ok", body
    return body["task"]


def _issue(client, task: dict) -> dict:
    made = SimulatedTask.model_validate(task)
    client.app.state.service.registry.add(made.difficulty, made)
    return task


@pytest.fixture
def issue():
    """`issue(client, task)` registers a hand-made task in the simulator behind `client` as issued under its
    key (the roles refuse tasks they did not issue); returns the task."""
    return _issue


@pytest.fixture
def new_task():
    """`new_task(client, key, **difficulty)` -> the task dict of a successful POST /v1/task."""
    return _new_task


@pytest.fixture
def diff():
    """`diff(**overrides)` -> a difficulty dict with small defaults."""
    return difficulty


class StubUpstream:
    """A fake OpenAI-compatible chat server on 127.0.0.1, answering from a queue of scripted replies.

    Each reply is (status, content, delay_s) or (status, content, delay_s, headers), or a function of the request
    body returning one; `headers` go with an error status. When the queue is empty, `default` is used. Requests are kept in `requests`. GET /health and GET /v1/models answer with
    `health_status` and `models_status` (vLLM has both; None leaves a route out, as a server without it) and
    count their hits in `probes`. `port` reuses a port, to bring a stopped upstream back.
    """

    def __init__(self, default=(200, '{"result": "ok", "reward": 1}', 0.0), port: int | None = None,
                 health_status: int | None = 200, models_status: int | None = 200) -> None:
        self.default, self.replies, self.requests = default, deque(), []
        self.health_status, self.models_status, self.probes = health_status, models_status, []
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        routes = [Route("/v1/chat/completions", self._chat, methods=["POST"])]
        if health_status is not None:
            routes.append(Route("/health", self._probe, methods=["GET"]))
        if models_status is not None:
            routes.append(Route("/v1/models", self._probe, methods=["GET"]))
        app = Starlette(routes=routes)
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    async def _probe(self, request: Request) -> Response:
        self.probes.append(request.url.path)
        status = self.health_status if request.url.path == "/health" else self.models_status
        return JSONResponse({"object": "list", "data": [{"id": "stub"}]}, status_code=status)

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        reply = self.replies.popleft() if self.replies else self.default
        status, content, delay, *headers = reply(body) if callable(reply) else reply
        if delay:
            await asyncio.sleep(delay)
        if status != 200:
            return Response("internal error", status_code=status, headers=headers[0] if headers else None)
        usage = {"prompt_tokens": len(body["messages"][0]["content"]) // 4, "completion_tokens": len(content) // 4}
        return JSONResponse({"id": "cmpl", "object": "chat.completion", "model": body["model"],
                             "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                          "finish_reason": "stop"}], "usage": usage})

    def push(self, *replies) -> None:
        for reply in replies:
            self.replies.append(reply if isinstance(reply, tuple) or callable(reply) else (200, reply, 0.0))

    def reset(self) -> None:
        self.replies.clear()
        self.requests.clear()

    def start(self) -> StubUpstream:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "stub upstream did not start"
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def upstreams():
    """Two stub upstreams for the module; tests reset them before use."""
    stubs = [StubUpstream().start(), StubUpstream().start()]
    yield stubs
    for stub in stubs:
        stub.stop()


@pytest.fixture
def stub_factory():
    """`stub_factory(default, port=..., health_status=...)` -> a started StubUpstream, stopped at the end."""
    stubs = []

    def make(default=(200, '{"result": "ok", "reward": 1}', 0.0), **options) -> StubUpstream:
        stub = StubUpstream(default, **options).start()
        stubs.append(stub)
        return stub

    yield make
    for stub in stubs:
        stub.stop()


@pytest.fixture
def trustee(make_client, upstreams, trustee_checkout):
    """`trustee(**settings)`: a client of a trustee-mode llm simulator on the first stub upstream (quick retries)."""
    for stub in upstreams:
        stub.reset()

    def make(**overrides):
        values = {"backend": "llm", "mode": "trustee", "trustee_dir": trustee_checkout,
                  "upstreams": [upstreams[0].url], "timeout_s": 0.5, "backoff_s": 0.01, "backoff_s_task": 0.01}
        return make_client(**(values | overrides))

    return make


@contextlib.contextmanager
def serving(tmp_path, head_timeout_s: float = 1.0, **overrides):
    """The simulator served by uvicorn under its real server configuration, in a thread; (base URL, port)."""
    from toolcanary.simulator.server import server_config

    settings = SimulatorSettings(**{"run": "test", "runs_dir": tmp_path / "runs", "port": free_port(),
                                    "head_timeout_s": head_timeout_s, "limit_concurrency": 1000,
                                    "log_level": "warning", **overrides})
    server = uvicorn.Server(server_config(create_app(settings), settings))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the simulator did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{settings.port}", settings.port
    finally:
        server.should_exit = True
        thread.join(timeout=10)
