"""What kind of answer the model gave for one BFCL item: calls the server parsed, call markup it did not parse,
text, or nothing.

In BFCL's irrelevance categories an answer is correct when it holds no function call. A call the server's
Hermes tool parser cannot decode (broken JSON inside `<tool_call>`, a wrong closing tag, a call written as
plain text) comes back as `content` with no `tool_calls`, so BFCL sees no call and credits a correct
abstention. The evaluation keeps BFCL's number and counts those answers beside it (`correct_unparsed` in
`bfcl_by_category.csv`); this module decides, from what the handler recorded of each response
(`toolcanary.evaluate.bfcl_wrapper.ANSWERS_FIELD`), which answers they are.

The rule, for one response (`answer_kind`):

- "calls" when the server returned one or more structured tool calls;
- otherwise the content is read with its reasoning removed: every `<think>...</think>` block, the text before
  a `</think>` left without its opener (the opener was in the prompt), and everything from a `<think>` that
  never closes. The response is "unparsed_call" when what is left holds
  (a) a `<tool_call>` or `</tool_call>` tag, in any letter case, or
  (b) a JSON call object, bare or inside a ``` fence: an object with a string "name" and an "arguments" or
      "parameters" key, or BFCL's own `{"<offered function name>": {...}}` shape, or a list holding such an
      object, or
  (c) an offered function's name directly followed by `(`, e.g. `get_weather(city="Paris")`, the name as
      BFCL's data has it (`math.sum`) or as the handler sends it (`math_sum`), with a word boundary before it;
- otherwise "text" when anything but whitespace is left, else "empty".

An item with several responses (multi-turn) is "unparsed_call" if any response is, else "calls" if any is,
else "text" if any is, else "empty" (`item_kind`). Names a model could call but was not offered are caught
by (a) and (b) only: a name in prose is a call only when it is one the item offered.

    kind = answer_kind('<tool_call>{"name": "get_weather", "arg', structured_calls=0, function_names=["get_weather"])
    kind = entry_answer_kind(result_entry, function_names)   # None: the entry is from an older client
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from toolcanary.contract.errors import ContractError
from toolcanary.contract.pass_files import UNPARSED_CALL, AnswerKind
from toolcanary.evaluate.bfcl_wrapper import ANSWERS_FIELD

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_THINK_BLOCK = re.compile(re.escape(THINK_OPEN) + r".*?" + re.escape(THINK_CLOSE), re.DOTALL)
_TOOL_CALL_TAG = re.compile(r"</?tool_call>", re.IGNORECASE)
_JSON_START = re.compile(r"[{\[]")
# Each failed decode rescans the rest of the text; past this many starts an answer is text-like anyway.
MAX_JSON_STARTS = 200
# Strongest first: one unparsed call anywhere in a multi-turn item is what BFCL may have credited.
_FOLD_ORDER: tuple[AnswerKind, ...] = (UNPARSED_CALL, "calls", "text")


def visible_text(content: str | None) -> str:
    """The content without its reasoning: `<think>` blocks, text before a lone `</think>`, and everything
    from a `<think>` that never closes."""
    text = _THINK_BLOCK.sub("", content or "")
    if THINK_CLOSE in text:
        text = text.rsplit(THINK_CLOSE, 1)[1]
    if THINK_OPEN in text:
        text = text.split(THINK_OPEN, 1)[0]
    return text


def _json_values(text: str) -> Iterable[object]:
    """Every JSON object or list that starts at a `{` or `[` of the text, left to right, not nested ones."""
    decoder = json.JSONDecoder()
    position, starts = 0, 0
    while starts < MAX_JSON_STARTS and (found := _JSON_START.search(text, position)):
        starts += 1
        try:
            value, position = decoder.raw_decode(text, found.start())
        except ValueError:
            position = found.start() + 1
            continue
        yield value


def _is_call_object(value: object, names: frozenset[str]) -> bool:
    if isinstance(value, list):
        return any(_is_call_object(item, names) for item in value if isinstance(item, dict))
    if not isinstance(value, dict) or not value:
        return False
    if isinstance(value.get("name"), str) and ("arguments" in value or "parameters" in value):
        return True
    return all(key in names and isinstance(arguments, dict) for key, arguments in value.items())


def _name_call_pattern(names: frozenset[str]) -> re.Pattern[str] | None:
    if not names:
        return None
    # Longest first, so `math.sum(` is matched whole rather than stopping at a shorter offered name.
    alternatives = "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))
    return re.compile(rf"\b(?:{alternatives})\(")


def _spellings(function_names: Iterable[str]) -> frozenset[str]:
    """Each name as BFCL's data has it and as the handler sends it (dots as underscores)."""
    names = {name for name in function_names if name}
    return frozenset(names | {name.replace(".", "_") for name in names})


def answer_kind(content: str | None, structured_calls: int, function_names: Iterable[str]) -> AnswerKind:
    """The kind of one response: `content` as the server returned it, `structured_calls` the number of tool
    calls it parsed, `function_names` the functions the item offered (see the module's rule)."""
    if structured_calls > 0:
        return "calls"
    text = visible_text(content)
    names = _spellings(function_names)
    if _TOOL_CALL_TAG.search(text) or any(_is_call_object(v, names) for v in _json_values(text)):
        return UNPARSED_CALL
    pattern = _name_call_pattern(names)
    if pattern and pattern.search(text):
        return UNPARSED_CALL
    return "text" if text.strip() else "empty"


def item_kind(kinds: Iterable[AnswerKind]) -> AnswerKind:
    """The kind of an item from the kinds of its responses; an item without responses is "empty"."""
    present = set(kinds)
    return next((kind for kind in _FOLD_ORDER if kind in present), "empty")


def entry_answer_kind(entry: dict, function_names: Iterable[str]) -> AnswerKind | None:
    """The kind of the item of one BFCL result line, from the responses the handler recorded in it; None when
    the line has no record (written by a client from before answer kinds).

    Raises:
        ContractError: a record that is not a list of {"calls": n, "content": text or null}.
    """
    answers = entry.get(ANSWERS_FIELD)
    if answers is None:
        return None
    well_formed = isinstance(answers, list) and all(
        isinstance(a, dict) and isinstance(a.get("calls"), int) and isinstance(a.get("content"), str | None)
        for a in answers)
    if not well_formed:
        raise ContractError(f"result line of {entry.get('id')!r}, field {ANSWERS_FIELD!r}",
                            'a list of {"calls": n, "content": text or null}', repr(answers)[:200],
                            "The result file was not written by this client's handler; rerun the pass")
    names = list(function_names)
    return item_kind(answer_kind(a["content"], a["calls"], names) for a in answers)
