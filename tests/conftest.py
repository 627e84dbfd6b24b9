"""Fixtures every suite shares: `drill`, which prints a fault drill's figures to the terminal, and
`trustee_checkout` (and `make_trustee_checkout`), a folder shaped like a TRUSTEE checkout at the pinned commit.

pytest loads this file for any suite under tests/, whichever environment runs it (scripts/run_tests.sh).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

PINNED = "daf7267919815b1da45e28b29097e51879a88ae2"
# Placeholder templates with TRUSTEE's file names, function names and signatures; each writes its fields out
# as JSON after a marker, so a test can read back exactly what the mode substituted.
TEMPLATES = {
    "system_prompt.py": '''
def get_system_prompt(difficulty, format="hermes"):
    if difficulty not in (0, 1, 2, 3):
        raise ValueError(f"Invalid difficulty: {difficulty}")
    return f"SYSTEM level={difficulty} format={format}"
''',
    "task_generation.py": '''
import json
def get_task_generation_prompt(tools, num_expected_calls, user_persona_level, query_ambiguity_level,
                               expected_turns_level=0):
    return "AUTHOR " + json.dumps({"tools": tools, "calls": num_expected_calls, "persona": user_persona_level,
                                   "ambiguity": query_ambiguity_level, "turns": expected_turns_level})
''',
    "tool_simulation.py": '''
import json
def get_tool_simulation_prompt(interaction_history, tool_call_text, tool_schemas, user_intent=""):
    return "TOOL " + json.dumps({"history": interaction_history, "call": tool_call_text, "tools": tool_schemas,
                                 "intent": user_intent})
''',
    "user_simulation.py": '''
import json
def get_user_simulation_prompt(interaction_history, user_message, user_query, tool_schemas, user_intent="",
                               user_persona=""):
    return "USER " + json.dumps({"history": interaction_history, "latest": user_message, "query": user_query,
                                 "tools": tool_schemas, "intent": user_intent, "persona": user_persona})
''',
    "verifier_simulation.py": '''
import json
VERIFIER_CRITERIA = ["criterion one", "criterion two", "criterion three", "criterion four", "criterion five"]
def get_verifier_simulation_prompt(interaction_history, user_query, tools, expected_tool_calls=None, user_intent="",
                                   user_persona="", num_criteria=5):
    return "VERIFY " + json.dumps({"history": interaction_history, "query": user_query, "tools": tools,
                                   "expected": expected_tool_calls, "intent": user_intent, "persona": user_persona,
                                   "criteria": VERIFIER_CRITERIA[:num_criteria]})
''',
}

# A stand-in of TRUSTEE's tool parser (its copy of verl's), with TRUSTEE's module path, class and method names
# and behaviour as read at the pinned commit: a decode with special tokens kept; no call unless both tags occur
# somewhere in the text; every non-greedy <tool_call>...</tool_call> block whose JSON has "name" and "arguments"
# is a call (the arguments re-encoded as JSON text, any JSON value), any other block is dropped silently.
TOOL_PARSER = '''
import json
import re

from pydantic import BaseModel
from verl.utils.ray_utils import get_event_loop


class FunctionCall(BaseModel):
    arguments: str
    name: str


class ToolParser:
    _registry = {}

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    @classmethod
    def register(cls, name):
        def decorator(subclass):
            cls._registry[name] = subclass
            return subclass
        return decorator


@ToolParser.register("hermes")
class HermesToolParser(ToolParser):
    tool_call_start_token = "<tool_call>"
    tool_call_end_token = "</tool_call>"
    block = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)

    async def extract_tool_calls(self, responses_ids):
        text = await get_event_loop().run_in_executor(None, self.tokenizer.decode, responses_ids)
        if self.tool_call_start_token not in text or self.tool_call_end_token not in text:
            return text, []
        calls = []
        for body in self.block.findall(text):
            try:
                value = json.loads(body)
                calls.append(FunctionCall(name=value["name"], arguments=json.dumps(value["arguments"],
                                                                                 ensure_ascii=False)))
            except Exception:
                pass
        return self.block.sub("", text), calls
'''


def _toolbench_tool(name: str, properties: dict, required: list[str]) -> dict:
    return {"type": "function", "function": {"name": name, "description": f"{name} of the test API.",
                                             "parameters": {"type": "object", "properties": properties,
                                                            "required": required}},
            "toolset_name": "Test Mail API", "toolset_description": "A RapidAPI-style mail service.",
            "category": "Communication"}


# ToolBench's quirks: slash names, a `credentials` type, number and array fields whose defaults are strings.
TOOLBENCH_LIBRARY = {"Communication": {"Test Mail API": [
    _toolbench_tool("messages/send", {"size": {"type": "number", "default": "500"},
                                      "ids": {"type": "array", "default": "1,2"},
                                      "key": {"type": "credentials", "description": "API key"}}, ["size"]),
    _toolbench_tool("messages/list", {"folder": {"type": "string", "default": "inbox"}}, []),
]}}


def write_trustee_checkout(root: Path, commit: str = PINNED, skip: str | None = None) -> Path:
    """A folder shaped like a TRUSTEE checkout: .git at `commit`, the five templates, the tool parser, a tiny
    ToolBench library."""
    templates = root / "verl/recipe/trustee/utils/templates"
    templates.mkdir(parents=True, exist_ok=True)
    for name, text in TEMPLATES.items():
        if name != skip:
            (templates / name).write_text(text.lstrip())
    if skip != "tool_parser.py":
        parser = root / "verl/verl/experimental/agent_loop/tool_parser.py"
        parser.parent.mkdir(parents=True, exist_ok=True)
        parser.write_text(TOOL_PARSER.lstrip())
    data = root / "verl/recipe/trustee/data"
    data.mkdir(parents=True, exist_ok=True)
    if skip != "toolbench_tools.json":
        (data / "toolbench_tools.json").write_text(json.dumps(TOOLBENCH_LIBRARY))
    (root / ".git/refs/heads").mkdir(parents=True, exist_ok=True)
    (root / ".git/HEAD").write_text("ref: refs/heads/main\n")
    (root / ".git/refs/heads/main").write_text(commit + "\n")
    return root


@pytest.fixture
def make_trustee_checkout():
    """`make_trustee_checkout(root, commit=..., skip=file name)` -> a checkout-shaped folder (see above)."""
    return write_trustee_checkout


@pytest.fixture
def trustee_checkout(tmp_path) -> Path:
    return write_trustee_checkout(tmp_path / "TRUSTEE")


@pytest.fixture(scope="session")
def session_trustee_checkout(tmp_path_factory) -> Path:
    """One checkout-shaped folder for module- and session-scoped fixtures (never modify it)."""
    return write_trustee_checkout(tmp_path_factory.mktemp("trustee") / "TRUSTEE")


@pytest.fixture
def drill(capsys):
    """`drill(name, **figures)`: one line on the terminal, outside pytest's capture, so `make test` shows it."""

    def report(name: str, **figures) -> None:
        with capsys.disabled():
            print(f"\n  DRILL {name}: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in figures.items()))

    return report
