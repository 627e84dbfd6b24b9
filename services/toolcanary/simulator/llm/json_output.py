"""Read the JSON a chat model wrote: reasoning, code fences, chatter and truncation included.

Two readers, one per mode, plus the trustee mode's reading of its task author's answer.

`read_json_object` (mode toolcanary): drop `<think>...</think>` blocks (text inside an unterminated one is
reasoning, not answer); unwrap ```json fences; take the first balanced `{...}` (string-aware); if none parses,
repair the tail of a truncated object (close the open string, drop a dangling key or comma, close brackets).
Raises `OutputParseError` when nothing usable is left; never guesses values.

`read_trustee_json` (mode trustee, the tool, user and verifier roles) reads an answer the way TRUSTEE's
simulator does (`verl/recipe/trustee/simulator.py` at the pinned commit), implemented here from reading that
module: it imports verl's agent loop when it is imported, which the simulator image does not carry, so it
cannot be called from the checkout. The answer is stripped of surrounding whitespace (TRUSTEE's call does so
before reading), then `extract_json_as_trustee` applies these steps, the first that yields a value winning:
  1. unwrap the first ```json fence (else the first bare ``` fence) up to the next ```, or to the end;
  2. after a `</think>`, keep only what follows it, and unwrap a fence there again; an opened `<think>` with no
     close means the answer was cut off while reasoning, and leaves nothing;
  3. `json.loads` of what is left, whatever JSON type it gives (a list or a number too);
  4. the first `{...}` that parses, found by counting braces without regard to strings (a `}` inside a string
     ends the count early; the depth may go negative);
  5. step 4 on the whole text, when steps 1-2 changed it;
  6. repairs of what is left: a `"reward": r` with r in [-1, 1] anywhere gives `{"reward": r}`; else the text
     from its last `{`, when no `}` follows it, closed with braces, or with a quote and braces;
  7. step 6 on the whole text, when steps 1-2 changed it.
The value is then checked by the role (`outputs.Trustee*Output`): not an object, or an object without the keys
the role needs, is a `validation` failure; a text that yields nothing is a `parse` failure.

`read_trustee_author_json` (mode trustee, the task author): `read_json_object`, but a text with no complete
object that names a reward gives `{"reward": r}`.

    value, repaired = read_trustee_json('<think>...</think>\n```json\n{"result": "ok", "reward": 1}\n```')
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


def read_trustee_author_json(text: str) -> tuple[dict[str, Any], bool]:
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


# --- the trustee mode's reading of the tool, user and verifier answers ------------------------------------------
# Every json.loads below lets through what is not a JSONDecodeError (an integer of more than 4300 digits is a
# plain ValueError): TRUSTEE's reading stops there with a parse failure, and so does this one.

def _unfenced(text: str) -> str:
    """Step 1: the stripped body of the first ```json fence, else of the first bare fence; `text` if it has none.

    The body ends at the next ``` after the opener, or at the end of the text when no fence closes it."""
    for opener in ("```json", "```"):
        _, found, after = text.partition(opener)
        if found:
            return after.partition("```")[0].strip()
    return text


def _without_reasoning(text: str) -> str:
    """Step 2, on step 1's result."""
    if "</think>" in text:
        return _unfenced(text.partition("</think>")[2].strip())
    if "<think>" in text:
        return ""  # the answer was cut off while the model was still reasoning
    return text


def _first_braced_object(text: str) -> Any:
    """Step 4: the first brace-delimited span that parses, or None. The count ignores JSON strings on purpose."""
    depth, start = 0, -1
    for index, char in enumerate(text):
        if char == "{":
            start = index if depth == 0 else start
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0 and start >= 0:
                try:
                    return json.loads(text[start:index + 1])
                except json.JSONDecodeError:
                    start = -1
    return None


def _repaired(text: str) -> Any:
    """Step 6: a reward named anywhere, else the tail from the last `{` closed with braces (then a quote and
    braces) when no `}` follows that brace; None when no repair parses."""
    named = _REWARD_ONLY.search(text)
    if named and -1 <= float(named.group(1)) <= 1:
        return {"reward": float(named.group(1))}
    last = text.rfind("{")
    if last < 0:
        return None
    tail = text[last:]
    missing = tail.count("{") - tail.count("}")
    if missing <= 0:
        return None
    for closing in ("}" * missing, '"' + "}" * missing):
        try:
            return json.loads(tail + closing)
        except json.JSONDecodeError:
            continue
    return None


def extract_json_as_trustee(text: str) -> Any:
    """The value TRUSTEE's reading takes from `text` (steps 1-7 of the module docstring), of any JSON type.

    Raises:
        OutputParseError: no step yields a value, or a JSON text could not be decoded at all.
    """
    try:
        content = _without_reasoning(_unfenced(text))
        try:
            return json.loads(content)
        except json.JSONDecodeError:
            pass
        # Steps 4-7 in order, each tried only when the ones before it found nothing (each may raise).
        found = _first_braced_object(content)
        if found is None and content != text:
            found = _first_braced_object(text)
        if found is None:
            found = _repaired(content)
        if found is None and content != text:
            found = _repaired(text)
        if found is not None:
            return found
    except (ValueError, RecursionError) as err:  # not a JSONDecodeError: reading stops here
        raise OutputParseError(f"undecodable JSON in the answer: {type(err).__name__}: {err}"[:300]) from err
    raise OutputParseError(f"no JSON value in the answer: {text[:120]!r}")


def read_trustee_json(text: str) -> tuple[Any, bool]:
    """`extract_json_as_trustee` of the stripped answer; never "repaired", so a value that does not fit its role
    counts as a `validation` failure, as in TRUSTEE.

    Raises:
        OutputParseError: nothing could be read (a `parse` failure).
    """
    return extract_json_as_trustee((text or "").strip()), False
