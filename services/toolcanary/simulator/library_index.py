"""The tool library as the simulator uses it: validated tools, result hints, and TRUSTEE-style tool sampling.

Both backends' task authors draw a task's tools here: one category chosen uniformly (among those large enough),
its toolsets shuffled and added until the pool holds `num_tools` tools, then `num_tools` sampled from the pool.
The `x_result` hints that `library_builder` writes are kept for the scripted tool role.
"""

from __future__ import annotations

import json
import random
from functools import lru_cache
from pathlib import Path
from typing import Any

from toolcanary.contract import LibraryTool, ToolLibrary, load_tool_library

DEFAULT_LIBRARY_PATH = Path(__file__).parent / "data" / "default_library.json"


class LibraryIndex:
    """A loaded library plus look-ups by tool name.

    Raises:
        ContractError: from `load_tool_library` when the file is not in TRUSTEE's format.
    """

    def __init__(self, path: str | Path = DEFAULT_LIBRARY_PATH) -> None:
        self.path = Path(path)
        self.library: ToolLibrary = load_tool_library(self.path)
        raw = json.loads(self.path.read_text())
        self.result_hints: dict[str, dict[str, Any]] = {}
        for toolsets in raw.values():
            for entries in toolsets.values():
                for entry in entries:
                    if isinstance(entry, dict) and isinstance(entry.get("x_result"), dict):
                        self.result_hints[entry["function"]["name"]] = entry["x_result"]
        self.tools: dict[str, LibraryTool] = {t.schema_.name: t for t in self.library.all_tools()}
        self.categories = sorted(c for c, ts in self.library.categories.items() if any(ts.values()))

    def __len__(self) -> int:
        return len(self.tools)

    def category_tools(self, category: str) -> list[LibraryTool]:
        return [t for tools in self.library.categories[category].values() for t in tools]

    def sample_tools(self, num_tools: int, rng: random.Random, avoid: str | None = None,
                     trustee: bool = False) -> list[LibraryTool]:
        """`num_tools` tools from one category (topped up from others only if no category is big enough).

        `trustee`: TRUSTEE's rule instead: any category, uniformly; one smaller than `num_tools` gives all it has.
        """
        choices = [c for c in self.categories if c != avoid] or list(self.categories)
        big_enough = [c for c in choices if len(self.category_tools(c)) >= num_tools]
        if trustee:
            category = rng.choice(choices)
        else:
            category = rng.choice(big_enough) if big_enough else max(choices, key=lambda c: len(self.category_tools(c)))
        toolsets = list(self.library.categories[category].values())
        rng.shuffle(toolsets)
        pool: list[LibraryTool] = []
        for tools in toolsets:
            pool.extend(tools)
            if len(pool) >= num_tools:
                break
        if len(pool) < num_tools and not trustee:
            others = [t for c in choices if c != category for t in self.category_tools(c)]
            pool.extend(rng.sample(others, min(len(others), num_tools - len(pool))))
        return rng.sample(pool, min(num_tools, len(pool)))


@lru_cache(maxsize=4)
def load_index(path: str = str(DEFAULT_LIBRARY_PATH)) -> LibraryIndex:
    """A cached `LibraryIndex` (the default library is loaded once per process)."""
    return LibraryIndex(path)
