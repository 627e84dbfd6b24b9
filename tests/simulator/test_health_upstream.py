"""/health of the llm backend fails while its upstream is down, over HTTP against the real service.

The simulator runs as `python -m toolcanary.simulator serve --backend llm` in a process of its own, in front of
stub upstreams on 127.0.0.1 that go down (stopped: connection refused), come back on the same port, hang, or
are OpenAI-compatible servers without vLLM's /health. /health must answer 503 naming the upstream and the
error while one is down, 200 again once it answers, within the probe's short timeout, and must not probe the
upstreams more than once per cache period. The scripted backend's /health is covered by test_http_limits.py.

Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_health_upstream.py -q
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from toolcanary.common.loopback import free_port

CACHE_S, TIMEOUT_S = 0.3, 0.5


@pytest.fixture
def simulator(tmp_path):
    """`simulator(*upstream_urls, cache_s=...)` -> the base URL of a started llm-backend simulator process."""
    started: list[subprocess.Popen] = []

    def start(*upstreams: str, cache_s: float = CACHE_S) -> str:
        port = free_port()
        # The probe settings through the environment, as the compose stack would set them.
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLCANARY_")} | {
            "TOOLCANARY_SIMULATOR_HEALTH_CACHE_S": str(cache_s), "TOOLCANARY_SIMULATOR_HEALTH_TIMEOUT_S": str(TIMEOUT_S)}
        log = (tmp_path / f"simulator-{port}.log").open("w")
        process = subprocess.Popen(
            [sys.executable, "-m", "toolcanary.simulator", "serve", "--insecure", "--backend", "llm", "--run", "health",
             "--runs-dir", str(tmp_path / "runs"), "--host", "127.0.0.1", "--port", str(port),
             "--upstream", *upstreams],
            env=env, stdout=log, stderr=subprocess.STDOUT)
        started.append(process)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (tmp_path / f"simulator-{port}.log").read_text()
            assert time.monotonic() < deadline, "the simulator did not listen within 60 s"
            try:
                httpx.get(f"{url}/metrics", timeout=1)
                return url
            except httpx.TransportError:
                time.sleep(0.1)

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=30)


def health_until(url: str, status: int, within_s: float = 10) -> httpx.Response:
    """GET /health until it answers `status` (bounded), returning that answer."""
    deadline = time.monotonic() + within_s
    while True:
        answer = httpx.get(f"{url}/health", timeout=5)
        if answer.status_code == status:
            return answer
        assert time.monotonic() < deadline, f"/health still answers {answer.status_code}: {answer.text}"
        time.sleep(0.05)


def test_health_fails_while_the_upstream_is_down_and_recovers_when_it_is_back(simulator, stub_factory):
    stub = stub_factory()
    url = simulator(stub.url)
    ok = health_until(url, 200)
    assert ok.json()["backend"] == "llm" and ok.json()["status"] == "ok"

    stub.stop()
    down = health_until(url, 503).json()
    assert "upstream 1 (/health:" in down["error"] and stub.url not in str(down), down  # by index, not URL
    assert "role calls would be aborted" in down["error"]
    [problem] = down["detail"]
    assert problem["upstream"] == "upstream 1" and problem["probe"] == "/health"
    assert "Connect" in problem["error"], problem  # aiohttp's ClientConnectorError: connection refused

    stub_factory(port=stub.port)
    assert health_until(url, 200).json()["run"] == "health"


def test_one_upstream_down_among_several_fails_health_and_is_the_one_named(simulator, stub_factory):
    up, down = stub_factory(), stub_factory(health_status=503)
    url = simulator(up.url, f"{down.url}/v1")
    body = health_until(url, 503).json()
    assert [p["upstream"] for p in body["detail"]] == ["upstream 2"]
    assert body["detail"][0]["error"] == "HTTP 503 (expected 200)"
    assert "upstream 1" not in body["error"]


def test_an_upstream_that_hangs_fails_within_the_probe_timeout(simulator, stub_factory):
    with socket.socket() as hung:
        # Listening but never accepting: connections complete, no answer ever comes.
        hung.bind(("127.0.0.1", 0))
        hung.listen(16)
        upstream = f"http://127.0.0.1:{hung.getsockname()[1]}"
        url = simulator(upstream)
        started = time.monotonic()
        answer = httpx.get(f"{url}/health", timeout=10)
        elapsed = time.monotonic() - started
    assert answer.status_code == 503, answer.text
    assert answer.json()["detail"][0]["error"] == f"no answer within {TIMEOUT_S:g} s"
    assert elapsed < TIMEOUT_S + 2, f"/health took {elapsed:.1f} s with a {TIMEOUT_S} s probe timeout"


def test_long_upstream_calls_in_flight_do_not_starve_health(simulator, stub_factory):
    """64 task calls wait on an upstream that takes 6 s per completion; /health, /health/live and
    /health/ready keep answering at once (role calls wait on the event loop, never block it)."""
    slow = stub_factory((200, '{"result": "ok"}', 6.0))
    url = simulator(slow.url)
    health_until(url, 200)
    difficulty = {"num_tools": 1, "expected_calls": 1, "user_persona": 0, "query_ambiguity": 0, "expected_turns": 0}

    def ask(index: int) -> None:
        with contextlib.suppress(httpx.HTTPError):
            httpx.post(f"{url}/v1/task", json={"task_key": f"slow-{index}", "difficulty": difficulty}, timeout=30)

    with ThreadPoolExecutor(64) as pool:
        for index in range(64):
            pool.submit(ask, index)
        deadline = time.monotonic() + 10
        while len(slow.requests) < 32:  # the calls are in flight: upstream is working on them
            assert time.monotonic() < deadline, f"only {len(slow.requests)} calls reached the upstream"
            time.sleep(0.05)
        for path in ("/health", "/health/live", "/health/ready"):
            started = time.monotonic()
            answer = httpx.get(f"{url}{path}", timeout=5)
            assert answer.status_code == 200 and time.monotonic() - started < 2, (path, answer.text)
        slow.stop()  # the waiting calls end now (connection closed) sooner


def test_a_server_without_vllms_health_route_is_probed_on_its_model_list(simulator, stub_factory):
    openai_like = stub_factory(health_status=None)  # GET /health is 404 there, /v1/models answers
    url = simulator(openai_like.url)
    health_until(url, 200)
    assert "/v1/models" in openai_like.probes
    neither = stub_factory(health_status=None, models_status=None)
    body = health_until(simulator(neither.url), 503).json()
    assert body["detail"][0] == {"upstream": "upstream 1", "probe": "/v1/models", "error": "HTTP 404 (expected 200)"}


def test_probes_are_cached_so_health_checks_cost_the_upstream_almost_nothing(simulator, stub_factory):
    stub = stub_factory()
    url = simulator(stub.url, cache_s=30)
    for _ in range(20):
        assert httpx.get(f"{url}/health", timeout=5).status_code == 200
    assert stub.probes == ["/health"], f"20 health checks within the cache period probed {len(stub.probes)} times"
    # Within the cache period a stopped upstream is not noticed yet: the cost of that saving, bounded by cache_s.
    stub.stop()
    assert httpx.get(f"{url}/health", timeout=5).status_code == 200


def test_the_probe_settings_are_serve_flags_too():
    from toolcanary.simulator.__main__ import _parser

    args = _parser().parse_args(["serve", "--health-timeout-s", "1.5", "--health-cache-s", "0"])
    assert (args.health_timeout_s, args.health_cache_s) == (1.5, 0.0)


def test_upstream_credentials_appear_in_no_answer_record_or_log(simulator, stub_factory, tmp_path):
    stub = stub_factory()
    secret = "s3cret-Pw"
    with_credentials = stub.url.replace("http://", f"http://alice:{secret}@")
    url = simulator(with_credentials)
    answers = [health_until(url, 200).text]
    stub.stop()
    answers.append(health_until(url, 503).text)
    answers.append(httpx.get(f"{url}/metrics", timeout=5).text)
    task = httpx.post(f"{url}/v1/task", json={"task_key": "k", "difficulty": {
        "num_tools": 1, "expected_calls": 1, "user_persona": 0, "query_ambiguity": 0, "expected_turns": 0}},
        timeout=60)
    answers.append(task.text)
    assert task.json()["outcome"] == "aborted" and "upstream 1" in task.json()["abort_detail"]
    files = [p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file()]  # records and the log
    assert all(secret not in text and "alice" not in text for text in answers + files)
