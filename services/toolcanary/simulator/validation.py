"""Check a tool call against the task's schemas and say, in words the policy can act on, what is wrong.

Covers what tool calls get wrong in practice: an unknown tool, a missing required argument, an unexpected
argument, a wrong JSON type, a value outside an enum or range, a malformed date. Tolerates odd schemas
(anything a client sends): a schema it cannot read checks nothing rather than failing.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from toolcanary.contract import SimulatedTask, ToolCall

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "array": (list,), "object": (dict,), "null": (type(None),),
}
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _type_name(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object",
            type(None): "null"}.get(type(value), type(value).__name__)


def _is_type(value: Any, kind: str) -> bool:
    if kind in {"integer", "number"} and isinstance(value, bool):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(kind, (object,)))


def _check_format(value: str, fmt: str, path: str) -> list[str]:
    if fmt == "date" and not _DATE.match(value):
        return [f"'{path}' must be a date like 2026-05-01, got {value!r}"]
    if fmt == "date-time":
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return [f"'{path}' must be an ISO 8601 date-time like 2026-05-01T09:00:00+01:00, got {value!r}"]
    if fmt == "email" and ("@" not in value or " " in value.strip()):
        return [f"'{path}' must be an e-mail address, got {value!r}"]
    return []


def check_value(schema: Any, value: Any, path: str) -> list[str]:
    """Problems of `value` under `schema` (empty when it is fine)."""
    if not isinstance(schema, dict):
        return []
    kind = schema.get("type")
    if isinstance(kind, str) and kind in _TYPES and not _is_type(value, kind):
        return [f"'{path}' must be {'an' if kind[0] in 'aeio' else 'a'} {kind}, got {_type_name(value)} {value!r}"[:300]]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and value not in enum:
        return [f"'{path}' must be one of {enum}, got {value!r}"[:300]]
    problems: list[str] = []
    if isinstance(value, int | float) and not isinstance(value, bool):
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if isinstance(lo, int | float) and value < lo or isinstance(hi, int | float) and value > hi:
            problems.append(f"'{path}' must be between {lo} and {hi}, got {value}")
    if isinstance(value, str) and isinstance(schema.get("format"), str):
        problems += _check_format(value, schema["format"], path)
    if isinstance(value, list):
        max_items = schema.get("maxItems")
        if isinstance(max_items, int) and len(value) > max_items:
            problems.append(f"'{path}' takes at most {max_items} items, got {len(value)}")
        for index, item in enumerate(value[:100]):
            problems += check_value(schema.get("items"), item, f"{path}[{index}]")
    if isinstance(value, dict):
        problems += check_object(schema, value, path)
    return problems


def check_object(schema: dict, value: dict, path: str = "") -> list[str]:
    props = schema.get("properties")
    if not isinstance(props, dict):
        return []
    prefix = f"{path}." if path else ""
    problems = []
    required = schema.get("required", [])
    for name in required if isinstance(required, list) else []:
        if isinstance(name, str) and name not in value:
            spec = props.get(name, {}) if isinstance(props.get(name), dict) else {}
            hint = f" ({spec.get('type', 'value')}: {spec.get('description', '')})" if spec else ""
            problems.append(f"missing required argument '{prefix}{name}'{hint}")
    if schema.get("additionalProperties", False) is not True:
        for name in value:
            if name not in props:
                problems.append(f"unexpected argument '{prefix}{name}'; accepted: {', '.join(props) or 'none'}")
    for name, item in value.items():
        if name in props:
            problems += check_value(props[name], item, prefix + name)
    min_props = schema.get("minProperties")
    if isinstance(min_props, int) and len(value) < min_props:
        problems.append(f"'{path or 'arguments'}' needs at least {min_props} field(s)")
    return problems


def validate_call(task: SimulatedTask, call: ToolCall) -> str | None:
    """An error message for the policy, or None when the call is valid for this task."""
    tool = task.tool(call.function.name)
    if tool is None:
        offered = ", ".join(t.name for t in task.tools)
        return f"Error: tool '{call.function.name}' does not exist here. Available tools: {offered}."
    if not isinstance(call.function.arguments, dict):
        return (f"Error: the arguments of {tool.name} must be a JSON object, got "
                f"{type(call.function.arguments).__name__}.")
    problems = check_object(tool.function.parameters, call.function.arguments)
    if problems:
        return f"Error: invalid arguments for {tool.name}: " + "; ".join(problems[:8]) + "."
    return None
