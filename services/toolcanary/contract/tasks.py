"""Simulated tasks, the difficulty settings they are made with, and the tool library they draw from.

A task carries its own tools: every GRPO group faces one task, and the trainer renders exactly these
tools into the policy's prompt. `call_expected=False` marks an abstention task: none of the offered tools
serves the request, and the right answer is to decline or answer directly.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from toolcanary.contract.chat import MAX_TOOL_NAME_CHARS, FunctionSpec, ToolSchema
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
    expected_tool_calls_as_written: list[JsonValue] | None = Field(
        None, description="mode trustee: the author's list as it wrote it, what TRUSTEE shows its verifier")
    user_intent: str
    user_persona: str
    first_user_query: str = Field(min_length=1)
    difficulty: DifficultySettings
    call_expected: bool = True

    def tool(self, name: str) -> ToolSchema | None:
        return next((t for t in self.tools if t.name == name), None)


# --- the tool library ------------------------------------------------------------------------------------------
#
# A library file is TRUSTEE's format: category -> toolset -> list of entries, each an OpenAI function schema plus
# the toolset's name and description and the category. TRUSTEE loads such a file with `json.load` and nothing
# else, so one odd entry never stops it; here too, the file is refused only when it is not JSON, not an object
# of categories, or holds no usable tool. An entry is usable when the policy can be offered it and call it:
# - a JSON object with a `function` object whose `name` is text, not blank, at most MAX_TOOL_NAME_CHARS long;
# - `parameters` absent or null (a tool without arguments), or a JSON object whose `properties`, if present, maps
#   each parameter to a JSON object, and whose `required`, if present, is a list of names: what a chat template
#   that lists a tool's parameters reads.
# Everything else is kept as written: names with slashes and spaces, types JSON Schema lacks (ToolBench's
# `credentials`), defaults of another type than their parameter (`"type": "number", "default": "1000"`), since
# TRUSTEE shows them to the policy so. A description that is null or absent reads as empty, one that is not text
# as its JSON. Entries with the same name are all kept, each drawn as TRUSTEE draws it (docs/simulator.md).
# Entries that are not usable are left out and listed in `ToolLibrary.left_out`.

_JSON_KINDS = {dict: "a JSON object", list: "an array", str: "a string", int: "a number", float: "a number",
               bool: "true or false", type(None): "null"}
_FORMAT = 'category -> toolset -> [{"type": "function", "function": {"name": ..., "parameters": {...}}}, ...]'
_FIX = "Check that the file is a tool library in TRUSTEE's format, or pass another with --library"


def _kind(value: Any) -> str:
    return _JSON_KINDS.get(type(value), type(value).__name__)


class LeftOutEntry(BaseModel):
    """An entry of a library file that is not a usable tool (or a toolset or category not in the format)."""

    where: str = Field(description="'category' / 'toolset' [index], as in the file")
    name: str | None = Field(None, description="the tool's name, when it has one")
    reason: str = Field(description="what the entry has that makes it unusable")

    def __str__(self) -> str:
        return f"{self.where}{f' {self.name!r}' if self.name else ''}: {self.reason}"


class LibraryTool(BaseModel):
    """A tool of the library: its schema plus where it sits (stripped before the policy sees it)."""

    model_config = ConfigDict(frozen=True)
    schema_: ToolSchema = Field(alias="schema")
    toolset_name: str
    toolset_description: str = ""
    category: str


class ToolLibrary(BaseModel):
    """TRUSTEE's library format: category -> toolset -> list of OpenAI function schemas.

    Every usable entry is a tool here, entries with the same name included, in the file's order; `left_out`
    lists the entries that are not usable, in the file's order.
    """

    categories: dict[str, dict[str, list[LibraryTool]]]
    left_out: list[LeftOutEntry] = Field(default_factory=list)

    def all_tools(self) -> list[LibraryTool]:
        return [t for toolsets in self.categories.values() for tools in toolsets.values() for t in tools]

    def duplicate_names(self) -> dict[str, int]:
        """Each name that more than one tool has, with how many have it."""
        counts = Counter(t.schema_.name for t in self.all_tools())
        return {name: count for name, count in counts.items() if count > 1}

    def __len__(self) -> int:
        return len(self.all_tools())


def _parameters_problem(parameters: Any) -> str | None:
    """Why `parameters` cannot be offered to the policy, or None when it can."""
    if not isinstance(parameters, dict):
        return f"`parameters` that is not a JSON object ({_kind(parameters)})"
    if "properties" in parameters:
        properties = parameters["properties"]
        if not isinstance(properties, dict):
            return f"`parameters.properties` that is not a JSON object ({_kind(properties)})"
        for name, schema in properties.items():
            if not isinstance(schema, dict):
                return f"parameter {name!r} whose schema is not a JSON object ({_kind(schema)})"
    if "required" in parameters:
        required = parameters["required"]
        if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
            return "`parameters.required` that is not a list of parameter names"
    return None


def _library_tool(entry: Any, category: str, toolset: str, index: int) -> LibraryTool | LeftOutEntry:
    where = f"{category!r} / {toolset!r} [{index}]"

    def left_out(reason: str, name: str | None = None) -> LeftOutEntry:
        return LeftOutEntry(where=where, name=name, reason=reason)

    if not isinstance(entry, dict):
        return left_out(f"not a JSON object ({_kind(entry)})")
    function = entry.get("function")
    if not isinstance(function, dict):
        return left_out("no `function` object")
    name = function.get("name")
    if name is None:
        return left_out("no name")
    if not isinstance(name, str):
        return left_out(f"a name that is not text ({_kind(name)})")
    if not name.strip():
        return left_out("an empty name")
    if len(name) > MAX_TOOL_NAME_CHARS:
        return left_out(f"a name over {MAX_TOOL_NAME_CHARS} characters", name[:80] + "...")
    parameters = function.get("parameters")
    if parameters is None:
        parameters = {"type": "object", "properties": {}}
    elif problem := _parameters_problem(parameters):
        return left_out(problem, name)
    description = function.get("description")
    if not isinstance(description, str):
        description = "" if description is None else json.dumps(description, ensure_ascii=False)
    toolset_name, toolset_description = entry.get("toolset_name"), entry.get("toolset_description")
    own_category = entry.get("category")
    try:
        schema = ToolSchema(function=FunctionSpec.model_validate(
            {**function, "name": name, "description": description, "parameters": parameters}))
    except ValidationError as err:  # the checks above should leave nothing for this; if they do, say what
        return left_out(f"a schema the contract refuses ({err.errors()[0]['msg']})", name)
    # Where a tool sits only steers sampling and is stripped before the policy sees it: odd values fall back
    # to the keys the tool is filed under instead of costing the tool.
    return LibraryTool(
        schema=schema,
        toolset_name=toolset_name if isinstance(toolset_name, str) else toolset,
        toolset_description=toolset_description if isinstance(toolset_description, str) else "",
        category=own_category if isinstance(own_category, str) else category,
    )


def read_library_file(path: str | Path) -> tuple[bytes, Any]:
    """The bytes of a library file and the JSON they hold.

    Raises:
        ContractError: no such file, or the file is not JSON.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError as err:
        raise ContractError(str(path), "a tool library JSON file", "no such file", "Pass --library PATH") from err
    try:
        return data, json.loads(data)
    except ValueError as err:  # JSONDecodeError, or bytes that are no Unicode text at all
        raise ContractError(str(path), f"a tool library in JSON ({_FORMAT})", f"a file that is not JSON ({err})",
                            _FIX) from err


def library_from_json(raw: Any, source: str) -> ToolLibrary:
    """The usable tools of a library's JSON, and what was left out and why (see the rule above).

    Raises:
        ContractError: `raw` is not an object of categories, or none of its entries is a usable tool.
    """
    if not isinstance(raw, dict):
        raise ContractError(source, f"a JSON object of categories ({_FORMAT})", _kind(raw), _FIX)
    categories: dict[str, dict[str, list[LibraryTool]]] = {}
    left_out: list[LeftOutEntry] = []
    for category, toolsets in raw.items():
        if not isinstance(toolsets, dict):
            left_out.append(LeftOutEntry(where=repr(category),
                                         reason=f"a category that is not a JSON object of toolsets ({_kind(toolsets)})"))
            continue
        kept = categories[category] = {}
        for toolset, entries in toolsets.items():
            if not isinstance(entries, list):
                left_out.append(LeftOutEntry(where=f"{category!r} / {toolset!r}",
                                             reason=f"a toolset that is not a list of tools ({_kind(entries)})"))
                continue
            tools = kept[toolset] = []
            for index, entry in enumerate(entries):
                made = _library_tool(entry, category, toolset, index)
                (tools if isinstance(made, LibraryTool) else left_out).append(made)
    library = ToolLibrary(categories=categories, left_out=left_out)
    if not any(tools for toolsets in categories.values() for tools in toolsets.values()):
        shown = "; ".join(str(entry) for entry in left_out[:5]) + ("; ..." if len(left_out) > 5 else "")
        raise ContractError(source, f"at least one usable tool ({_FORMAT})",
                            f"none among {len(left_out)} entries" + (f" ({shown})" if shown else ""), _FIX)
    return library


def load_tool_library(path: str | Path) -> ToolLibrary:
    """Read a library file in TRUSTEE's format: every usable tool, and the entries left out (`left_out`).

    Raises:
        ContractError: the file is missing or not JSON, not an object of categories, or has no usable tool.
    """
    return library_from_json(read_library_file(path)[1], str(Path(path)))
