"""Calls to OpenAI-compatible chat servers (vLLM), spread over several base URLs.

Each request goes to the upstream with the fewest requests in flight, ties broken round-robin, so a slow server
gets less work. One attempt = one HTTP request under a hard timeout; failures are classified (`timeout` or
`upstream`) and raised as `UpstreamError` for the caller's retry loop. Each request is counted per upstream.
The client is aiohttp: httpx's AsyncClient stalls at high concurrency (encode/httpx#3215; measured in LOG.md),
far below what the simulator must sustain.

`unavailable()` is the simulator's /health probe: GET <root>/health of every upstream (vLLM's liveness
endpoint, outside /v1), or GET <root>/v1/models where /health is 404 (an OpenAI-compatible server that is not
vLLM), each under a short timeout, all at once, and cached for a few seconds so that health checks cost the
upstreams next to nothing.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from dataclasses import dataclass

import aiohttp

from toolcanary.simulator.metrics import Metrics
from toolcanary.simulator.settings import SimulatorSettings

log = logging.getLogger(__name__)


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    upstream: str


class UpstreamError(Exception):
    def __init__(self, cause: str, detail: str) -> None:
        self.cause, self.detail = cause, detail
        super().__init__(f"{cause}: {detail}")


def chat_url(base: str) -> str:
    base = base.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    return base + ("/chat/completions" if base.endswith("/v1") else "/v1/chat/completions")


def probe_urls(base: str) -> tuple[str, str]:
    """(the /health URL, the /v1/models URL) of an upstream given as `http://host:port[/v1]`."""
    root = base.rstrip("/").removesuffix("/chat/completions").removesuffix("/v1")
    return f"{root}/health", f"{root}/v1/models"


class UpstreamPool:
    def __init__(self, settings: SimulatorSettings, metrics: Metrics) -> None:
        if not settings.upstreams:
            raise ValueError("the llm backend needs at least one upstream: pass --upstream URL or set "
                             "TOOLCANARY_SIMULATOR_UPSTREAMS")
        self.settings, self.metrics = settings, metrics
        self.urls = [chat_url(u) for u in settings.upstreams]
        self.in_flight = dict.fromkeys(self.urls, 0)
        self._turn = itertools.count()
        self.headers = {"Authorization": f"Bearer {settings.upstream_api_key}"} if settings.upstream_api_key else {}
        self._session: aiohttp.ClientSession | None = None
        # (time of the last probe, what it found): /health reuses it for health_cache_s seconds.
        self._health: tuple[float, list[dict[str, str]]] | None = None
        self._health_lock = asyncio.Lock()

    def _client(self) -> aiohttp.ClientSession:
        # Created on first use: an aiohttp session belongs to the running event loop.
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers=self.headers,
                timeout=aiohttp.ClientTimeout(total=max(self.settings.timeout_s, self.settings.timeout_s_task)),
                connector=aiohttp.TCPConnector(limit=0, limit_per_host=0),
            )
        return self._session

    def pick(self) -> str:
        start = next(self._turn) % len(self.urls)
        order = self.urls[start:] + self.urls[:start]
        return min(order, key=lambda url: self.in_flight[url])

    async def complete(self, messages: list[dict[str, str]], max_tokens: int, timeout_s: float,
                       author: bool = False) -> Completion:
        """One chat completion of `messages`; sampling values the settings leave at None are not sent, and the
        frequency penalty goes with role calls only (TRUSTEE's task author sends none).

        Raises:
            UpstreamError: timeout, connection failure, an HTTP error status or a malformed body.
        """
        url = self.pick()
        body: dict = {"model": self.settings.model, "messages": messages, "max_tokens": max_tokens,
                      "chat_template_kwargs": {"enable_thinking": self.settings.enable_thinking}}
        if self.settings.temperature is not None:
            body["temperature"] = self.settings.temperature
        if self.settings.frequency_penalty is not None and not author:
            body["frequency_penalty"] = self.settings.frequency_penalty
        self.in_flight[url] += 1
        result = "ok"
        try:
            status, raw = await asyncio.wait_for(self._post(url, body), timeout_s)
            if status >= 400:
                result = f"http_{status // 100}xx"
                raise UpstreamError("upstream", f"{url} answered HTTP {status}: {raw[:200]!r}")
            try:
                data = json.loads(raw)
                message = data["choices"][0]["message"]
                text = message.get("content") or ""
                usage = data.get("usage") or {}
            except (ValueError, KeyError, IndexError, TypeError, AttributeError) as err:
                result = "malformed"
                raise UpstreamError("upstream", f"{url} sent a body that is not a chat completion: {err!r}") from err
            return Completion(text, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0),
                              url)
        except TimeoutError as err:
            result = "timeout"
            raise UpstreamError("timeout", f"{url} did not answer within {timeout_s:g} s") from err
        except aiohttp.ClientError as err:
            result = "connect_error"
            raise UpstreamError("upstream", f"{url}: {type(err).__name__}: {err}") from err
        finally:
            self.in_flight[url] -= 1
            self.metrics.inc("upstream_requests_total", upstream=url, result=result)

    async def _post(self, url: str, body: dict) -> tuple[int, bytes]:
        async with self._client().post(url, json=body) as response:
            return response.status, await response.read()

    async def unavailable(self) -> list[dict[str, str]]:
        """The upstreams that fail a health probe now, each as {"upstream", "url", "error"}; [] when all answer.

        One probe round at a time (concurrent callers share it); its result is reused for health_cache_s.
        """
        async with self._health_lock:
            if self._health is not None and time.monotonic() - self._health[0] < self.settings.health_cache_s:
                return self._health[1]
            found = [p for p in await asyncio.gather(*map(self._probe, self.settings.upstreams)) if p]
            was_down = bool(self._health and self._health[1])
            self._health = (time.monotonic(), found)
        for problem in found:
            log.warning("upstream %s is not healthy: %s: %s", problem["upstream"], problem["url"], problem["error"])
        if was_down and not found:
            log.info("every upstream answers its health probe again")
        return found

    async def _probe(self, base: str) -> dict[str, str] | None:
        health, models = probe_urls(base)
        url = health
        try:
            status = await self._status(health)
            if status == 404:
                # Not vLLM: an OpenAI-compatible server need not have /health, but it must list its models.
                url = models
                status = await self._status(models)
        except TimeoutError:
            return {"upstream": base, "url": url, "error": f"no answer within {self.settings.health_timeout_s:g} s"}
        except aiohttp.ClientError as err:
            return {"upstream": base, "url": url, "error": f"{type(err).__name__}: {err}"}
        if status != 200:
            return {"upstream": base, "url": url, "error": f"HTTP {status} (expected 200)"}
        return None

    async def _status(self, url: str) -> int:
        timeout = self.settings.health_timeout_s
        # The outer bound also covers a server that accepts the connection and then never answers.
        async with asyncio.timeout(timeout):
            async with self._client().get(url, timeout=aiohttp.ClientTimeout(total=timeout)) as response:
                return response.status

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
