"""Guard preflight (toolcanary.evaluate.guards.PREFLIGHT): probe the server before a single BFCL item is sent.

Four checks, each a known way for bfcl-eval to report a wrong number without failing: the server must
list the expected model (a stale server would score another checkpoint), accept a tools request with
`tool_choice="auto"` (vLLM answers 400 without `--enable-auto-tool-choice`, which BFCL scores as
abstention), return a forced call as structured `tool_calls`, and never leave raw `<tool_call>` text in
`content` (the server runs without the hermes tool parser, so every call would score as abstention).

The probe also observes the chat-template thinking mode the server applies (`observe_thinking`), for the
pass manifest's `served_enable_thinking`; that observation never fails the probe.

Phase 2 of every pass (`toolcanary.evaluate.runner`), run by `python -m toolcanary.evaluate run`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import httpx

from toolcanary.contract.errors import ContractError
from toolcanary.contract.hermes import parse_assistant_text
from toolcanary.evaluate import guards

log = logging.getLogger(__name__)
PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
PROBE_MESSAGES = [{"role": "user", "content": "What is the weather in Paris? Call the get_weather tool."}]
FIX_PARSER = "Start vLLM with --enable-auto-tool-choice --tool-call-parser hermes (toolcanary.serve.command)"
THINKING_MESSAGES = [{"role": "user", "content": "Say hello."}]


@dataclass(frozen=True)
class ProbeReport:
    models: list[str]
    max_model_len: int | None
    forced_with: str
    enable_thinking: bool | None = None
    """The thinking mode the server's chat template applied (`observe_thinking`); None: not observed."""


def _fail(base_url: str, expected: str, got: str, fix: str) -> ContractError:
    return ContractError(f"preflight probe of {base_url}", expected, got, fix)


def _chat(client: httpx.Client, base_url: str, body: dict) -> httpx.Response:
    try:
        return client.post(f"{base_url}/chat/completions", json=body)
    except httpx.HTTPError as err:
        raise _fail(base_url, "an answer to a chat request", f"{type(err).__name__}: {err}",
                    "Check that the server is up and --base-url ends in /v1") from err


def _message(base_url: str, response: httpx.Response, what: str) -> dict:
    if response.status_code != 200:
        raise _fail(base_url, f"HTTP 200 for {what}", f"HTTP {response.status_code}: {response.text[:300]}",
                    FIX_PARSER)
    try:
        return response.json()["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise _fail(base_url, f"an OpenAI chat completion for {what}", repr(response.text[:300]), FIX_PARSER) from None


def _check_no_raw_calls(base_url: str, message: dict, what: str) -> None:
    # Only a *well-formed* call left in content proves the parser is missing: a parser leaves a call the
    # model malformed as text too, and that is the model's mistake, which BFCL should score.
    parsed = parse_assistant_text(message.get("content") or "")
    if parsed.malformed and not parsed.tool_calls:
        log.warning("probe: the model wrote a malformed call for %s (%s); the parser rightly kept it as text",
                    what, parsed.malformed[0].error)
    if parsed.tool_calls:
        raise _fail(base_url, f"structured tool_calls for {what}", "raw <tool_call> text in content "
                    "(the server runs without a tool parser; BFCL would score every call as abstention)",
                    FIX_PARSER)


@guards.enforces(guards.PREFLIGHT)
def probe(base_url: str, served_model: str, api_key: str = "EMPTY", timeout_s: float = 60.0,
          max_tokens: int | None = None) -> ProbeReport:
    """Run the four checks; raise ContractError naming the first that fails.

    max_tokens: the pass's explicit output cap, sent with the probe's requests too. Without it a policy that
    never ends its answer (a small CPU one) writes to the end of the served context, past the probe's timeout.
    """
    base_url = base_url.rstrip("/")
    headers = {"Authorization": f"Bearer {api_key}"}
    with httpx.Client(timeout=timeout_s, headers=headers) as client:
        try:
            listing = client.get(f"{base_url}/models")
            listing.raise_for_status()
            entries = listing.json()["data"]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as err:
            raise _fail(base_url, "GET /models listing the served models", f"{type(err).__name__}: {err}",
                        "Check that the server is up and --base-url ends in /v1") from err
        models = [str(entry.get("id")) for entry in entries]
        if served_model not in models:
            raise _fail(base_url, f"the served model {served_model!r}", f"models {models}",
                        "Serve the checkpoint under that name (--served-model-name) or pass --model with the listed name")
        max_len = next((e.get("max_model_len") for e in entries if e.get("id") == served_model), None)
        body = {"model": served_model, "messages": PROBE_MESSAGES, "tools": [PROBE_TOOL], "temperature": 0,
                **({"max_tokens": max_tokens} if max_tokens else {})}
        auto = _message(base_url, _chat(client, base_url, {**body, "tool_choice": "auto"}), 'tool_choice="auto"')
        _check_no_raw_calls(base_url, auto, 'tool_choice="auto"')
        forced_with, forced = "required", _chat(client, base_url, {**body, "tool_choice": "required"})
        if forced.status_code != 200:
            forced_with = "named"
            named = {"type": "function", "function": {"name": "get_weather"}}
            forced = _chat(client, base_url, {**body, "tool_choice": named})
        message = _message(base_url, forced, f"a forced call ({forced_with})")
        _check_no_raw_calls(base_url, message, "a forced call")
        calls = message.get("tool_calls") or []
        if not calls and parse_assistant_text(message.get("content") or "").malformed:
            # The server passed the model's own malformed attempt through (servers that do not enforce the
            # forced call with a grammar, such as the CPU build): a model failure, not a missing parser,
            # which the well-formed-call check above would have caught. Recorded in the manifest.
            forced_with += ", malformed by the model"
        elif not calls or calls[0].get("function", {}).get("name") != "get_weather":
            raise _fail(base_url, "a forced get_weather call as structured tool_calls",
                        f"tool_calls={calls!r}, content={str(message.get('content'))[:200]!r}", FIX_PARSER)
        thinking = observe_thinking(client, base_url, served_model)
    log.info("preflight ok: %s serves %s (max_model_len=%s)", base_url, served_model, max_len)
    return ProbeReport(models=models, max_model_len=max_len, forced_with=forced_with, enable_thinking=thinking)


def observe_thinking(client: httpx.Client, base_url: str, served_model: str) -> bool | None:
    """The chat-template thinking mode the server applies to a chat request, or None (with a log line saying
    why) when it cannot be told; never a guess.

    vLLM's `POST /tokenize` (at the server root, beside /v1) renders messages through the served chat template.
    The prompt is rendered twice there, with `chat_template_kwargs` {"enable_thinking": true} and {... false}
    (a Qwen3 template without thinking appends an empty `<think></think>` block), and a one-token chat
    request on the same messages says, in `usage.prompt_tokens`, which of the two the server actually fed the
    model. The chat request is the witness rather than a third render with the server's defaults, since vLLM
    versions differ in whether /tokenize applies `--default-chat-template-kwargs`.
    """
    root = base_url.removesuffix("/v1")
    counts = {}
    for enable in (True, False):
        body = {"model": served_model, "messages": THINKING_MESSAGES, "add_generation_prompt": True,
                "chat_template_kwargs": {"enable_thinking": enable}}
        try:
            response = client.post(f"{root}/tokenize", json=body)
            response.raise_for_status()
            counts[enable] = response.json()["tokens"]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as err:
            log.warning("served thinking mode not observed: %s/tokenize did not render a chat prompt (%s: %s); "
                        "the manifest records served_enable_thinking null", root, type(err).__name__, str(err)[:200])
            return None
    if counts[True] == counts[False]:
        log.warning("served thinking mode not observed: the chat template renders the same prompt with "
                    "enable_thinking true and false (it has no thinking switch, or the server ignores "
                    "chat_template_kwargs in /tokenize); the manifest records served_enable_thinking null")
        return None
    try:
        answer = client.post(f"{base_url}/chat/completions", json={
            "model": served_model, "messages": THINKING_MESSAGES, "max_tokens": 1, "temperature": 0})
        answer.raise_for_status()
        prompt_tokens = answer.json()["usage"]["prompt_tokens"]
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as err:
        log.warning("served thinking mode not observed: no prompt token count from a chat request (%s: %s); the "
                    "manifest records served_enable_thinking null", type(err).__name__, str(err)[:200])
        return None
    matches = [enable for enable, tokens in counts.items() if len(tokens) == prompt_tokens]
    if len(matches) != 1:
        log.warning("served thinking mode not observed: the chat request's prompt had %s tokens, the template "
                    "renders %d with thinking and %d without; the manifest records served_enable_thinking null",
                    prompt_tokens, len(counts[True]), len(counts[False]))
        return None
    log.info("served thinking mode: %s (the chat prompt has the %d tokens of the template rendered with "
             "enable_thinking %s)", "on" if matches[0] else "off", prompt_tokens, str(matches[0]).lower())
    return matches[0]
