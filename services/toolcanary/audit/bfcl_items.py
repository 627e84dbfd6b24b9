"""BFCL's test items for the audit: per item, its questions (one per user turn) and the functions it offers.

Read straight from the installed bfcl-eval data files (importing bfcl_eval's runner costs seconds). A
multi-turn item offers every function of its `involved_classes`, taken from BFCL's multi-turn function docs;
the functions `miss_func` withholds at first are still offered later in the conversation, so they count.

Used by `python -m toolcanary.audit` (see its --help).
"""

from __future__ import annotations

import difflib
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolcanary.audit.text_features import strip_bfcl_banner
from toolcanary.contract.bfcl import OFFLINE_CATEGORIES
from toolcanary.contract.errors import ContractError
from toolcanary.evaluate.bfcl_data import RESULT_PREFIX, package_dir


@dataclass(frozen=True)
class BfclFunction:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class BfclItem:
    category: str
    id: str
    turns: tuple[str, ...]
    """The user content of each turn that has any (system prompts and empty turns are left out)."""
    functions: tuple[BfclFunction, ...]


def _function(raw: dict[str, Any]) -> BfclFunction:
    return BfclFunction(
        name=str(raw.get("name", "")),
        description=strip_bfcl_banner(str(raw.get("description", ""))),
        parameters=raw.get("parameters") or {},
    )


@functools.cache
def _class_functions(class_name: str) -> tuple[BfclFunction, ...]:
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    if class_name not in MULTI_TURN_FUNC_DOC_FILE_MAPPING:
        raise ContractError(
            "BFCL multi-turn item",
            f"one of the classes {sorted(MULTI_TURN_FUNC_DOC_FILE_MAPPING)}",
            repr(class_name),
            "Use bfcl-eval 2026.3.23, the version ToolCanary pins",
        )
    path = package_dir() / "data" / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]
    return tuple(_function(json.loads(line)) for line in path.read_text().split("\n") if line.strip())


def _turns(question: list[Any]) -> tuple[str, ...]:
    turns = []
    for turn in question:
        messages = turn if isinstance(turn, list) else [turn]
        text = " ".join(
            str(m.get("content", "")) for m in messages if isinstance(m, dict) and m.get("role") == "user"
        )
        if text.strip():
            turns.append(text.strip())
    return tuple(turns)


def parse_item(category: str, raw: dict[str, Any]) -> BfclItem:
    """One line of a BFCL data file as an audit item."""
    if "involved_classes" in raw:
        functions = tuple(f for c in raw["involved_classes"] for f in _class_functions(c))
    else:
        functions = tuple(_function(f) for f in raw.get("function", []))
    return BfclItem(category, str(raw["id"]), _turns(raw.get("question", [])), functions)


def load_category(category: str) -> list[BfclItem]:
    # The offline categories keep their own file and id prefix (only memory_* and web_search_* share one).
    path = data_dir() / f"{RESULT_PREFIX}{category}.json"
    if not path.is_file():
        raise ContractError(
            str(path),
            f"BFCL's data file for {category}",
            "no such file",
            "Run the audit from .venvs/eval or the eval image (bfcl-eval 2026.3.23)",
        )
    items = []
    for number, line in enumerate(path.read_text().split("\n"), start=1):  # "\n" only, not U+2028
        if not line.strip():
            continue
        try:
            items.append(parse_item(category, json.loads(line)))
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ContractError(
                f"{path}: line {number}",
                "a BFCL test item with an id",
                repr(err)[:200],
                "Reinstall bfcl-eval 2026.3.23; its data file is damaged",
            ) from err
    return items


def load_bfcl_items(categories: tuple[str, ...] = OFFLINE_CATEGORIES) -> list[BfclItem]:
    """Every item of the given categories, in BFCL's order (default: the 17 offline categories)."""
    unknown = [c for c in categories if c not in OFFLINE_CATEGORIES]
    if unknown:
        hints = {c: difflib.get_close_matches(c, OFFLINE_CATEGORIES, n=2) for c in unknown}
        raise ContractError(
            "--categories",
            f"offline BFCL V4 categories ({', '.join(OFFLINE_CATEGORIES)})",
            repr(unknown),
            f"Did you mean: {hints}?",
        )
    return [item for category in categories for item in load_category(category)]


def data_dir() -> Path:
    return package_dir() / "data"
