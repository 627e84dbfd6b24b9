"""BFCL V4 categories (bfcl-eval 2026.3.23) and ToolCanary's five aggregates over them.

Aggregates are computed from raw correct/total counts, never from BFCL's own roll-ups: BFCL counts a
missing category as 0, whereas `compute_aggregates` refuses to compute an aggregate with a part missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from toolcanary.contract.errors import ContractError

Group = Literal["non_live", "live", "multi_turn", "agentic"]
Kind = Literal["ast", "irrelevance", "relevance", "multi_turn", "agentic"]


@dataclass(frozen=True)
class Category:
    name: str
    group: Group
    kind: Kind
    items: int


CATEGORIES: tuple[Category, ...] = (
    Category("simple_python", "non_live", "ast", 400),
    Category("simple_java", "non_live", "ast", 100),
    Category("simple_javascript", "non_live", "ast", 50),
    Category("multiple", "non_live", "ast", 200),
    Category("parallel", "non_live", "ast", 200),
    Category("parallel_multiple", "non_live", "ast", 200),
    Category("irrelevance", "non_live", "irrelevance", 240),
    Category("live_simple", "live", "ast", 258),
    Category("live_multiple", "live", "ast", 1053),
    Category("live_parallel", "live", "ast", 16),
    Category("live_parallel_multiple", "live", "ast", 24),
    Category("live_irrelevance", "live", "irrelevance", 884),
    Category("live_relevance", "live", "relevance", 16),
    Category("multi_turn_base", "multi_turn", "multi_turn", 200),
    Category("multi_turn_miss_func", "multi_turn", "multi_turn", 200),
    Category("multi_turn_miss_param", "multi_turn", "multi_turn", 200),
    Category("multi_turn_long_context", "multi_turn", "multi_turn", 200),
    # Opt-in: web search needs a paid backend and the live web; memory_vector downloads an embedding model.
    Category("memory_kv", "agentic", "agentic", 155),
    Category("memory_vector", "agentic", "agentic", 155),
    Category("memory_rec_sum", "agentic", "agentic", 155),
    Category("web_search_base", "agentic", "agentic", 100),
    Category("web_search_no_snippet", "agentic", "agentic", 100),
)
BY_NAME: dict[str, Category] = {c.name: c for c in CATEGORIES}
OFFLINE_CATEGORIES: tuple[str, ...] = tuple(c.name for c in CATEGORIES if c.group != "agentic")

SIMPLE = ("simple_python", "simple_java", "simple_javascript")
NON_LIVE_AST = SIMPLE + ("multiple", "parallel", "parallel_multiple")
LIVE_AST = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
AST = NON_LIVE_AST + LIVE_AST
ABSTENTION = ("irrelevance", "live_irrelevance")
MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")


@dataclass(frozen=True)
class Aggregate:
    name: str
    categories: tuple[str, ...]
    definition: str

    @property
    def items(self) -> int:
        return sum(BY_NAME[c].items for c in self.categories)


AGGREGATES: tuple[Aggregate, ...] = (
    Aggregate("Abstention required", ABSTENTION, "pooled correct/total over irrelevance + live_irrelevance"),
    Aggregate("Tool call required", AST, "pooled correct/total over the ten AST categories"),
    Aggregate(
        "Non-Live",
        NON_LIVE_AST,
        "mean of Simple (mean of the three simple_*), multiple, parallel, parallel_multiple",
    ),
    Aggregate("Live", LIVE_AST, "pooled correct/total over the four live AST categories"),
    Aggregate("Multi-Turn", MULTI_TURN, "unweighted mean of the four multi_turn categories"),
)
AGGREGATE_NAMES: tuple[str, ...] = tuple(a.name for a in AGGREGATES)

Counts = Mapping[str, tuple[int, int]]


def pooled(counts: Counts, names: tuple[str, ...]) -> float:
    """Percent correct over the union of the categories' items."""
    correct = sum(counts[n][0] for n in names)
    total = sum(counts[n][1] for n in names)
    if total == 0:
        raise ContractError(f"categories {list(names)}", "at least one item", "a total of 0")
    return 100.0 * correct / total


def accuracy(counts: Counts, name: str) -> float:
    return pooled(counts, (name,))


def mean_accuracy(counts: Counts, names: tuple[str, ...]) -> float:
    return sum(accuracy(counts, n) for n in names) / len(names)


def aggregate_value(name: str, counts: Counts) -> float:
    """One aggregate in percent, from (correct, total) per category.

    Raises:
        ContractError: a category the aggregate needs is missing or has no items.
    """
    aggregate = next((a for a in AGGREGATES if a.name == name), None)
    if aggregate is None:
        raise ContractError("aggregate", f"one of {list(AGGREGATE_NAMES)}", repr(name))
    missing = [c for c in aggregate.categories if c not in counts]
    if missing:
        raise ContractError(
            f"aggregate {name!r}",
            f"counts for {list(aggregate.categories)}",
            f"{missing} missing",
            "Score every category the aggregate needs; a missing one is never counted as 0",
        )
    if name == "Non-Live":
        return (mean_accuracy(counts, SIMPLE) + sum(accuracy(counts, c) for c in NON_LIVE_AST[3:])) / 4
    if name == "Multi-Turn":
        return mean_accuracy(counts, MULTI_TURN)
    return pooled(counts, aggregate.categories)


def compute_aggregates(counts: Counts, *, skip_incomplete: bool = False) -> dict[str, float]:
    """All five aggregates; with `skip_incomplete`, those whose categories are not all present are left out."""
    result = {}
    for aggregate in AGGREGATES:
        if skip_incomplete and not all(c in counts for c in aggregate.categories):
            continue
        result[aggregate.name] = aggregate_value(aggregate.name, counts)
    return result
