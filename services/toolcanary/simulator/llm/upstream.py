"""Calls to OpenAI-compatible chat servers (vLLM), spread over several base URLs.

Each request goes to the upstream with the fewest requests in flight, ties broken round-robin, so a slow server
gets less work. One attempt = one HTTP request under a hard timeout; failures are classified (`timeout` or
`upstream`) and raised as `UpstreamError` for the caller's retry loop. Each request is counted per upstream.
The client is aiohttp: httpx's AsyncClient stalls at high concurrency (encode/httpx#3215; measured in LOG.md),
far below what the simulator must sustain.

Within one attempt a request is re-sent (by tenacity) up to `sdk_retries` times (trustee mode 2, toolcanary
mode 0), by the rule of the OpenAI Python SDK's client (`_base_client.py` at openai 2.14.0, the version TRUSTEE
pins), whose default of 2 TRUSTEE keeps: a timeout or a connection error is re-sent; an HTTP error status is re-sent when
the answer's `x-should-retry` header says "true", never when it says "false", else for 408, 409, 429 and any
status from 500. The pause before the n-th re-send (n from 0) is what `Retry-After-Ms` (milliseconds), else
`Retry-After` (seconds, or an HTTP date) asks when that is more than 0 and at most 60 s, else
min(0.5 * 2**n, 8) s shortened by a random 0-25 %. Each request has its own timeout, as the SDK's has, and goes
to the least-loaded upstream. A body that is not a chat completion is not re-sent (the SDK reads it after its
loop).

`unavailable()` is the simulator's /health probe: GET <root>/health of every upstream (vLLM's liveness
endpoint, outside /v1), or GET <root>/v1/models where /health is 404 (an OpenAI-compatible server that is not
vLLM), each under a short timeout, all at once, and cached for a few seconds so that health checks cost the
upstreams next to nothing.
"""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import json
import logging
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import aiohttp
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from toolcanary.simulator.metrics import Metrics
from toolcanary.simulator.settings import SimulatorSettings

log = logging.getLogger(__name__)


# The OpenAI SDK's retry pacing (openai 2.14.0, `_constants.py` and `_base_client.py`).
SDK_FIRST_DELAY_S = 0.5
SDK_MAX_DELAY_S = 8.0
SDK_MAX_RETRY_AFTER_S = 60.0


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    upstream: str
    resends: int = 0  # requests re-sent within the attempt before this answer came


class UpstreamError(Exception):
    """A request that failed: `cause` is `timeout` or `upstream`; `resendable` whether the SDK's rule re-sends it
    (with the failed answer's `headers`, for its pause); `resends` the re-sends made before it gave up."""

    def __init__(self, cause: str, detail: str, resendable: bool = False,
                 headers: Mapping[str, str] | None = None) -> None:
        self.cause, self.detail, self.resendable, self.headers = cause, detail, resendable, headers
        self.resends = 0
        super().__init__(f"{cause}: {detail}")


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    """A header's value as httpx reads it (the SDK's client): repeated headers joined with ", "."""
    if headers is None:
        return None
    getall = getattr(headers, "getall", None)
    values = getall(name, []) if getall is not None else ([headers[name]] if name in headers else [])
    return ", ".join(values) if values else None


def sdk_should_resend(status: int, headers: Mapping[str, str] | None) -> bool:
    """Whether the OpenAI SDK re-sends a request answered with this error status (400 or more)."""
    verdict = _header(headers, "x-should-retry")
    if verdict in ("true", "false"):  # the server says, and the SDK obeys
        return verdict == "true"
    return status in (408, 409, 429) or status >= 500


def _retry_after_s(headers: Mapping[str, str] | None) -> float | None:
    """The wait an answer asks for, in seconds, read as the SDK reads it (None: it asks for none)."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = _header(headers, name)
        if value is None:
            continue
        try:
            return float(value) / scale
        except ValueError:
            continue
    try:
        date = email.utils.parsedate_tz(_header(headers, "retry-after"))
        return None if date is None else float(email.utils.mktime_tz(date) - time.time())
    except (ValueError, OverflowError):  # a date no clock can reach: no wait asked
        return None


def sdk_resend_delay_s(resent: int, headers: Mapping[str, str] | None = None) -> float:
    """The SDK's pause before a re-send, `resent` re-sends having been made before it."""
    asked = _retry_after_s(headers)
    if asked is not None and 0 < asked <= SDK_MAX_RETRY_AFTER_S:
        return asked
    backoff = min(SDK_FIRST_DELAY_S * 2.0 ** min(resent, 1000), SDK_MAX_DELAY_S)
    return max(0.0, backoff * (1 - 0.25 * random.random()))


def chat_url(base: str) -> str:
    base = base.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    return base + ("/chat/completions" if base.endswith("/v1") else "/v1/chat/completions")


def without_credentials(url: str) -> str:
    """`url` with any `user:password@` part removed (what a log line may show)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


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
        # Each upstream by index in answers, records and metrics: a URL may carry credentials, and /health is
        # open to anyone who reaches the port. The start log pairs each index with its URL, credentials removed.
        self.names = {url: f"upstream {n}" for n, url in enumerate(self.urls, 1)}
        self.names |= {base: f"upstream {n}" for n, base in enumerate(settings.upstreams, 1)}
        self._secrets = [urlsplit(u).netloc.rpartition("@")[0] for u in settings.upstreams if "@" in urlsplit(u).netloc]
        if self._secrets and settings.upstream_api_key:
            with_credentials = [self.names[u] for u in settings.upstreams if "@" in urlsplit(u).netloc]
            raise ValueError(f"{', '.join(with_credentials)}: the URL carries user:password and "
                             "TOOLCANARY_SIMULATOR_UPSTREAM_API_KEY is set too; give the credentials once: the API "
                             "key, or user:password in the URL")
        for n, base in enumerate(settings.upstreams, 1):
            log.info("upstream %d: %s", n, without_credentials(base))
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
        frequency penalty goes with role calls only (TRUSTEE's task author sends none). A failed request is
        re-sent by the SDK's rule (module docstring), at most `sdk_retries` times.

        Raises:
            UpstreamError: timeout, connection failure, an HTTP error status or a malformed body, after the
                re-sends (`resends` says how many were made).
        """
        body: dict = {"model": self.settings.model, "messages": messages, "max_tokens": max_tokens,
                      "chat_template_kwargs": {"enable_thinking": self.settings.enable_thinking}}
        if self.settings.temperature is not None:
            body["temperature"] = self.settings.temperature
        if self.settings.frequency_penalty is not None and not author:
            body["frequency_penalty"] = self.settings.frequency_penalty
        if self.settings.sdk_retries == 0:
            # Nothing to re-send (the toolcanary mode): one request, without the retry machinery's CPU per call.
            return await self._request(body, timeout_s)
        resends = 0

        def pause(state: RetryCallState) -> float:
            return sdk_resend_delay_s(state.attempt_number - 1, state.outcome.exception().headers)

        def resend(state: RetryCallState) -> None:
            nonlocal resends
            resends += 1
            log.info("re-sending a request (%d of %d) in %.2f s: %s", resends, self.settings.sdk_retries,
                     state.upcoming_sleep, state.outcome.exception())

        retrying = AsyncRetrying(stop=stop_after_attempt(1 + self.settings.sdk_retries), wait=pause,
                                 retry=retry_if_exception(lambda err: isinstance(err, UpstreamError) and err.resendable),
                                 before_sleep=resend, reraise=True)
        try:
            completion = await retrying(self._request, body, timeout_s)
        except UpstreamError as err:
            err.resends = resends
            raise
        completion.resends = resends
        return completion

    async def _request(self, body: dict, timeout_s: float) -> Completion:
        url = self.pick()
        self.in_flight[url] += 1
        result = "ok"
        try:
            status, headers, raw = await asyncio.wait_for(self._post(url, body), timeout_s)
            if status >= 400:
                result = f"http_{status // 100}xx"
                raise UpstreamError("upstream", f"{self.names[url]} answered HTTP {status}: {raw[:200]!r}",
                                    resendable=sdk_should_resend(status, headers), headers=headers)
            try:
                data = json.loads(raw)
                message = data["choices"][0]["message"]
                text = message.get("content") or ""
                usage = data.get("usage") or {}
            except (ValueError, KeyError, IndexError, TypeError, AttributeError) as err:
                result = "malformed"
                raise UpstreamError("upstream", f"{self.names[url]} sent a body that is not a chat completion: "
                                    f"{err!r}") from err
            return Completion(text, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0),
                              self.names[url])
        except TimeoutError as err:
            result = "timeout"
            raise UpstreamError("timeout", f"{self.names[url]} did not answer within {timeout_s:g} s",
                                resendable=True) from err
        except aiohttp.ClientError as err:
            result = "connect_error"
            raise UpstreamError("upstream", f"{self.names[url]}: {type(err).__name__}: {self.redact(str(err))}",
                                resendable=True) from err
        finally:
            self.in_flight[url] -= 1
            self.metrics.inc("upstream_requests_total", upstream=self.names[url], result=result)

    def redact(self, text: str) -> str:
        """`text` without any upstream's credentials (an error message may quote a URL)."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    async def _post(self, url: str, body: dict) -> tuple[int, Mapping[str, str], bytes]:
        async with self._client().post(url, json=body) as response:
            return response.status, response.headers, await response.read()

    async def unavailable(self) -> list[dict[str, str]]:
        """The upstreams that fail a health probe now, each as {"upstream", "probe", "error"} (the upstream by
        index, the probe's path); [] when all answer.

        One probe round at a time (concurrent callers share it); its result is reused for health_cache_s.
        """
        async with self._health_lock:
            if self._health is not None and time.monotonic() - self._health[0] < self.settings.health_cache_s:
                return self._health[1]
            found = [p for p in await asyncio.gather(*map(self._probe, self.settings.upstreams)) if p]
            was_down = bool(self._health and self._health[1])
            self._health = (time.monotonic(), found)
        for problem in found:
            log.warning("%s is not healthy: %s: %s", problem["upstream"], problem["probe"], problem["error"])
        if was_down and not found:
            log.info("every upstream answers its health probe again")
        return found

    async def _probe(self, base: str) -> dict[str, str] | None:
        health, models = probe_urls(base)
        url, name = health, self.names[base]
        try:
            status = await self._status(health)
            if status == 404:
                # Not vLLM: an OpenAI-compatible server need not have /health, but it must list its models.
                url = models
                status = await self._status(models)
        except TimeoutError:
            error = f"no answer within {self.settings.health_timeout_s:g} s"
        except (aiohttp.ClientError, ValueError) as err:  # ValueError: aiohttp refusing the URL itself
            error = f"{type(err).__name__}: {self.redact(str(err))}"
        else:
            if status == 200:
                return None
            error = f"HTTP {status} (expected 200)"
        return {"upstream": name, "probe": urlsplit(url).path, "error": error}

    async def _status(self, url: str) -> int:
        timeout = self.settings.health_timeout_s
        # The outer bound also covers a server that accepts the connection and then never answers.
        async with asyncio.timeout(timeout):
            async with self._client().get(url, timeout=aiohttp.ClientTimeout(total=timeout)) as response:
                return response.status

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
