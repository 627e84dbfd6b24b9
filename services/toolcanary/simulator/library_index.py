"""The tool library as the simulator uses it: usable tools, result hints, and TRUSTEE-style tool sampling.

Both backends' task authors draw a task's tools here: one category chosen uniformly (among those large enough),
its toolsets shuffled and added until the pool holds `num_tools` tools, then `num_tools` sampled from the pool.
An abstention task of the trustee mode draws the tools it is served with here too, with the categories and
names of the tools its author wrote it for excluded (`exclude`, `exclude_names`). The `x_result` hints that
`library_builder` writes are kept for the scripted tool role.

The file is read by the contract's rule (`toolcanary.contract.tasks`): entries that are not usable tools are
left out and listed (`left_out`), never a reason to refuse the file. Entries with the same name all stay in
their toolsets, so each is drawn as TRUSTEE draws it; a look-up by name (`tools`, `result_hints`) gives the
first of that name in the file.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Collection
from functools import lru_cache
from pathlib import Path
from typing import Any

from toolcanary.contract import LibraryTool, ToolLibrary
from toolcanary.contract.tasks import LeftOutEntry, library_from_json, read_library_file

DEFAULT_LIBRARY_PATH = Path(__file__).parent / "data" / "default_library.json"


def _result_hints(raw: dict, names: set[str]) -> dict[str, dict[str, Any]]:
    """The `x_result` of the first entry of each usable name that has one."""
    hints: dict[str, dict[str, Any]] = {}
    for toolsets in raw.values():
        for entries in toolsets.values() if isinstance(toolsets, dict) else ():
            for entry in entries if isinstance(entries, list) else ():
                if not isinstance(entry, dict) or not isinstance(entry.get("x_result"), dict):
                    continue
                name = entry["function"].get("name") if isinstance(entry.get("function"), dict) else None
                if name in names:
                    hints.setdefault(name, entry["x_result"])
    return hints


class NoOtherCategory(ValueError):
    """A draw that must avoid some categories (and tool names) found no tool left to draw."""


class LibraryIndex:
    """A loaded library plus look-ups by tool name.

    `len()` counts every usable entry, entries with the same name included: the tools sampling draws from.
    `sha256` is that of the bytes the tools were read from.

    Raises:
        ContractError: the file is missing or not JSON, not an object of categories, or has no usable tool.
    """

    def __init__(self, path: str | Path = DEFAULT_LIBRARY_PATH) -> None:
        self.path = Path(path)
        data, raw = read_library_file(self.path)  # read once: the hash, the tools and the hints of the same bytes
        self.sha256 = hashlib.sha256(data).hexdigest()
        del data  # 15 MB for TRUSTEE's library, not needed while the tools are built
        self.library: ToolLibrary = library_from_json(raw, str(self.path))
        self.tools: dict[str, LibraryTool] = {}
        for tool in self.library.all_tools():
            self.tools.setdefault(tool.schema_.name, tool)
        self.result_hints = _result_hints(raw, set(self.tools))
        self.size = len(self.library)
        self.duplicate_names = self.library.duplicate_names()
        self.categories = sorted(c for c, ts in self.library.categories.items() if any(ts.values()))

    def __len__(self) -> int:
        return self.size

    @property
    def left_out(self) -> list[LeftOutEntry]:
        return self.library.left_out

    def left_out_summary(self, limit: int = 10) -> str:
        """The first `limit` entries left out, each with where it is and why, for a log line."""
        shown = "; ".join(str(entry) for entry in self.left_out[:limit])
        more = len(self.left_out) - limit
        return shown + (f"; and {more} more" if more > 0 else "")

    def describe(self) -> str:
        """A few words on what was loaded: tools, names shared by several tools, entries left out."""
        text = f"{self.size} tools"
        if self.duplicate_names:
            text += (f", {len(self.duplicate_names)} names shared by several tools (all kept, each drawn on its "
                     f"own as TRUSTEE draws it)")
        if self.left_out:
            text += f", {len(self.left_out)} entries left out as not usable"
        return text

    def category_tools(self, category: str) -> list[LibraryTool]:
        return [t for tools in self.library.categories[category].values() for t in tools]

    def sample_tools(self, num_tools: int, rng: random.Random, avoid: str | None = None,
                     trustee: bool = False, exclude: Collection[str] = (),
                     exclude_names: Collection[str] = ()) -> list[LibraryTool]:
        """`num_tools` tools from one category (topped up from others only if no category is big enough).

        `trustee`: TRUSTEE's rule instead: any category, uniformly; one smaller than `num_tools` gives all it has.
        `exclude`, `exclude_names` (the tools an abstention task is served with): categories never drawn from,
        and no tool offered whose own category is one of them or whose name is one of these. With them the
        trustee rule draws among the categories that still hold `num_tools` tools, when any does, so that the
        task offers as many tools as its author was shown. Unlike `avoid`, there is no fallback.

        Raises:
            NoOtherCategory: with `exclude` or `exclude_names`, no category holds a tool left to draw.
        """
        excluding = bool(exclude or exclude_names)

        def usable(tools: list[LibraryTool]) -> list[LibraryTool]:
            if not excluding:
                return tools
            return [t for t in tools if t.category not in exclude and t.schema_.name not in exclude_names]

        if excluding:
            choices = [c for c in self.categories if c != avoid and c not in exclude
                       and usable(self.category_tools(c))]
            if not choices:
                raise NoOtherCategory(
                    f"expected a category other than {sorted(exclude)[:10]} holding a tool not named "
                    f"{sorted(exclude_names)[:10]}; the library {self.path.name} has {len(self.categories)} "
                    f"categories ({', '.join(self.categories[:10])}) and none is left")
        else:
            choices = [c for c in self.categories if c != avoid] or list(self.categories)
        big_enough = [c for c in choices if len(usable(self.category_tools(c))) >= num_tools]
        if trustee:
            category = rng.choice(big_enough or choices) if excluding else rng.choice(choices)
        else:
            category = rng.choice(big_enough) if big_enough else max(
                choices, key=lambda c: len(usable(self.category_tools(c))))
        toolsets = [usable(tools) for tools in self.library.categories[category].values()]
        rng.shuffle(toolsets)
        pool: list[LibraryTool] = []
        for tools in toolsets:
            pool.extend(tools)
            if len(pool) >= num_tools:
                break
        if len(pool) < num_tools and not trustee:
            others = [t for c in choices if c != category for t in usable(self.category_tools(c))]
            pool.extend(rng.sample(others, min(len(others), num_tools - len(pool))))
        return rng.sample(pool, min(num_tools, len(pool)))


@lru_cache(maxsize=4)
def load_index(path: str = str(DEFAULT_LIBRARY_PATH)) -> LibraryIndex:
    """A cached `LibraryIndex` (the default library is loaded once per process)."""
    return LibraryIndex(path)
