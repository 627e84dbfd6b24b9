"""The three measures of closeness, each computed for every BFCL function or turn at once.

- exact names: a dictionary from `normalised_name` to training tools;
- name neighbour: Jaccard of the verb-free name tokens (`name_core`), reported, never flagged;
- schema similarity: TF-IDF cosine over name + description + parameter names, fitted on training tools and
  BFCL functions together (so a word common in both counts for little);
- query overlap: TF-IDF cosine over content words and word pairs between a BFCL turn and a generated
  task (fitted on both, so shared rare terms, the names, numbers and places a question is made of, weigh
  most); plus, for the listed neighbours only, the share of the turn's word n-grams found verbatim.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

from toolcanary.audit.bfcl_items import BfclFunction
from toolcanary.audit.sparse_top_k import jaccard, row_sizes, top_k
from toolcanary.audit.text_features import (
    content_ngrams,
    name_core,
    normalised_name,
    query_terms,
    schema_text,
)
from toolcanary.audit.training_inputs import GeneratedTask, TrainingTool


@dataclass(frozen=True)
class Neighbours:
    """Per left row: right row numbers (-1: none) and scores, best first."""

    indices: np.ndarray
    scores: np.ndarray


def exact_names(functions: Sequence[BfclFunction], tools: Sequence[TrainingTool]) -> list[list[int]]:
    """Per BFCL function, the training tools whose normalised name is the same (possibly none)."""
    by_name: dict[str, list[int]] = {}
    for number, tool in enumerate(tools):
        by_name.setdefault(normalised_name(tool.name), []).append(number)
    return [by_name.get(normalised_name(f.name), []) if normalised_name(f.name) else [] for f in functions]


def _identity(tokens: object) -> object:
    return tokens


def name_neighbours(
    functions: Sequence[BfclFunction], tools: Sequence[TrainingTool], chunk_rows: int, progress: bool = True
) -> Neighbours:
    vectorizer = CountVectorizer(analyzer=_identity, binary=True, dtype=np.float32)
    vectorizer.fit([name_core(t.name) for t in tools] + [name_core(f.name) for f in functions])
    left = vectorizer.transform([name_core(f.name) for f in functions])
    right = vectorizer.transform([name_core(t.name) for t in tools])
    transform = jaccard(row_sizes(left), row_sizes(right))
    return Neighbours(
        *top_k(left, right, 1, chunk_rows, transform=transform, desc="names", progress=progress)
    )


def schema_neighbours(
    functions: Sequence[BfclFunction],
    tools: Sequence[TrainingTool],
    k: int,
    chunk_rows: int,
    progress: bool = True,
) -> Neighbours:
    bfcl_docs = [schema_text(f.name, f.description, f.parameters) for f in functions]
    tool_docs = [schema_text(t.name, t.description, t.parameters) for t in tools]
    if not tool_docs or not bfcl_docs:
        return Neighbours(np.full((len(bfcl_docs), k), -1), np.zeros((len(bfcl_docs), k), np.float32))
    vectorizer = TfidfVectorizer(sublinear_tf=True, token_pattern=r"[a-z0-9]+", dtype=np.float32)
    vectorizer.fit(tool_docs + bfcl_docs)
    left, right = vectorizer.transform(bfcl_docs), vectorizer.transform(tool_docs)
    return Neighbours(*top_k(left, right, k, chunk_rows, desc="schemas", progress=progress))


def query_neighbours(
    turns: Sequence[str],
    tasks: Sequence[GeneratedTask],
    n: int,
    k: int,
    chunk_rows: int,
    progress: bool = True,
) -> Neighbours:
    """TF-IDF cosine between each turn and each task over content words and n-grams up to `n`."""
    if not tasks or not turns:
        return Neighbours(np.full((len(turns), k), -1), np.zeros((len(turns), k), np.float32))
    vectorizer = TfidfVectorizer(analyzer=partial(query_terms, n=n), sublinear_tf=True, dtype=np.float32)
    vectorizer.fit(list(turns) + [t.query for t in tasks])
    left, right = vectorizer.transform(turns), vectorizer.transform(t.query for t in tasks)
    return Neighbours(*top_k(left, right, k, chunk_rows, desc="queries", progress=progress))


def verbatim(turn: str, query: str, n: int) -> float:
    """Share of the turn's content-bearing word n-grams that appear in the task text."""
    grams = content_ngrams(turn, n)
    return len(grams & content_ngrams(query, n)) / len(grams) if grams else 0.0
