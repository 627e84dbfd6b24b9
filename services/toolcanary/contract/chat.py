"""OpenAI-style tool schemas, tool calls and chat messages.

These are the shapes the chat template, vLLM's OpenAI server, the simulator and BFCL all speak. Arguments
are kept as a dict inside the project (what chat templates render) and accept the OpenAI wire form, a JSON
string, on input.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

MAX_TOOL_NAME_CHARS = 256


class FunctionSpec(BaseModel):
    """One function as OpenAI tools describe it; `parameters` is a JSON Schema object."""

    model_config = ConfigDict(extra="allow")
    name: str = Field(min_length=1, max_length=MAX_TOOL_NAME_CHARS)
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ToolSchema(BaseModel):
    """`{"type": "function", "function": {...}}`, the unit of a `tools=[...]` list."""

    type: Literal["function"] = "function"
    function: FunctionSpec

    @property
    def name(self) -> str:
        return self.function.name

    def required_parameters(self) -> list[str]:
        return list(self.function.parameters.get("required", []))


MAX_ARGUMENTS_DEPTH = 32  # as deep as a request body may nest (the simulator's max_json_depth default)


def _depth(value: Any) -> int:
    """How deep the arrays and objects of a decoded JSON value nest (0 for a scalar), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            level += 1
            deepest = max(deepest, level)
            stack.extend((child, level) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


class FunctionCall(BaseModel):
    """The name and arguments of one call.

    Arguments are any JSON value: the trustee mode passes on whatever a call's JSON held, as TRUSTEE does; the
    toolcanary mode's parser and the simulator's checks accept only an object.
    """

    name: str = Field(min_length=1)
    arguments: JsonValue = Field(default_factory=dict)

    @field_validator("arguments", mode="before")
    @classmethod
    def _decode_string_arguments(cls, value: Any) -> Any:
        # The OpenAI wire form carries arguments as a JSON string; a body's depth limit does not see inside it.
        if isinstance(value, str):
            try:
                decoded = json.loads(value) if value.strip() else {}
                too_deep = _depth(decoded) > MAX_ARGUMENTS_DEPTH
            except RecursionError:  # deeper than the parser goes: deeper than the limit
                too_deep = True
            if too_deep:
                raise ValueError(f"arguments nest too deep: expected JSON nested at most {MAX_ARGUMENTS_DEPTH} "
                                 "levels")
            return decoded
        return value


class ToolCall(BaseModel):
    """One entry of an assistant message's `tool_calls`; several entries are a parallel call."""

    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCall

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI wire form, with arguments as a JSON string."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.function.name, "arguments": json.dumps(self.function.arguments)},
        }


class SystemMessage(BaseModel):
    role: Literal["system"] = "system"
    content: str


class UserMessage(BaseModel):
    role: Literal["user"] = "user"
    content: str


class AssistantMessage(BaseModel):
    """An assistant turn: optional reasoning, optional text, zero or more tool calls."""

    role: Literal["assistant"] = "assistant"
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)


class ToolMessage(BaseModel):
    """A tool's reply; `is_error` marks an execution error the policy can correct from (MCP's isError)."""

    role: Literal["tool"] = "tool"
    content: str
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False


Message = Annotated[SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")]

