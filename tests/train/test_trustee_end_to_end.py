"""The trustee mode end to end on CPU: the agent loop (trustee) against the real simulator service (llm backend,
trustee mode, a TRUSTEE-shaped checkout) in front of a stub OpenAI-compatible model.

The stub model answers each role by the marker its placeholder template writes (AUTHOR, TOOL, USER, VERIFY), so
the test follows one episode through both processes: TRUSTEE's author messages, the ToolBench call with string
defaults reaching the tool role, the system prompt given to the verifier as the original query, and a
fractional verifier score that survives the contract and becomes the episode's reward.
Run: .venvs/train/bin/python -m pytest tests/train/test_trustee_end_to_end.py -q
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time

import httpx
from aiohttp import web
from conftest import ReplayClient, make_spec, run_episodes

from toolcanary.common.loopback import free_port
from toolcanary.contract.hermes import render_tool_call

ANSWERS = {
    "AUTHOR": {"expected_tool_calls": ["messages/send"], "user_intent": "send the weekly report",
               "user_persona": "an expert", "first_user_query": "Send the weekly report, please."},
    "TOOL": {"result": {"status": "sent"}, "reward": 1},
    "USER": {"response": "Thanks!", "reward": 1},
    "VERIFY": {"reward": 0.5, "reasoning": "sent, but slowly"},
}


class StubModel:
    """A chat-completions server on 127.0.0.1 that answers by role marker and keeps every request."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/health", lambda _: web.Response(text="ok"))
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        marker = body["messages"][-1]["content"].split(" ", 1)[0]
        content = "<think>\nfine\n</think>\n\n" + json.dumps(ANSWERS[marker])
        return web.json_response({"choices": [{"message": {"content": content}}],
                                  "usage": {"prompt_tokens": 10, "completion_tokens": 5}})

    def __enter__(self) -> StubModel:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)
        return self

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)


def test_one_trustee_episode_through_the_real_simulator(tokenizer, trustee_checkout, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLCANARY_SIMULATOR_TOKEN", "e2e-token-of-the-test")  # the simulator's and the trainer's
    with StubModel() as model:
        port = free_port()
        command = [sys.executable, "-m", "toolcanary.simulator", "serve", "--host", "127.0.0.1", "--port", str(port),
                   "--backend", "llm", "--mode", "trustee", "--trustee-dir", str(trustee_checkout), "--run", "e2e",
                   "--runs-dir", str(tmp_path / "runs"), "--upstream", model.url, "--log-level", "warning"]
        server = subprocess.Popen(command, env=dict(os.environ))
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                assert server.poll() is None, "the simulator exited during startup"
                try:
                    if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "the simulator did not become ready"
                time.sleep(0.2)
            call = render_tool_call("messages/send", {"size": "500", "ids": "1,2"})
            (out,) = run_episodes(tokenizer, ReplayClient(tokenizer, [call, "Done: the report is sent."]), url,
                                  [make_spec("e2e", num_tools=2)], mode="trustee", trustee_dir=str(trustee_checkout))
        finally:
            server.terminate()
            server.wait(timeout=20)
    episode = out.extra_fields["episode"]
    assert episode.outcome == "ok" and episode.stop_reason == "assistant_turns"
    assert out.reward_score == 0.5 and episode.verifier_reward == 0.5
    markers = [r["messages"][-1]["content"].split(" ", 1)[0] for r in model.requests]
    assert markers == ["AUTHOR", "TOOL", "USER", "VERIFY"]  # level-1 caps: 3 generations, the last one over
    author, tool, verify = model.requests[0], model.requests[1], model.requests[-1]
    assert author["messages"][0]["role"] == "system" and "temperature" not in author
    call_text = json.loads(json.loads(tool["messages"][-1]["content"][len("TOOL "):])["call"])
    assert call_text["function"]["arguments"] == {"size": "500", "ids": "1,2"}
    verified = json.loads(verify["messages"][-1]["content"][len("VERIFY "):])
    assert verified["query"].startswith("SYSTEM level=") and verified["expected"] == ["messages/send"]
    assert verified["history"][0]["role"] == "system" and "<tool_call>" in verified["history"][2]["content"]
