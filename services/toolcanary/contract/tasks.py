"""Simulated tasks, the difficulty settings they are made with, and the tool library they draw from.

A task carries its own tools: every GRPO group faces one task, and the trainer renders exactly these
tools into the policy's prompt. `call_expected=False` marks an abstention task: none of the offered tools
serves the request, and the right answer is to decline or answer directly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolcanary.contract.chat import ToolSchema
from toolcanary.contract.errors import ContractError


class DifficultySettings(BaseModel):
    """What the task author is asked for (TRUSTEE's task-generation settings plus `call_expected`)."""

    num_tools: int = Field(ge=1, le=64, description="tools offered to the policy")
    expected_calls: int = Field(ge=0, le=16, description="approximate number of distinct calls")
    user_persona: int = Field(ge=0, le=2, description="0 expert, 1 beginner, 2 novice")
    query_ambiguity: int = Field(ge=0, le=2, description="0 clear, 1 somewhat ambiguous, 2 highly ambiguous")
    expected_turns: int = Field(ge=0, le=2, description="0 one or two turns, 1 a few, 2 many")
    call_expected: bool = Field(True, description="False: an abstention task no offered tool serves")


class ExpectedCall(BaseModel):
    """A call the task needs. The LLM author gives names only; the scripted author also gives arguments."""

    name: str
    arguments: dict[str, Any] | None = None


class SimulatedTask(BaseModel):
    """One generated task, persisted and shared by every rollout of its GRPO group."""

    task_id: str
    task_key: str = Field(description="the idempotency key the trainer asked with")
    category: str = ""
    tools: list[ToolSchema] = Field(min_length=1)
    expected_tool_calls: list[ExpectedCall] = Field(default_factory=list)
    user_intent: str
    user_persona: str
    first_user_query: str = Field(min_length=1)
    difficulty: DifficultySettings
    call_expected: bool = True

    def tool(self, name: str) -> ToolSchema | None:
        return next((t for t in self.tools if t.name == name), None)


class LibraryTool(BaseModel):
    """A tool of the library: its schema plus where it sits (stripped before the policy sees it)."""

    model_config = ConfigDict(frozen=True)
    schema_: ToolSchema = Field(alias="schema")
    toolset_name: str
    toolset_description: str = ""
    category: str


class ToolLibrary(BaseModel):
    """TRUSTEE's library format: category -> toolset -> list of OpenAI function schemas."""

    categories: dict[str, dict[str, list[LibraryTool]]]

    def all_tools(self) -> list[LibraryTool]:
        return [t for toolsets in self.categories.values() for tools in toolsets.values() for t in tools]

    def __len__(self) -> int:
        return len(self.all_tools())


def load_tool_library(path: str | Path) -> ToolLibrary:
    """Read a library file in TRUSTEE's format; extra keys on a tool are ignored.

    Raises:
        ContractError: the file is missing, not JSON, or not category -> toolset -> [schema, ...].
    """
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError as err:
        raise ContractError(
            str(path), "a tool library JSON file", "no such file", "Pass --library PATH"
        ) from err
    except json.JSONDecodeError as err:
        raise ContractError(str(path), "JSON", f"a decode error ({err})") from err
    if not isinstance(raw, dict) or not raw:
        raise ContractError(str(path), "an object of categories", type(raw).__name__)
    categories: dict[str, dict[str, list[LibraryTool]]] = {}
    for category, toolsets in raw.items():
        if not isinstance(toolsets, dict):
            raise ContractError(
                f"{path}: category {category!r}", "an object of toolsets", type(toolsets).__name__
            )
        categories[category] = {}
        for toolset, tools in toolsets.items():
            where = f"{path}: {category!r} / {toolset!r}"
            if not isinstance(tools, list):
                raise ContractError(where, "a list of function schemas", type(tools).__name__)
            parsed = []
            for index, tool in enumerate(tools):
                try:
                    parsed.append(
                        LibraryTool(
                            schema=ToolSchema(type="function", function=tool["function"]),
                            toolset_name=tool.get("toolset_name", toolset),
                            toolset_description=tool.get("toolset_description", ""),
                            category=tool.get("category", category),
                        )
                    )
                except (KeyError, TypeError, ValidationError) as err:
                    raise ContractError(
                        f"{where} [{index}]",
                        '{"type": "function", "function": {"name", ...}}',
                        repr(err)[:200],
                    ) from err
            categories[category][toolset] = parsed
    return ToolLibrary(categories=categories)
