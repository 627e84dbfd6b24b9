"""Per BFCL item: its nearest training tools and generated tasks, the scores, and the three flags.

Functions and turns are deduplicated before scoring (the four multi-turn categories share their function
docs and most of their questions), then every item takes the best of its own functions and turns.

Flags (thresholds in `AuditSettings`, reasons in docs/audit.md):
- `exact_name`: some function of the item has a training tool with the same normalised name;
- `near_duplicate_schema`: some function's TF-IDF cosine to a training tool is >= `schema_threshold`;
- `query_overlap`: some turn with >= `min_query_words` content words has a TF-IDF cosine >=
  `query_threshold` to one generated task.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from toolcanary.audit.bfcl_items import BfclFunction, BfclItem
from toolcanary.audit.neighbours import (
    Neighbours,
    exact_names,
    name_neighbours,
    query_neighbours,
    schema_neighbours,
    verbatim,
)
from toolcanary.audit.settings import AuditSettings
from toolcanary.audit.text_features import content_words
from toolcanary.audit.training_inputs import GeneratedTask, TrainingTool

FLAGS = ("exact_name", "near_duplicate_schema", "query_overlap")


@dataclass(frozen=True)
class Neighbour:
    key: str
    score: float
    via: str
    """The BFCL function name (tools) or the turn number (tasks) the score was reached from."""


@dataclass(frozen=True)
class ItemAudit:
    item: BfclItem
    exact: tuple[Neighbour, ...]
    name: Neighbour | None
    schemas: tuple[Neighbour, ...]
    queries: tuple[Neighbour, ...]
    query_verbatim: float | None
    """Share of the best-matching turn's word n-grams found verbatim in the best task."""
    judged_turns: int
    """Turns long enough for the query measure (>= min_query_words content words)."""
    flags: tuple[str, ...]


def _unique(values: Sequence, key) -> tuple[list, dict]:
    """The distinct values in first-seen order, and each key's position among them."""
    firsts: dict = {}
    for value in values:
        firsts.setdefault(key(value), value)
    return list(firsts.values()), {k: i for i, k in enumerate(firsts)}


def _function_key(function: BfclFunction) -> tuple[str, str, str]:
    return function.name, function.description, json.dumps(function.parameters, sort_keys=True, default=str)


def _best(candidates: list[Neighbour], k: int) -> tuple[Neighbour, ...]:
    best: dict[str, Neighbour] = {}
    for candidate in candidates:
        if candidate.key not in best or candidate.score > best[candidate.key].score:
            best[candidate.key] = candidate
    return tuple(sorted(best.values(), key=lambda n: (-n.score, n.key))[:k])


@dataclass(frozen=True)
class _Scored:
    """The measures over the distinct functions and turns, and how to read them back per item."""

    settings: AuditSettings
    tools: Sequence[TrainingTool]
    tasks: Sequence[GeneratedTask]
    task_text: dict[str, str]
    functions: list[BfclFunction]
    function_index: dict
    turn_index: dict[str, int]
    turn_words: list[int]
    exact: list[list[int]]
    names: Neighbours | None
    schemas: Neighbours
    queries: Neighbours

    def tool_hits(
        self, item: BfclItem
    ) -> tuple[tuple[Neighbour, ...], Neighbour | None, tuple[Neighbour, ...]]:
        """(same-name tools, best name-core neighbour, best schema neighbours) over the item's functions."""
        rows = [self.function_index[_function_key(f)] for f in item.functions]
        k = self.settings.top_k
        exact = _best(
            [Neighbour(self.tools[t].key, 1.0, self.functions[r].name) for r in rows for t in self.exact[r]],
            k,
        )
        names = (
            []
            if self.names is None
            else [
                Neighbour(
                    self.tools[self.names.indices[r, 0]].key,
                    float(self.names.scores[r, 0]),
                    self.functions[r].name,
                )
                for r in rows
                if self.names.indices[r, 0] >= 0 and self.names.scores[r, 0] > 0
            ]
        )
        schemas = [
            Neighbour(self.tools[t].key, float(s), self.functions[r].name)
            for r in rows
            for t, s in zip(self.schemas.indices[r], self.schemas.scores[r], strict=True)
            if t >= 0 and s > 0
        ]
        return exact, (_best(names, 1) or (None,))[0], _best(schemas, k)

    def task_hits(self, item: BfclItem) -> tuple[tuple[Neighbour, ...], float | None, int]:
        """(best tasks over the judged turns, verbatim share of the best, number of judged turns)."""
        judged = [
            (number, self.turn_index[turn])
            for number, turn in enumerate(item.turns, start=1)
            if self.turn_words[self.turn_index[turn]] >= self.settings.min_query_words
        ]
        hits = _best(
            [
                Neighbour(self.tasks[t].task_id, float(s), f"turn {number}")
                for number, r in judged
                for t, s in zip(self.queries.indices[r], self.queries.scores[r], strict=True)
                if t >= 0 and s > 0
            ],
            self.settings.top_k,
        )
        if not hits:
            return hits, None, len(judged)
        best_turn = item.turns[int(hits[0].via.split()[-1]) - 1]
        copied = verbatim(best_turn, self.task_text[hits[0].key], self.settings.verbatim_ngram)
        return hits, copied, len(judged)


def audit_items(
    items: Sequence[BfclItem],
    tools: Sequence[TrainingTool],
    tasks: Sequence[GeneratedTask],
    settings: AuditSettings,
    progress: bool = True,
) -> list[ItemAudit]:
    """Score every item against the training tools and tasks and set its flags."""
    functions, function_index = _unique([f for i in items for f in i.functions], _function_key)
    turns, turn_index = _unique([t for i in items for t in i.turns], lambda t: t)
    scored = _Scored(
        settings,
        tools,
        tasks,
        {t.task_id: t.query for t in tasks},
        functions,
        function_index,
        turn_index,
        [len(content_words(t)) for t in turns],
        exact_names(functions, tools),
        name_neighbours(functions, tools, settings.chunk_rows, progress) if tools else None,
        schema_neighbours(functions, tools, settings.top_k, settings.chunk_rows, progress),
        query_neighbours(turns, tasks, settings.query_ngram, settings.top_k, settings.chunk_rows, progress),
    )
    audits = []
    for item in items:
        exact, name, schemas = scored.tool_hits(item)
        queries, copied, judged = scored.task_hits(item)
        flags = tuple(
            flag
            for flag, hit in zip(
                FLAGS,
                (
                    bool(exact),
                    bool(schemas) and schemas[0].score >= settings.schema_threshold,
                    bool(queries) and queries[0].score >= settings.query_threshold,
                ),
                strict=True,
            )
            if hit
        )
        audits.append(ItemAudit(item, exact, name, schemas, queries, copied, judged, flags))
    return audits
