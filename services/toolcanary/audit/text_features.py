"""How names, schemas and questions are turned into comparable text: the audit's normalisation rules.

- **Names**: split camelCase and acronyms (`getHTTPStatus` -> get http status), lowercase, and treat every
  dot, underscore, dash or other punctuation as a separator. `normalised_name` keeps every token, so
  `math.factorial`, `Math_Factorial` and `mathFactorial` are the same name while `factorial` is not: the
  namespace is part of what a model memorises. `name_core` also drops common verbs (get, fetch, list...)
  and is used only for the reported name neighbour, never for a flag.
- **Schemas**: name tokens + description + parameter names (split like names), at any nesting depth.
- **Questions**: lowercase word tokens (numbers kept). `query_terms` drops stopwords and returns the
  content words and their adjacent pairs, the terms TF-IDF weighs; `content_ngrams` keeps every word and
  returns the n-grams that hold a content word, for the verbatim-overlap column.

Used by the audit's measures; `python -m toolcanary.audit --help` runs them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

_CAMEL = re.compile(r"([a-z0-9])([A-Z])|([A-Z]+)([A-Z][a-z])")
_WORD = re.compile(r"[a-z0-9]+")
# BFCL's multi-turn docs open every description with the same class banner; it would make all of them alike.
_BFCL_BANNER = re.compile(r"^This tool belongs to .*?Tool description:\s*", re.DOTALL)

COMMON_VERBS = frozenset(
    "get fetch retrieve list find search query lookup look show display read set update create add make "
    "delete remove check calculate compute run do perform send post put".split()
)
STOPWORDS = frozenset(
    "a an the and or but if of to in on at by for with from into about as is are was were be been being "
    "it its this that these those i me my we our you your he she they them their what which who whom how "
    "when where why can could would should will shall may might must do does did please let s t also "
    "there here some any all not no so than then just up out over".split()
)


def _split_camel(text: str) -> str:
    return _CAMEL.sub(lambda m: f"{m.group(1) or m.group(3)} {m.group(2) or m.group(4)}", text)


def name_tokens(name: str) -> list[str]:
    """Tokens of an identifier: camelCase split, lowercased, punctuation and underscores as separators."""
    return _WORD.findall(_split_camel(name).lower())


def normalised_name(name: str) -> str:
    """The key two names must share to count as the same name (the `exact_name` flag)."""
    return " ".join(name_tokens(name))


def name_core(name: str) -> frozenset[str]:
    """Name tokens without common verbs; the whole token set when it holds nothing but verbs."""
    tokens = name_tokens(name)
    return frozenset(t for t in tokens if t not in COMMON_VERBS) or frozenset(tokens)


def strip_bfcl_banner(description: str) -> str:
    return _BFCL_BANNER.sub("", description, count=1)


def parameter_names(parameters: Any) -> list[str]:
    """Every property name of a JSON schema (BFCL's "dict" or standard "object"), depth first."""
    names: list[str] = []
    stack = [parameters]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            properties = node.get("properties")
            if isinstance(properties, dict):
                names.extend(str(k) for k in properties)
                stack.extend(properties.values())
            if isinstance(node.get("items"), dict):
                stack.append(node["items"])
    return names


def schema_text(name: str, description: str, parameters: Any) -> str:
    """The document TF-IDF compares: name tokens, description, parameter-name tokens."""
    params = " ".join(" ".join(name_tokens(p)) for p in parameter_names(parameters))
    return f"{' '.join(name_tokens(name))} {description} {params}"


def words(text: str) -> list[str]:
    return _WORD.findall(_split_camel(text).lower())


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if w not in STOPWORDS]


def query_terms(text: str, n: int = 2) -> list[str]:
    """Content words and their content-word n-grams up to `n` (stopwords removed first, so paraphrases that
    swap "could you" for "please" still share terms)."""
    tokens = content_words(text)
    return [" ".join(tokens[i : i + size]) for size in range(1, n + 1) for i in range(len(tokens) - size + 1)]


def content_ngrams(text: str, n: int) -> set[str]:
    """Word n-grams of `text` that hold at least one non-stopword; short texts give their one n-gram."""
    tokens = words(text)
    if len(tokens) < n:
        grams: Iterable[tuple[str, ...]] = [tuple(tokens)] if tokens else []
    else:
        grams = (tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
    return {" ".join(g) for g in grams if any(t not in STOPWORDS for t in g)}
