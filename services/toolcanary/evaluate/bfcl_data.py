"""BFCL's item ids per category, read straight from the installed bfcl-eval data files, and id sampling.

Reading the JSON files directly keeps the client fast: importing bfcl_eval itself costs about 9 s. Also
the home of guard unknown-ids (guards.UNKNOWN_IDS): an id that matches no BFCL item is refused here, because bfcl-eval's `--run-ids`
drops unknown ids without a word.

Used by every pass (`toolcanary.evaluate.runner`); `python -m toolcanary.evaluate ls` lists the categories it reads.
`function_names` gives the functions each item offers, which the answer kinds need (toolcanary.evaluate.answers).
"""

from __future__ import annotations

import difflib
import functools
import importlib.metadata
import importlib.util
import json
import random
from pathlib import Path

from toolcanary.contract.bfcl import BY_NAME, MULTI_TURN
from toolcanary.contract.errors import ContractError
from toolcanary.evaluate import guards

RESULT_PREFIX = "BFCL_v4_"


@functools.cache
def package_dir() -> Path:
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise ContractError(
            "python environment", "bfcl-eval 2026.3.23 installed", "no bfcl_eval package",
            "Run the client from .venvs/eval (python3 scripts/setup_venvs.py eval) or the eval image",
        )
    return Path(next(iter(spec.submodule_search_locations)))


def bfcl_version() -> str:
    return importlib.metadata.version("bfcl-eval")


def _data_file(category: str) -> tuple[Path, str, str]:
    """(file, id prefix in the file, id prefix BFCL gives the category's items at load time)."""
    data = package_dir() / "data"
    if category.startswith("memory_"):
        return data / f"{RESULT_PREFIX}memory.json", "memory", category
    if category.startswith("web_search_"):
        return data / f"{RESULT_PREFIX}web_search.json", "web_search", category
    return data / f"{RESULT_PREFIX}{category}.json", category, category


@functools.cache
def category_ids(category: str) -> tuple[str, ...]:
    """Every scored item id of a category, in BFCL's data order."""
    check_categories([category])
    path, old, new = _data_file(category)
    with path.open() as handle:
        ids = [json.loads(line)["id"] for line in handle if line.strip()]
    return tuple(i.replace(old, new, 1) for i in ids)


@functools.cache
def function_names(category: str) -> dict[str, tuple[str, ...]]:
    """The names of the functions each item of a category offers, by item id, as BFCL's data spells them.

    Single-turn items list their functions; multi-turn and agentic items name the classes they involve, and
    get every function of those classes (bfcl-eval's `multi_turn_func_doc` files), the ones a miss_func item
    holds back until a later turn included.
    """
    check_categories([category])
    path, old, new = _data_file(category)
    names = {}
    with path.open() as handle:
        for line in filter(str.strip, handle):
            entry = json.loads(line)
            if "function" in entry:
                offered = tuple(doc["name"] for doc in entry["function"])
            else:
                offered = tuple(n for c in entry.get("involved_classes", []) for n in _class_functions(c, category))
            names[entry["id"].replace(old, new, 1)] = offered
    return names


@functools.cache
def _class_functions(involved_class: str, category: str) -> tuple[str, ...]:
    # A module of constants: importing it costs nothing of bfcl_eval's own import time.
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    # bfcl-eval picks a memory item's backend from its category at load time (MemoryAPI -> MemoryAPI_kv).
    if involved_class == "MemoryAPI" and category.startswith("memory_"):
        involved_class = f"MemoryAPI_{category.removeprefix('memory_')}"
    if involved_class not in MULTI_TURN_FUNC_DOC_FILE_MAPPING:
        raise ContractError(f"bfcl-eval {bfcl_version()} data, category {category}",
                            f"involved classes among {sorted(MULTI_TURN_FUNC_DOC_FILE_MAPPING)}",
                            repr(involved_class), "Install the bfcl-eval version the client pins (eval lock)")
    path = package_dir() / "data" / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILE_MAPPING[involved_class]
    with path.open() as handle:
        return tuple(json.loads(line)["name"] for line in handle if line.strip())


def check_categories(categories: list[str]) -> None:
    unknown = [c for c in categories if c not in BY_NAME]
    if unknown:
        hints = {c: difflib.get_close_matches(c, list(BY_NAME), n=2) for c in unknown}
        raise ContractError(
            "--categories", f"BFCL V4 category names ({', '.join(BY_NAME)})", f"{unknown}",
            f"Did you mean: {hints}?",
        )


def choose_sample(categories: list[str], size: int, seed: int,
                  multi_turn_size: int | None = None) -> dict[str, list[str]]:
    """The same `size` ids per category for a given seed, whatever the pass or machine (in data order);
    `multi_turn_size` ids instead for the multi-turn categories, whose items cost many model calls each."""
    for flag, value in (("--sample", size), ("--sample-multi-turn", multi_turn_size)):
        if value is not None and value < 1:
            raise ContractError(flag, "a positive number of items per category", str(value))
    chosen: dict[str, list[str]] = {}
    for category in categories:
        ids = category_ids(category)
        wanted = multi_turn_size if multi_turn_size and category in MULTI_TURN else size
        picked = set(random.Random(f"{seed}/{category}").sample(ids, min(wanted, len(ids))))
        chosen[category] = [i for i in ids if i in picked]
    return chosen


def item_bank(sizes: dict[str, int], seed: int) -> dict[str, list[str]]:
    """A fixed bank of items, each category at its own size (0: every item), drawn as `choose_sample` draws,
    for `--ids-file`: e.g. every `irrelevance` item and a seeded sample of the rest."""
    check_categories(list(sizes))
    bank: dict[str, list[str]] = {}
    for category, size in sizes.items():
        if size < 0:
            raise ContractError(f"--sizes {category}={size}", "a number of items >= 0 (0: every item)", str(size))
        bank[category] = list(category_ids(category)) if size == 0 else choose_sample([category], size, seed)[category]
    return bank


@guards.enforces(guards.UNKNOWN_IDS)
def check_ids(requested: dict[str, list[str]], where: str) -> None:
    """Every requested id must be a BFCL item of the category it is listed under."""
    check_categories(list(requested))
    problems = []
    for category, ids in requested.items():
        known = set(category_ids(category))
        for item in ids:
            if item not in known:
                near = difflib.get_close_matches(item, list(known), n=1)
                problems.append(f"{item!r} in {category}" + (f" (did you mean {near[0]!r}?)" if near else ""))
        if not ids:
            problems.append(f"no ids for {category}")
    if problems:
        shown = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
        raise ContractError(
            where, "ids that match BFCL items of their category", f"{len(problems)} that do not: {shown}",
            "bfcl-eval would skip them silently; fix the id list (ids look like live_simple_29-7-2)",
        )


def group_dir(category: str) -> str:
    """The folder BFCL files a category's results and scores under."""
    group = BY_NAME[category].group
    if category.startswith("memory_"):
        return f"agentic/memory/{category.removeprefix('memory_')}"
    return group
