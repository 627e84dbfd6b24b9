"""Deterministic, schema-shaped results of valid tool calls for the scripted tool role.

The result schema comes from the library's `x_result` hint; values are drawn from an RNG seeded by the task,
the tool and the arguments (the same call always returns the same result), then the call's own arguments are
written over matching fields so the result agrees with the request (a created event has the asked title).
Tools without a hint (custom libraries) get an acknowledgement that echoes the arguments.
"""

from __future__ import annotations

import json
from typing import Any

from toolcanary.simulator.calls import rng_for
from toolcanary.simulator.scripted.values import generate_value


def _overlay(record: dict, args: dict) -> dict:
    for key, value in args.items():
        if key in record or key.endswith("_id"):
            record[key] = value
        if key == "changes" and isinstance(value, dict):
            record.update(value)
    return record


def make_result(hint: dict[str, Any] | None, tool: str, args: dict[str, Any], task_id: str) -> dict[str, Any]:
    """The result object of one valid call."""
    rng = rng_for("result", task_id, tool, json.dumps(args, sort_keys=True, default=str))
    if not hint or not isinstance(hint.get("schema"), dict):
        return {"status": "completed", "tool": tool, "request_id": f"req_{rng.getrandbits(40):010x}",
                "arguments": args}
    schema, kind = hint["schema"], hint.get("kind", "action")
    props = schema.get("properties", {})
    value = generate_value(schema, "result", rng, optional_rate=1.0)
    if not isinstance(value, dict):
        return {"result": value}
    if kind == "record":
        return _overlay(value, args)
    if kind == "list":
        item_schema = props.get("items", {}).get("items", {})
        filters = {k: v for k, v in args.items() if k not in {"page_size", "page_token", "order", "query", "limit"}}
        count = rng.randint(1, 3)
        items = [_overlay(generate_value(item_schema, "item", rng, optional_rate=1.0), filters) for _ in range(count)]
        value.update(items=items, total=count, next_page_token=None)
        return value
    if kind == "deleted":
        value.update({k: v for k, v in args.items() if k.endswith("_id")}, deleted=True)
        return value
    for key, arg in args.items():
        if key in value and not isinstance(value[key], dict | list):
            value[key] = arg
    return value
