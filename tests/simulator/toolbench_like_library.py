"""A generated tool library with the size and the quirks of TRUSTEE's ToolBench library (`toolbench_tools.json`).

TRUSTEE's file is about 15.5 MB of indented JSON, category -> toolset -> list of tool entries, RapidAPI style. What
this generator reproduces, because each has broken or slowed a loader:
- the same name in several toolsets (petstore-style test APIs copied across categories) and the same entry twice
  in one toolset (TRUSTEE's file has such pairs);
- names with slashes and spaces (`products/list`, `Keyword Ideas`);
- number-typed parameters with string defaults (`"type": "number", "default": "1000"`, or `""`), and types JSON
  Schema does not have (`credentials`, `select`);
- entries without a description or without parameters, and with a null description (usable);
- `UNUSABLE`: one entry of each kind the loader leaves out, each at a known place.

Used by tests/simulator/test_toolbench_library.py and bench/simulator_library_load.py:

    expected = write_toolbench_like(path)             # about 15.5 MB; `expected` says what a loader must find
    expected = write_toolbench_like(path, 500_000)    # the same quirks, smaller
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REAL_SIZE_BYTES = 15_500_000
WORDS = ("account order item price stock user file report weather city flight hotel booking payment invoice message "
         "email calendar event note task project team device light sensor song playlist video image document search "
         "list create update delete send schedule track convert translate summary location route distance currency "
         "rate balance transfer card product review rating recipe keyword domain score league match player").split()
TYPES = ("string", "string", "string", "number", "integer", "boolean", "credentials", "select")  # ToolBench's own
PETSTORE = ("getPetById", "logoutUser", "updatePetWithForm", "getInventory", "loginUser")
SLASHED = ("products/list", "products/get-detail", "reviews/list", "auto-complete", "categories/list")
SPACED = ("Keyword Ideas", "SEND SMS", "View IP address", "Get Match Details", "Search  Products")

# (where it is put, the entry, the reason the loader should give). Each is placed once, in category "Unusable".
UNUSABLE: tuple[tuple[str, Any, str], ...] = (
    ("Strings", "GET /v1/ping", "not a JSON object"),
    ("Nulls", None, "not a JSON object"),
    ("No function", {"type": "function", "name": "orphan"}, "no `function` object"),
    ("No name", {"type": "function", "function": {"description": "Lost its name."}}, "no name"),
    ("Empty name", {"type": "function", "function": {"name": "  ", "parameters": {}}}, "an empty name"),
    ("Number name", {"type": "function", "function": {"name": 404}}, "a name that is not text"),
    ("Parameters list", {"type": "function", "function": {"name": "listed", "parameters": ["q"]}},
     "`parameters` that is not a JSON object"),
    ("Bad property", {"type": "function", "function": {"name": "badprop", "parameters": {
        "type": "object", "properties": {"q": "a string, not a schema"}}}}, "parameter 'q'"),
)


@dataclass
class Expected:
    """What a loader must make of the generated file."""

    size_bytes: int = 0
    usable: int = 0
    """Entries that are tools (every duplicate counted), the number TRUSTEE's sampling draws from."""
    left_out: list[tuple[str, str | None, str]] = field(default_factory=list)
    """(category, toolset, a fragment of the reason) of each entry to leave out, in file order."""
    duplicate_names: set[str] = field(default_factory=set)
    string_default_numbers: int = 0
    """Number or integer parameters with a string default, over every usable entry."""


def _text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(low, high)))


def _parameter(rng: random.Random) -> dict:
    kind = rng.choice(TYPES)
    parameter: dict[str, Any] = {"type": kind, "description": _text(rng, 4, 30)}
    if kind in ("number", "integer"):
        parameter["default"] = rng.choice(["1000", "", "1", "45974", 0])
    elif kind == "string":
        parameter["default"] = rng.choice(["", "en", "dog,puppy", "United States", '{"body":"diamond"}'])
    return parameter


def string_defaults_of_numbers(entry: dict) -> int:
    """How many number or integer parameters of a tool entry have a string default."""
    properties = entry["function"].get("parameters", {}).get("properties", {})
    return sum(p["type"] in ("number", "integer") and isinstance(p.get("default"), str) for p in properties.values())


def _tool(rng: random.Random, name: str, toolset: str, toolset_description: str, category: str) -> dict:
    properties = {f"{rng.choice(WORDS)}_{k}": _parameter(rng) for k in range(rng.randint(0, 7))}
    function: dict[str, Any] = {"name": name, "description": _text(rng, 6, 60),
                                "parameters": {"type": "object", "properties": properties,
                                               "required": sorted(rng.sample(list(properties),
                                                                             min(2, len(properties))))}}
    quirk = rng.random()
    if quirk < 0.01:
        del function["parameters"]
    elif quirk < 0.02:
        function["description"] = None
    elif quirk < 0.03:
        del function["description"]
    return {"type": "function", "function": function, "toolset_name": toolset,
            "toolset_description": toolset_description, "category": category}


def _name(rng: random.Random, number: int) -> str:
    roll = rng.random()
    if roll < 0.15:
        return rng.choice(SLASHED)
    if roll < 0.25:
        return rng.choice(SPACED)
    return f"{rng.choice(WORDS)}{number}_{rng.choice(WORDS)}"


def build_toolbench_like(target_bytes: int = REAL_SIZE_BYTES, seed: int = 0) -> tuple[dict, Expected]:
    """The library as a dict and what a loader must find in it. Sizes are estimated from compact JSON; the
    file `write_toolbench_like` writes is indented like TRUSTEE's and lands within a few percent of the target."""
    rng = random.Random(seed)
    expected = Expected()
    library: dict[str, dict[str, list]] = {}
    names_seen: set[str] = set()
    # Indenting by 2 spaces, as TRUSTEE's file is, adds about a third to the compact size at this nesting.
    budget, written, number, toolsets_made = target_bytes / 1.34, 0, 0, 0
    while written < budget:
        category = f"Category {toolsets_made % 49:02d}"  # ToolBench has 49 categories
        toolsets_made += 1
        toolsets = library.setdefault(category, {})
        toolset = f"{rng.choice(WORDS).title()}  {rng.choice(WORDS).title()} API {number}"  # ToolBench's double spaces
        description = _text(rng, 5, 80)
        entries = toolsets.setdefault(toolset, [])
        names = list(PETSTORE[:3]) if rng.random() < 0.03 else []
        names += [_name(rng, number + k) for k in range(rng.randint(1, 12))]
        for name in names:
            entry = _tool(rng, name, toolset, description, category)
            copies = 2 if rng.random() < 0.01 else 1  # the same entry twice in one toolset, now and then
            entries.extend(json.loads(json.dumps(entry)) for _ in range(copies))
            expected.string_default_numbers += copies * string_defaults_of_numbers(entry)
            if copies > 1:
                expected.duplicate_names.add(name)
            if name in names_seen:
                expected.duplicate_names.add(name)
            names_seen.add(name)
            written += len(json.dumps(entry))
        expected.usable += len(entries)
        number += len(names)
    unusable = library.setdefault("Unusable", {})
    for toolset, entry, reason in UNUSABLE:
        unusable[toolset] = [entry]
        expected.left_out.append(("Unusable", toolset, reason))
    # A usable tool beside an unusable one in the same toolset: only the bad entry goes.
    neighbour = _tool(rng, "ping/v1", "Strings", "d", "Unusable")
    unusable["Strings"].insert(0, neighbour)
    expected.usable += 1
    expected.string_default_numbers += string_defaults_of_numbers(neighbour)
    return library, expected


def write_toolbench_like(path: Path, target_bytes: int = REAL_SIZE_BYTES, seed: int = 0) -> Expected:
    """Write the library as TRUSTEE's file is written (indented by 2, UTF-8 as is) and say what is in it."""
    library, expected = build_toolbench_like(target_bytes, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(library, indent=2, ensure_ascii=False), encoding="utf-8")
    expected.size_bytes = path.stat().st_size
    return expected
