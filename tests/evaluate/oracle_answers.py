"""Ground-truth answers for BFCL requests, rebuilt from bfcl-eval's own `possible_answer` data.

Single-turn requests are keyed by their messages and the offered tools (name with "." as "_", description
without BFCL's language hint, parameter names). Multi-turn requests are keyed by the user messages so far and
the tool names offered; the answer is every ground-truth call of the current turn at once, then "Done.".

    .venvs/eval/bin/python tests/evaluate/oracle_answers.py    # prints index sizes and conflicts
"""

from __future__ import annotations

import ast
import json
from collections import defaultdict
from pathlib import Path

from toolcanary.contract.bfcl import AST, MULTI_TURN
from toolcanary.evaluate.bfcl_data import package_dir

HINTS = (" Note that the provided function is in Python 3 syntax.", " Note that the provided function is in Java 8 SDK syntax.",
         " Note that the provided function is in JavaScript syntax.")
MORE_FUNCTIONS = "I have updated some more functions you can choose from. What about now?"
DOC_FILES = {"GorillaFileSystem": "gorilla_file_system.json", "MathAPI": "math_api.json",
             "MessageAPI": "message_api.json", "TwitterAPI": "posting_api.json", "TicketAPI": "ticket_api.json",
             "TradingBot": "trading_bot.json", "TravelAPI": "travel_booking.json",
             "VehicleControlAPI": "vehicle_control.json"}


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _strip_hint(text: str) -> str:
    for hint in HINTS:
        text = text.replace(hint, "")
    return text


def tools_key(tools: list[dict]) -> tuple:
    """Key of an offered tool set, from the request's OpenAI tools or BFCL's function docs."""
    parts = []
    for tool in tools:
        spec = tool.get("function", tool)
        params = spec.get("parameters", {}).get("properties", {})
        parts.append((spec["name"].replace(".", "_"), _strip_hint(spec.get("description", "")), tuple(sorted(params))))
    return tuple(sorted(parts))


def single_key(messages: list[dict], tools: list[dict]) -> tuple:
    return tuple((m["role"], m.get("content") or "") for m in messages), tools_key(tools)


def _choose(alternatives: object, schema: dict, language: str) -> object:
    """First usable alternative; nested dicts repeat the alternatives shape."""
    options = alternatives if isinstance(alternatives, list) else [alternatives]
    value = next((a for a in options if a != ""), "")
    if isinstance(value, dict) and value and all(isinstance(v, list) for v in value.values()):
        props = schema.get("properties", {})
        value = {k: _choose(v, props.get(k, {}), "python") for k, v in value.items()
                 if not ("" in v and k not in schema.get("required", []))}
    if isinstance(value, list):
        items = schema.get("items", {})
        value = [_choose([v], items, "python") if isinstance(v, dict) else v for v in value]
    return _literal(value, schema, language) if language != "python" else value


def _java(value: object, kind: str, item: str | None) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if kind == "long" and isinstance(value, int):
        return f"{value}L"
    if kind == "float" and isinstance(value, int | float):
        return f"{value}f"
    if kind in ("Array", "ArrayList") and isinstance(value, list):
        elements = ", ".join(_java(v, item or "", None) if item != "String" else json.dumps(v) for v in value)
        if kind == "Array":
            return f"new {item or 'Object'}[]{{{elements}}}"
        return f"new ArrayList<>(Arrays.asList({elements}))"
    if kind == "HashMap" and isinstance(value, dict):
        puts = " ".join(f'put("{k}", {json.dumps(v) if isinstance(v, str) else _java(v, "", None)});'
                        for k, v in value.items())
        return f"new HashMap<String, Object>() {{{{ {puts} }}}}"
    return str(value)


def _js(value: object, kind: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if kind == "Bigint" and isinstance(value, int):
        return f"{value}n"
    if isinstance(value, list | dict) and kind in ("array", "dict"):
        return json.dumps(value)
    return str(value)


def _literal(value: object, schema: dict, language: str) -> object:
    kind = schema.get("type", "")
    if language == "java":
        return _java(value, kind, schema.get("items", {}).get("type"))
    return _js(value, kind)


def single_turn_call(truth: dict, doc: dict, language: str) -> tuple[str, dict]:
    name, params = next(iter(truth.items()))
    schema = doc.get("parameters", {})
    props, required = schema.get("properties", {}), schema.get("required", [])
    args = {p: _choose(alts, props.get(p, {}), language) for p, alts in params.items()
            if not ("" in alts and p not in required)}
    return name.replace(".", "_"), args


def parse_call(text: str, docs: dict[str, dict]) -> tuple[str, dict]:
    """`f(a, b=1)` in BFCL's multi-turn ground truth, positional arguments mapped to parameter names."""
    call = ast.parse(text.strip(), mode="eval").body
    name = call.func.id if isinstance(call.func, ast.Name) else ast.unparse(call.func)
    names = list(docs[name]["parameters"]["properties"]) if name in docs else []
    args = {names[i]: ast.literal_eval(a) for i, a in enumerate(call.args)}
    args.update({k.arg: ast.literal_eval(k.value) for k in call.keywords})
    return name, args


class OracleIndex:
    """Answers for every AST, irrelevance and multi-turn request BFCL sends."""

    def __init__(self) -> None:
        data = package_dir() / "data"
        self.single: dict[tuple, list[tuple[str, dict]]] = {}
        self.multi: dict[tuple, list[list[tuple[str, dict]]]] = defaultdict(list)
        self.multi_ids: dict[tuple, list[str]] = defaultdict(list)
        for category in AST:
            language = "java" if "java" in category and "javascript" not in category else \
                "javascript" if "javascript" in category else "python"
            answers = {a["id"]: a["ground_truth"] for a in _lines(data / "possible_answer" / f"BFCL_v4_{category}.json")}
            for entry in _lines(data / f"BFCL_v4_{category}.json"):
                docs = {d["name"]: d for d in entry["function"]}
                calls = [single_turn_call(t, docs[next(iter(t))], language) for t in answers[entry["id"]]]
                self.single[single_key(entry["question"][0], entry["function"])] = calls
        # Irrelevance items must not call; a live_relevance item is right with any call. An AST item with
        # the same input keeps its answer: those pairs are BFCL's identical inputs with opposite labels.
        for category in ("irrelevance", "live_irrelevance", "live_relevance"):
            for entry in _lines(data / f"BFCL_v4_{category}.json"):
                offered = [f["name"].replace(".", "_") for f in entry["function"]]
                calls = [(offered[0], {})] if category == "live_relevance" and offered else []
                self.single.setdefault(single_key(entry["question"][0], entry["function"]), calls)
        docs_by_class = {c: _lines(data / "multi_turn_func_doc" / f) for c, f in DOC_FILES.items()}
        for category in MULTI_TURN:
            answers = {a["id"]: a["ground_truth"] for a in _lines(data / "possible_answer" / f"BFCL_v4_{category}.json")}
            for entry in _lines(data / f"BFCL_v4_{category}.json"):
                docs = {d["name"]: d for c in entry["involved_classes"] for d in docs_by_class[c]}
                missed = {int(t): names for t, names in entry.get("missed_function", {}).items()}
                offered = set(docs) - {n for names in missed.values() for n in names}
                users: list[str] = []
                for turn, messages in enumerate(entry["question"]):
                    offered |= set(missed.get(turn, []))
                    users += [m["content"] for m in messages if m["role"] == "user"] or [MORE_FUNCTIONS]
                    key = (tuple(users), frozenset(offered))
                    self.multi[key].append([parse_call(c, docs) for c in answers[entry["id"]][turn]])
                    self.multi_ids[key].append(entry["id"])

    def answer(self, messages: list[dict], tools: list[dict]) -> list[tuple[str, dict]] | None:
        """Calls to make (empty: answer in text), or None when the request is unknown."""
        if not any(m["role"] in ("assistant", "tool") for m in messages):
            calls = self.single.get(single_key(messages, tools))
            if calls is not None:
                return calls
        users = [m.get("content") or "" for m in messages if m["role"] == "user"]
        key = (tuple(users), frozenset(t["function"]["name"] for t in tools))
        if key not in self.multi:
            return None if any(m["role"] == "assistant" for m in messages) or not tools else []
        if messages[-1]["role"] != "user":
            return []
        return self.multi[key][0]

    def ambiguous_multi_turn(self) -> set[str]:
        """Multi-turn ids whose answer differs from the first entry sharing their conversation so far."""
        losers = set()
        for key, answers in self.multi.items():
            for answer, item in zip(answers[1:], self.multi_ids[key][1:], strict=True):
                if answer != answers[0]:
                    losers.add(item)
        return losers


if __name__ == "__main__":
    index = OracleIndex()
    print(len(index.single), "single-turn keys;", len(index.multi), "multi-turn keys;",
          len(index.ambiguous_multi_turn()), "multi-turn items ambiguous over HTTP")
