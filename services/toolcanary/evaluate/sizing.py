"""How large one evaluation pass may be: the per-request output cap, the client threads and the stall guard.

Thinking-mode Qwen3 writes a reasoning trace before every answer, and bfcl-eval sends no `max_tokens`, so one
request may run to the end of the served context (40,960 tokens) and a pass of the 17 categories (about 14,000
requests, multi-turn ones included) can run for many hours. Each setting at 0 is derived here, once per pass,
from what the server reported in the preflight probe and the pass's item count; a value set explicitly wins:

    max_tokens       min(8,192, context / 4): room for a reasoning trace and an answer on every turn. A
                     response cut at the cap (finish_reason "length") is never scored as BFCL would score it:
                     the item's outcome is "truncated", counted wrong (toolcanary.evaluate.bfcl_files), since
                     a cut answer without a call is exactly what BFCL credits as a correct abstention.
    threads          as many requests as the server's KV cache holds at once, each with the cap plus 2,048
                     prompt tokens (vLLM's `vllm:cache_config_info` metric: blocks x block size), between 1
                     and 64 and never more than the items; 8 when the server does not publish its cache size.
                     With `passes_at_once` passes sharing the server, each pass sizes for its share of the cache.
                     More would only queue inside vLLM, where the wait counts against the request timeout.
    stall_timeout_s  (retries + 1) x request timeout + 60 s: the longest one request may legitimately take.
                     A phase in which no item finishes and bfcl-eval writes nothing for that long is stopped
                     and refused (a --resume keeps every answer). A phase that progresses is never cut, unless
                     `phase_timeout_s` sets a hard limit.

    sizing = plan(settings, served_max_model_len=40960, kv_cache_tokens=420_000, items=4441)
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import httpx

from toolcanary.contract.errors import ContractError
from toolcanary.evaluate.settings import EvalSettings

log = logging.getLogger(__name__)

MAX_TOKENS_CEILING = 8192
PROMPT_ALLOWANCE = 2048
MAX_THREADS = 64
FALLBACK_THREADS = 8
CACHE_INFO = re.compile(r"^vllm:cache_config_info\{(?P<labels>[^}]*)\}", re.MULTILINE)
LABEL = re.compile(r'(\w+)="([^"]*)"')


@dataclass(frozen=True)
class PassSizing:
    max_tokens: int
    threads: int
    stall_timeout_s: float
    phase_timeout_s: float | None
    """None: no hard limit; the stall guard alone stops a phase."""
    derived_from: str
    """One line saying where each derived value came from, for the log and the manifest."""


def plan(settings: EvalSettings, served_max_model_len: int | None, kv_cache_tokens: int | None,
         items: int) -> PassSizing:
    """The pass's sizes: explicit settings as given, zeros derived (module docstring).

    Raises:
        ContractError: an explicit `max_tokens` the served context cannot hold.
    """
    notes = []
    max_tokens = settings.max_tokens
    if max_tokens and served_max_model_len and max_tokens >= served_max_model_len:
        raise ContractError("TOOLCANARY_EVALUATE_MAX_TOKENS", f"fewer than the served context's "
                            f"{served_max_model_len} tokens (the prompt needs room too)", str(max_tokens),
                            "Lower --max-tokens, or 0 to derive it from the served context")
    if not max_tokens:
        max_tokens = min(MAX_TOKENS_CEILING, served_max_model_len // 4) if served_max_model_len else MAX_TOKENS_CEILING
        notes.append(f"max_tokens {max_tokens} from a context of {served_max_model_len or 'unreported'} tokens")
    threads = settings.threads
    if not threads:
        if kv_cache_tokens:
            share = kv_cache_tokens // settings.passes_at_once
            threads = max(1, min(MAX_THREADS, share // (max_tokens + PROMPT_ALLOWANCE)))
            notes.append(f"threads {threads} from a KV cache of {kv_cache_tokens} tokens"
                         + (f" shared by {settings.passes_at_once} passes" if settings.passes_at_once > 1 else ""))
        else:
            threads = FALLBACK_THREADS
            notes.append(f"threads {threads}: the server does not publish its KV-cache size")
        threads = max(1, min(threads, items))
    stall = settings.stall_timeout_s or (settings.request_retries + 1) * settings.request_timeout_s + 60.0
    if not settings.stall_timeout_s:
        notes.append(f"stall guard {stall:.0f} s from {settings.request_retries + 1} tries of "
                     f"{settings.request_timeout_s:.0f} s")
    return PassSizing(max_tokens=max_tokens, threads=threads, stall_timeout_s=stall,
                      phase_timeout_s=settings.phase_timeout_s or None,
                      derived_from="; ".join(notes) or "every size set explicitly")


def kv_cache_tokens(base_url: str, timeout_s: float = 10.0) -> int | None:
    """Tokens the server's KV cache holds (vLLM's Prometheus `vllm:cache_config_info`), or None when the
    server publishes no such metric; only a sizing hint, so an unreadable /metrics is logged, not raised."""
    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        response = httpx.get(f"{root}/metrics", timeout=timeout_s)
        response.raise_for_status()
    except httpx.HTTPError as err:
        log.info("sizing: no KV-cache size from %s/metrics (%s)", root, err)
        return None
    for match in CACHE_INFO.finditer(response.text):
        labels = dict(LABEL.findall(match["labels"]))
        try:
            blocks, block_size = int(labels["num_gpu_blocks"]), int(labels["block_size"])
        except (KeyError, ValueError):
            continue
        if blocks > 0 and block_size > 0:
            return blocks * block_size
    return None


def duration_text(seconds: float) -> str:
    """'2 h 05 min', '12 min', '40 s'."""
    if seconds >= 3600:
        return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"
