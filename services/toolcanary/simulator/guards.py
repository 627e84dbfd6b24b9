"""ASGI guards in front of the simulator: the bearer token, a request-body size limit and a JSON depth limit.

They answer with the contract's `ErrorBody` (401, 413 and 422), before the app or the backend sees the request.
The depth limit keeps a deeply nested body (tool-call arguments nested thousands deep) from raising a
RecursionError after the backend answered; no request of the contract comes near it. The body is read up to the limit before the app
sees it, so an oversized body is refused whether or not it declares a Content-Length. The health routes stay
open so that container health checks need no secret; `/v1/ready`, the trainer's readiness check, does not.
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


async def _answer(send: Send, status: int, error: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"error": error, "detail": []}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class GuardMiddleware:
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
                await _answer(send, 401, "missing or wrong bearer token: send 'Authorization: Bearer <token>' "
                              "with the value of TOOLCANARY_SIMULATOR_TOKEN", [(b"www-authenticate", b"Bearer")])
                return
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await _answer(send, 413, self._too_big(int(declared)))
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await _answer(send, 413, self._too_big(size))
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
