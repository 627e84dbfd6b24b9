"""Write the default tool library (TRUSTEE's format) from the catalog modules, deterministically.

    python -m toolcanary.simulator build-library                  # rewrite the packaged default library
    python -m toolcanary.simulator build-library --check          # exit 1 if the committed JSON is stale
    python -m toolcanary.simulator build-library --out build/library.json   # elsewhere

The output is category -> toolset name -> [tool entry], each entry `{"type": "function", "function": {...},
"toolset_name", "toolset_description", "category", "x_result"}`. `x_result` (result kind and schema) is read
only by the scripted tool role; `load_tool_library` ignores it and the policy never sees it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolcanary.simulator import library_catalog_life as life
from toolcanary.simulator import library_catalog_money as money
from toolcanary.simulator import library_catalog_people as people
from toolcanary.simulator import library_catalog_places as places
from toolcanary.simulator import library_catalog_work as work
from toolcanary.simulator.library_index import DEFAULT_LIBRARY_PATH
from toolcanary.simulator.library_schema import Toolset, expand_toolset

CATALOG: dict[str, list[Toolset]] = {
    "productivity": work.PRODUCTIVITY,
    "communication": work.COMMUNICATION,
    "software_operations": work.DEVOPS,
    "finance": money.FINANCE,
    "commerce": money.COMMERCE,
    "travel": life.TRAVEL,
    "health": life.HEALTH,
    "media": life.MEDIA,
    "home": places.HOME,
    "learning": places.LEARNING,
    "maps_and_weather": places.MAPS,
    "people_operations": people.PEOPLE,
}


def build_library() -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The whole library as plain JSON data; raises ValueError on a duplicate tool name."""
    library: dict[str, dict[str, list[dict[str, Any]]]] = {}
    seen: set[str] = set()
    for category, toolsets in CATALOG.items():
        library[category] = {}
        for toolset in toolsets:
            entries = expand_toolset(toolset, category)
            for entry in entries:
                name = entry["function"]["name"]
                if name in seen:
                    raise ValueError(f"duplicate tool name {name!r} in {category}/{toolset.name}")
                seen.add(name)
            library[category][toolset.name] = entries
    return library


def render(library: dict) -> str:
    return json.dumps(library, indent=1, ensure_ascii=False) + "\n"


def summary(library: dict) -> str:
    tools = sum(len(entries) for toolsets in library.values() for entries in toolsets.values())
    toolsets = sum(len(toolsets) for toolsets in library.values())
    return f"{tools} tools in {toolsets} toolsets over {len(library)} categories"


def is_current(path: Path = DEFAULT_LIBRARY_PATH) -> bool:
    """Whether `path` holds exactly what the catalog builds now."""
    return path.exists() and path.read_text() == render(build_library())


def write_library(path: Path = DEFAULT_LIBRARY_PATH) -> str:
    """Write the library to `path`; returns a one-line summary."""
    library = build_library()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(library))
    return summary(library)


def build_or_check(out: Path | None = None, check: bool = False) -> tuple[int, str]:
    """`build-library`: write the library to `out` (default: the packaged file), or with `check` only compare;
    the exit status and the line to show (on stderr when the status is not 0)."""
    out = out or DEFAULT_LIBRARY_PATH
    if check:
        if not is_current(out):
            return 1, f"{out} is stale: rebuild with `python -m toolcanary.simulator build-library`"
        return 0, f"{out} is up to date"
    return 0, f"wrote {out}: {write_library(out)}"

