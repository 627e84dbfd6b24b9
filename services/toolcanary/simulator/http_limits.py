"""The simulator's HTTP limits, one ASGI middleware in front of every route: the bearer token, a request-body
size limit, a JSON depth limit and the body's text (UTF-8, no lone surrogate, no integer too long to be one of
the contract's numbers).

    app.add_middleware(HttpLimits, max_body_bytes=1 << 20, token="s3cret", max_json_depth=32)

It answers with the contract's `ErrorBody` (401, 413 and 422) before the app or the backend sees the request;
a 401 or 413 answered before the body was read also closes the connection. The depth limit keeps a deeply
nested body (tool-call arguments nested thousands deep) from raising a RecursionError after the backend
answered; no request of the contract comes near it. The body is read up to the limit before the app sees it,
so an oversized body is refused whether or not it declares a Content-Length. The health routes stay open so
that container health checks need no secret; `/v1/ready`, the trainer's readiness check, does not.
"""

from __future__ import annotations

import hmac
import json
import re
from itertools import accumulate

from starlette.types import ASGIApp, Message, Receive, Scope, Send

OPEN_PATHS = {"/health", "/health/live", "/health/ready"}
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # a string literal, escapes included
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
# An integer of this many digits outside a string is none of the contract's numbers (steps, counts, rewards);
# past 4,300 digits Python's JSON parser raises an error no caller expects.
MAX_INTEGER_DIGITS = 18
_LONG_INTEGER = re.compile(rb"(?<![.\deE+-])-?\d{%d,}" % (MAX_INTEGER_DIGITS + 1))
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_KEYED_LONG_INTEGER = re.compile(rb'"((?:[^"\\]|\\.){1,64})"\s*:\s*-?\d{%d,}' % (MAX_INTEGER_DIGITS + 1))
_AS_PARENTHESES = bytes.maketrans(b"[{]}", b"(())")


def json_depth(body: bytes) -> int:
    """How deep the arrays and objects of a JSON text nest (0 for a scalar), without parsing it."""
    brackets = _JSON_STRING.sub(b"", body).translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    return max(accumulate(1 if b in (91, 123) else -1 for b in brackets))


def nests_within(body: bytes, limit: int) -> bool:
    """Whether the arrays and objects of a JSON text nest at most `limit` deep (False also for unbalanced
    brackets). Each pass deletes every innermost pair at once, so at most `limit` passes of C-level byte
    operations decide it; `json_depth` walks every bracket in Python and is kept for the refusal message."""
    if body.count(b"[") + body.count(b"{") <= limit:  # no deeper than it has opening brackets
        return True
    brackets = _JSON_STRING.sub(b"", body).translate(_AS_PARENTHESES, _NOT_BRACKETS)
    for _ in range(limit):
        if not brackets:
            return True
        brackets = brackets.replace(b"()", b"")
    return not brackets


def _lone_surrogate(value) -> str | None:
    """The first string (or key) of a decoded JSON value that holds a lone UTF-16 surrogate, else None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return item
    return None


def body_problem(body: bytes) -> tuple[str, list[dict]] | None:
    """Why a request body cannot be JSON text of the contract (the message and the `detail` fields), or None:
    invalid UTF-8, an integer longer than any of the contract's numbers, a lone surrogate escape (valid JSON,
    but no text: writing it fails)."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as err:
        return (f"request body is not UTF-8: byte {err.start} is {body[err.start:err.start + 1]!r}; send the "
                "JSON as UTF-8 text"), []
    long_integer = _LONG_INTEGER.search(_JSON_STRING.sub(b'""', body))
    if long_integer:
        keyed = _KEYED_LONG_INTEGER.search(body)
        return (f"a number in the request body has {len(long_integer.group().lstrip(b'-'))} digits: expected at "
                f"most {MAX_INTEGER_DIGITS} (steps, counts and rewards are small numbers)"), \
            [{"field": keyed.group(1).decode("utf-8", "replace")}] if keyed else []
    if _SURROGATE_ESCAPE.search(body):
        try:
            found = _lone_surrogate(json.loads(body))
        except ValueError:
            return None  # not JSON: the app's parser says where
        if found is not None:
            return (f"a string in the request body holds a lone UTF-16 surrogate ({found[:40]!r}): expected "
                    "Unicode text, with a surrogate escape only as half of a pair"), []
    return None


async def _answer(send: Send, status: int, error: str, headers: list[tuple[bytes, bytes]] | None = None,
                  detail: list[dict] | None = None) -> None:
    body = json.dumps({"error": error, "detail": detail or []}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class HttpLimits:
    """The ASGI middleware that enforces the limits of the module docstring on every HTTP request."""

    def __init__(self, app: ASGIApp, max_body_bytes: int, token: str | None, max_json_depth: int = 32) -> None:
        self.app, self.max_body_bytes, self.token = app, max_body_bytes, token
        self.max_json_depth = max_json_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        if self.token and scope["path"] not in OPEN_PATHS:
            given = headers.get(b"authorization", b"").decode("latin-1")
            if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
                # Answered before the body was read: the connection closes, so no body can trickle on after it.
                await _answer(send, 401, "missing or wrong bearer token: send 'Authorization: Bearer <token>' "
                              "with the value of TOOLCANARY_SIMULATOR_TOKEN",
                              [(b"www-authenticate", b"Bearer"), (b"connection", b"close")])
                return
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await _answer(send, 413, self._too_big(int(declared)), [(b"connection", b"close")])
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await _answer(send, 413, self._too_big(size), [(b"connection", b"close")])
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body, replayed = b"".join(chunks), False
        depth = 0 if nests_within(body, self.max_json_depth) else json_depth(body)
        if depth > self.max_json_depth:
            await _answer(send, 422, f"request body nests too deep: expected JSON nested at most "
                          f"{self.max_json_depth} levels, got {depth}; flatten the tool-call arguments (or raise "
                          "TOOLCANARY_SIMULATOR_MAX_JSON_DEPTH)")
            return
        problem = body_problem(body) if body else None
        if problem:
            await _answer(send, 422, problem[0], detail=problem[1])
            return

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _too_big(self, size: int) -> str:
        return (f"request body too large: expected at most {self.max_body_bytes} bytes, got {size}"
                f"{'+' if size > self.max_body_bytes else ''}; send a shorter history or raise "
                "TOOLCANARY_SIMULATOR_MAX_BODY_BYTES")
