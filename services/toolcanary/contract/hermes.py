"""The Hermes / Qwen3 wire format: tool calls as `<tool_call>` blocks inside generated text.

`render_tool_calls` writes what Qwen3's chat template writes for an assistant turn's `tool_calls`;
`parse_assistant_text` reads a generated turn back into reasoning, visible content, well-formed calls and
malformed ones. Malformed calls are data (kept with their raw text and the reason), never exceptions:
the trainer penalises them and the tool role explains them to the policy.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, Field

from toolcanary.contract.chat import FunctionCall, ToolCall

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
_BLOCK = re.compile(re.escape(CALL_OPEN) + r"(.*?)" + re.escape(CALL_CLOSE), re.DOTALL)


class MalformedCall(BaseModel):
    """A `<tool_call>` block that could not be read as a call."""

    raw: str
    error: str


class ParsedTurn(BaseModel):
    """One generated assistant turn, split into its parts."""

    reasoning: str | None = None
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    malformed: list[MalformedCall] = Field(default_factory=list)
    think_unterminated: bool = False

    @property
    def attempted_call(self) -> bool:
        """True when the turn holds any tool-call markup, well-formed or not."""
        return bool(self.tool_calls or self.malformed)


def render_tool_call(name: str, arguments: dict[str, Any] | str) -> str:
    """One call as Qwen3's template renders it; string arguments are inserted verbatim, as the template does."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return f'{CALL_OPEN}\n{{"name": "{name}", "arguments": {args}}}\n{CALL_CLOSE}'


def render_tool_calls(calls: list[ToolCall]) -> str:
    """Several calls of one turn, newline-separated as in Qwen3's template."""
    return "\n".join(render_tool_call(c.function.name, c.function.arguments) for c in calls)


def render_assistant_turn(
    content: str = "", calls: list[ToolCall] | None = None, reasoning: str | None = None
) -> str:
    """The text of a whole assistant turn (without the chat framing tokens)."""
    parts = []
    if reasoning is not None:
        parts.append(f"{THINK_OPEN}\n{reasoning.strip()}\n{THINK_CLOSE}\n\n")
    parts.append(content.strip())
    if calls:
        parts.append(("\n" if content.strip() else "") + render_tool_calls(calls))
    return "".join(parts)


def _split_reasoning(text: str) -> tuple[str | None, str, bool]:
    close, first_call = text.find(THINK_CLOSE), text.find(CALL_OPEN)
    # A </think> inside a call's arguments is data, not the end of the reasoning.
    if close != -1 and (first_call == -1 or close < first_call):
        head, _, rest = text.partition(THINK_CLOSE)
        return head.replace(THINK_OPEN, "", 1).strip(), rest, False
    stripped = text.lstrip()
    if stripped.startswith(THINK_OPEN):
        # The budget ran out inside the reasoning: nothing after it was said.
        return stripped[len(THINK_OPEN) :].strip(), "", True
    return None, text, False


def _read_call(body: str) -> ToolCall | MalformedCall:
    raw = body.strip()
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as err:
        return MalformedCall(raw=raw, error=f"invalid JSON: {err.msg} at position {err.pos}")
    if not isinstance(obj, dict):
        return MalformedCall(raw=raw, error=f"expected a JSON object, got {type(obj).__name__}")
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return MalformedCall(raw=raw, error="missing or empty 'name'")
    if "arguments" not in obj:
        return MalformedCall(raw=raw, error="missing 'arguments'")
    try:
        call = ToolCall(function=FunctionCall(name=name, arguments=obj["arguments"]))
    except ValueError as err:
        return MalformedCall(raw=raw, error=f"bad 'arguments': {err}")
    if not isinstance(call.function.arguments, dict):
        # The toolcanary mode's rule (the trustee mode reads calls with TRUSTEE's parser instead).
        return MalformedCall(raw=raw, error="bad 'arguments': expected a JSON object, got "
                             f"{type(call.function.arguments).__name__}")
    return call


def parse_assistant_text(text: str) -> ParsedTurn:
    """Split generated text into reasoning, content, tool calls and malformed calls. Never raises."""
    reasoning, rest, unterminated = _split_reasoning(text)
    calls: list[ToolCall] = []
    malformed: list[MalformedCall] = []
    for match in _BLOCK.finditer(rest):
        parsed = _read_call(match.group(1))
        (calls if isinstance(parsed, ToolCall) else malformed).append(parsed)
    content = _BLOCK.sub("", rest)
    if CALL_OPEN in content:
        # An opened block that never closed (truncated generation).
        head, _, tail = content.partition(CALL_OPEN)
        malformed.append(MalformedCall(raw=tail.strip(), error=f"unterminated {CALL_OPEN} block"))
        content = head
    content = content.replace(CALL_CLOSE, "")
    for index, call in enumerate(calls):
        call.id = f"call_{index}"
    return ParsedTurn(
        reasoning=reasoning,
        content=content.strip(),
        tool_calls=calls,
        malformed=malformed,
        think_unterminated=unterminated,
    )
