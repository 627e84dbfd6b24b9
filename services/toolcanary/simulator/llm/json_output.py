"""Read one JSON object out of what a chat model wrote: reasoning, code fences, chatter and truncation included.

Steps, in order: drop `<think>...</think>` blocks (text inside an unterminated one is reasoning, not answer);
unwrap ```json fences; take the first balanced `{...}` (string-aware); if none parses, repair the tail of a
truncated object (close the open string, drop a dangling key or comma, close brackets). Raises
`OutputParseError` when nothing usable is left; never guesses values.

`read_trustee_json` adds TRUSTEE's last resort for the trustee mode: when no complete object can be read, a
`"reward": <-1..1>` anywhere in the text (its reasoning included) yields an object with that reward alone.
"""

from __future__ import annotations

import json
import re
from typing import Any

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_REWARD_ONLY = re.compile(r'"reward"\s*:\s*(-?[01](?:\.\d+)?)')
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


class OutputParseError(ValueError):
    """The model's text holds no JSON object that can be read or repaired."""


def strip_reasoning(text: str) -> str:
    text = _THINK.sub("", text)
    if "<think>" in text:
        # Still inside the reasoning when generation stopped: no answer was written.
        text = text.split("<think>", 1)[0]
    return text.replace("</think>", "").strip()


def _balanced_objects(text: str):
    """Yield every top-level `{...}` substring, honouring JSON strings and escapes."""
    depth, start, in_string, escaped = 0, -1, False, False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"' and depth > 0:
            in_string = True
        elif char == "{":
            if depth == 0:
                start = index
            depth += 1
        elif char == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                yield text[start : index + 1]


def repair_truncated(fragment: str) -> str:
    """Close a JSON object cut off mid-way: open string, dangling key or comma, open brackets."""
    stack, in_string, escaped = [], False, False
    for char in fragment:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]" and stack:
            stack.pop()
    text = fragment + ('"' if in_string else "")
    text = re.sub(r",\s*$", "", text.rstrip())
    # A key with no value yet ("reasoning": or "reasoning") cannot be completed honestly: drop it.
    text = re.sub(r',?\s*"[^"]*"\s*:?\s*$', "", text) if re.search(r'[{,]\s*"[^"]*"\s*:?\s*$', text) else text
    text = re.sub(r",\s*$", "", text.rstrip())
    return text + "".join(reversed(stack))


def read_json_object(text: str) -> tuple[dict[str, Any], bool]:
    """The first JSON object in `text` and whether it had to be repaired (the answer was cut short).

    Raises:
        OutputParseError: no object could be read; the message says what was seen.
    """
    if not isinstance(text, str) or not text.strip():
        raise OutputParseError("empty answer")
    answer = strip_reasoning(text)
    fenced = _FENCE.search(answer)
    if fenced:
        answer = fenced.group(1).strip()
    elif "```" in answer:
        answer = answer.split("```", 1)[1].removeprefix("json").strip()
    for candidate in _balanced_objects(answer):
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value, False
    start = answer.find("{")
    if start < 0:
        raise OutputParseError(f"no JSON object in the answer: {answer[:120]!r}")
    try:
        value = json.loads(repair_truncated(answer[start:]))
    except json.JSONDecodeError as err:
        raise OutputParseError(
            f"unreadable JSON ({err.msg} at position {err.pos}): {answer[start:start + 120]!r}") from err
    if not isinstance(value, dict):
        raise OutputParseError(f"expected a JSON object, got {type(value).__name__}")
    return value, True


def read_trustee_json(text: str) -> tuple[dict[str, Any], bool]:
    """`read_json_object`, but a text with no complete object that names a reward gives `{"reward": r}`.

    Raises:
        OutputParseError: neither an object nor a reward could be read.
    """
    try:
        value, repaired = read_json_object(text)
    except OutputParseError:
        value, repaired = None, True
    if not repaired:
        return value, False
    found = _REWARD_ONLY.search(text or "")
    if found and -1 <= float(found.group(1)) <= 1:
        return {"reward": float(found.group(1))}, True
    if value is None:
        raise OutputParseError(f"no JSON object and no reward in the answer: {(text or '')[:120]!r}")
    return value, True
