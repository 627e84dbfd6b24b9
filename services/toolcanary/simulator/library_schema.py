"""Building blocks of the default tool library: JSON-Schema helpers and the expansion of a resource into tools.

The catalog modules describe toolsets as resources (fields, verbs) plus hand-written actions; `expand_toolset`
turns each into OpenAI function schemas named `prefix.verb_noun`, with a result schema the scripted tool role
fills in (`x_result`, stored next to `function` so the policy never sees it). Used by `library_builder`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Schema = dict[str, Any]


def s(description: str, fmt: str | None = None, **extra: Any) -> Schema:
    out: Schema = {"type": "string", "description": description}
    if fmt:
        out["format"] = fmt
    return out | extra


def i(description: str, lo: int | None = None, hi: int | None = None) -> Schema:
    out: Schema = {"type": "integer", "description": description}
    if lo is not None:
        out["minimum"] = lo
    if hi is not None:
        out["maximum"] = hi
    return out


def n(description: str, lo: float | None = None, hi: float | None = None) -> Schema:
    out: Schema = {"type": "number", "description": description}
    if lo is not None:
        out["minimum"] = lo
    if hi is not None:
        out["maximum"] = hi
    return out


def b(description: str) -> Schema:
    return {"type": "boolean", "description": description}


def e(description: str, *values: str) -> Schema:
    return {"type": "string", "enum": list(values), "description": description}


def a(items: Schema, description: str, max_items: int | None = None) -> Schema:
    out: Schema = {"type": "array", "items": items, "description": description}
    if max_items:
        out["maxItems"] = max_items
    return out


def o(description: str, properties: dict[str, Schema], required: list[str] | None = None) -> Schema:
    return {"type": "object", "description": description, "properties": properties, "required": required or []}


@dataclass
class Resource:
    """A thing a toolset manages; `verbs` picks which of the generic tools it gets."""

    noun: str
    plural: str
    about: str
    fields: dict[str, Schema]
    required: list[str]
    verbs: tuple[str, ...] = ("list", "get", "create", "update", "delete")
    parent: tuple[str, Schema] | None = None
    filters: tuple[str, ...] = ()


@dataclass
class Action:
    """A hand-written tool: `description` opens with the imperative phrase a user would ask for."""

    verb_noun: str
    description: str
    params: dict[str, Schema]
    required: list[str]
    result: Schema


@dataclass
class Toolset:
    prefix: str
    name: str
    description: str
    resources: list[Resource] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)


def _an(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + noun.replace("_", " ")


def _params(properties: dict[str, Schema], required: list[str]) -> Schema:
    return {"type": "object", "properties": properties, "required": required}


def _record(res: Resource) -> Schema:
    props = {f"{res.noun}_id": s(f"Identifier of the {res.noun.replace('_', ' ')}.")} | res.fields
    props |= {"created_at": s("Creation time.", "date-time"), "updated_at": s("Last change.", "date-time")}
    return o(res.about, props, [f"{res.noun}_id", *res.required])


def _generic(ts: Toolset, res: Resource, verb: str) -> tuple[str, str, Schema, str, Schema]:
    """(name, description, parameters, result kind, result schema) of one generic verb."""
    nn, pp = res.noun.replace("_", " "), res.plural.replace("_", " ")
    idp = {f"{res.noun}_id": s(f"Identifier of the {nn}, as returned by {ts.prefix}.list_{res.plural}.")}
    parent = dict([res.parent]) if res.parent else {}
    parent_req = list(parent)
    record = _record(res)
    page = {"items": a(record, f"Matching {pp}."), "next_page_token": s("Token of the next page."),
            "total": i("Number of matches.", 0)}
    if verb == "list":
        filters = {k: res.fields[k] for k in res.filters}
        props = parent | filters | {
            "page_size": i("Results per page.", 1, 100),
            "page_token": s("Token from a previous page to continue listing."),
            "order": e("Sort direction by creation time.", "asc", "desc"),
        }
        desc = (f"List the {pp} in {ts.name}, newest first unless `order` says otherwise. "
                f"Optional filters narrow the result; results are paginated with `page_size` and `page_token`. "
                f"Each entry is {res.about}.")
        return f"{ts.prefix}.list_{res.plural}", desc, _params(props, parent_req), "list", o("A page.", page)
    if verb == "get":
        desc = (f"Get {_an(nn)} from {ts.name} by its identifier, with all of its fields. "
                f"Fails with a not-found error when the identifier does not exist or was deleted.")
        return f"{ts.prefix}.get_{res.noun}", desc, _params(idp, list(idp)), "record", record
    if verb == "create":
        desc = (f"Create {_an(nn)} in {ts.name}: {res.about}. Required fields must be given; "
                f"others take the account defaults. Returns the stored {nn} with its new `{res.noun}_id`.")
        props = parent | res.fields
        return f"{ts.prefix}.create_{res.noun}", desc, _params(props, parent_req + res.required), "record", record
    if verb == "update":
        changes = o(f"Fields of the {nn} to change; omitted fields keep their value.", res.fields)
        changes["minProperties"] = 1
        desc = (f"Update {_an(nn)} in {ts.name}. Only the fields inside `changes` are modified; "
                f"the response is the {nn} after the update.")
        props = idp | {"changes": changes}
        return f"{ts.prefix}.update_{res.noun}", desc, _params(props, [*idp, "changes"]), "record", record
    if verb == "delete":
        props = idp | {"permanent": b(f"Delete the {nn} for good instead of moving it to the trash.")}
        desc = (f"Delete {_an(nn)} from {ts.name}. By default it goes to the trash and can be restored "
                f"for 30 days; set `permanent` to remove it at once.")
        result = o("Deletion receipt.", {f"{res.noun}_id": s("The deleted item."), "deleted": b("Always true."),
                                         "restorable_until": s("End of the restore window.", "date-time")})
        return f"{ts.prefix}.delete_{res.noun}", desc, _params(props, list(idp)), "deleted", result
    if verb == "search":
        props = {"query": s(f"Free-text query matched against the {pp}' text fields.")} | {
            "limit": i("Maximum number of results.", 1, 50)}
        desc = (f"Search the {pp} of {ts.name} by free text, ranked by relevance. "
                f"Use it when the identifier is unknown; each hit is {res.about}.")
        return f"{ts.prefix}.search_{res.plural}", desc, _params(props, ["query"]), "list", o("Hits.", page)
    raise ValueError(f"unknown verb {verb!r} for {ts.prefix}.{res.noun}")


def expand_toolset(ts: Toolset, category: str) -> list[dict[str, Any]]:
    """All tool entries of one toolset, in TRUSTEE's entry format plus `x_result`."""
    entries = []
    for res in ts.resources:
        for verb in res.verbs:
            name, desc, params, kind, result = _generic(ts, res, verb)
            entries.append(_entry(ts, category, name, desc, params, kind, result))
    for act in ts.actions:
        name = f"{ts.prefix}.{act.verb_noun}"
        needs = ", ".join(f"`{r}`" for r in act.required) or "nothing"
        # Real MCP tools explain their context and preconditions; a bare verb phrase would be an easy target.
        desc = (f"{act.description} Part of {ts.name} ({ts.description[0].lower()}{ts.description[1:].rstrip('.')}). "
                f"Requires {needs}; invalid or unknown values are rejected with an error before anything changes.")
        entries.append(_entry(ts, category, name, desc, _params(act.params, act.required), "action", act.result))
    return entries


def _entry(ts: Toolset, category: str, name: str, desc: str, params: Schema, kind: str, result: Schema) -> dict:
    return {
        "type": "function",
        "function": {"name": name, "description": desc, "parameters": params},
        "toolset_name": ts.name,
        "toolset_description": ts.description,
        "category": category,
        "x_result": {"kind": kind, "schema": result},
    }
