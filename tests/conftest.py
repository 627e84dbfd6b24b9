"""Fixtures every suite shares: `drill`, which prints a fault drill's figures to the terminal, and
`trustee_checkout` (and `make_trustee_checkout`), a stand-in TRUSTEE checkout: a real git repository whose one
commit holds placeholder files at TRUSTEE's paths. The checkout check hashes files against their commit, so
the stand-in's commit (`STANDIN_COMMIT`, the same on every machine: fixed author and dates) is the pinned
commit of every test process: this file sets it in the checkout module and, for subprocesses, in the
simulator's and the trainer's `trustee_commit` variables.

pytest loads this file for any suite under tests/, whichever environment runs it (scripts/run_tests.sh); it
puts tests/ on the import path for the helpers several suites share (`cli_checks`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import toolcanary.common.trustee_checkout as trustee_checkout_module

sys.path.append(str(Path(__file__).parent))  # after each suite's own folder, which its conftest puts first

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


_GIT_IDENTITY = {"GIT_AUTHOR_NAME": "stand-in", "GIT_AUTHOR_EMAIL": "stand-in@example.org",
                 "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_NAME": "stand-in",
                 "GIT_COMMITTER_EMAIL": "stand-in@example.org", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
                 "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def _git(root: Path, *args: str) -> str:
    env = {**os.environ, **_GIT_IDENTITY}
    return subprocess.run(["git", "-C", str(root), *args], env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def write_trustee_checkout(root: Path, commit: str | None = None, skip: str | None = None) -> Path:
    """A stand-in TRUSTEE checkout: the five templates, the tool parser and a tiny ToolBench library committed to
    a git repository, then the file named `skip` deleted; with `commit`, instead a `.git` whose HEAD merely
    names that commit (no objects: a forged or foreign checkout)."""
    templates = root / "verl/recipe/trustee/utils/templates"
    parser = root / "verl/verl/experimental/agent_loop/tool_parser.py"
    data = root / "verl/recipe/trustee/data"
    files = {templates / name: text.lstrip() for name, text in TEMPLATES.items()}
    files |= {parser: TOOL_PARSER.lstrip(), data / "toolbench_tools.json": json.dumps(TOOLBENCH_LIBRARY)}
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if commit is not None:
        (root / ".git/refs/heads").mkdir(parents=True, exist_ok=True)
        (root / ".git/HEAD").write_text("ref: refs/heads/main\n")
        (root / ".git/refs/heads/main").write_text(commit + "\n")
    else:
        _git(root, "init", "-q", "-b", "main")
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", "stand-in of TRUSTEE's files")
    if skip is not None:
        next(path for path in files if path.name == skip).unlink()
    return root


def _standin_commit() -> str:
    with tempfile.TemporaryDirectory() as folder:
        return _git(write_trustee_checkout(Path(folder) / "TRUSTEE"), "rev-parse", "HEAD")


# The pinned commit of every test process: this one through the module (settings made here with or without an
# environment), subprocesses through their settings' environment variables.
STANDIN_COMMIT = _standin_commit()
trustee_checkout_module.PINNED_COMMIT = STANDIN_COMMIT
for _service in ("SIMULATOR", "TRAIN"):
    os.environ[f"TOOLCANARY_{_service}_TRUSTEE_COMMIT"] = STANDIN_COMMIT


@pytest.fixture
def commit_checkout():
    """`commit_checkout(root)` -> the id of a new commit of everything now in the stand-in checkout at `root`
    (a test that changes its files plays that commit: `trustee_commit=`)."""
    def commit(root: Path) -> str:
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", "changed by a test")
        return _git(root, "rev-parse", "HEAD")
    return commit


@pytest.fixture(scope="session")
def standin_commit() -> str:
    """The commit of every `trustee_checkout`: the one the test processes' settings play."""
    return STANDIN_COMMIT


@pytest.fixture
def make_trustee_checkout():
    """`make_trustee_checkout(root, commit=..., skip=file name)` -> a stand-in checkout (see above)."""
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
