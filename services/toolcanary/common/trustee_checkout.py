"""A user's own checkout of TRUSTEE, read at run time: the prompt templates and the ToolBench tool library.

The `trustee` mode plays TRUSTEE's exact prompts (JamyDon/TRUSTEE, `verl/recipe/trustee/`, at the pinned
commit) without copying them into this repository: the five template modules are imported from the checkout
and called with the fields TRUSTEE's own code passes, and the simulator loads TRUSTEE's tool library from it.
A checkout that is missing, incomplete or at another commit is refused with the path and the fix, and so is
one whose files are not byte for byte the commit's: every file the mode reads is hashed against the commit's
tree, read object by object from the checkout's own git store (`toolcanary.common.git_files`), before any
of them is imported. A `.git/HEAD` that merely names the pinned commit does not pass.

    git clone https://github.com/JamyDon/TRUSTEE && git -C TRUSTEE checkout daf7267919815b1da45e28b29097e51879a88ae2
    checkout = TrusteeCheckout.open("TRUSTEE")
    checkout.system_prompt(0)

The template modules are plain functions over `json` and `textwrap`; importing them runs the checkout's code,
as running TRUSTEE itself would. `trustee_commit` (default: the pinned commit, the one ToolCanary's trustee mode
is checked against) names another commit to play, e.g. a fork's fix; the run's records and health answers
state the commit played.
"""

from __future__ import annotations

import importlib.util
import json
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

from pydantic import StringConstraints

from toolcanary.common.git_files import files_at_commit, head_commit
from toolcanary.contract.errors import ContractError

PINNED_COMMIT = "daf7267919815b1da45e28b29097e51879a88ae2"
RECIPE_DIR = "verl/recipe/trustee"
TEMPLATES = {
    "system_prompt": f"{RECIPE_DIR}/utils/templates/system_prompt.py",
    "task_generation": f"{RECIPE_DIR}/utils/templates/task_generation.py",
    "tool_simulation": f"{RECIPE_DIR}/utils/templates/tool_simulation.py",
    "user_simulation": f"{RECIPE_DIR}/utils/templates/user_simulation.py",
    "verifier_simulation": f"{RECIPE_DIR}/utils/templates/verifier_simulation.py",
}
LIBRARY = f"{RECIPE_DIR}/data/toolbench_tools.json"
# TRUSTEE's Hermes tool parser (its copy of verl's): the trainer's trustee mode imports it (it needs verl).
TOOL_PARSER = "verl/verl/experimental/agent_loop/tool_parser.py"
_FIX = (f"Clone it and check out the pinned commit: git clone https://github.com/JamyDon/TRUSTEE && "
        f"git -C TRUSTEE checkout {PINNED_COMMIT}; then set trustee_dir (TRUSTEE_DIR in .env) to that folder, "
        f"or run the project's own prompts with mode toolcanary")


# A full commit id, as the settings `trustee_commit` take it (a short id could name two commits).
CommitId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")]


def pinned_commit() -> str:
    """The default of the settings `trustee_commit`: PINNED_COMMIT, read when a setting is made."""
    return PINNED_COMMIT


def _import(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"toolcanary_trustee_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # a template that does not import is a checkout problem: say which file
        raise ContractError(str(path), "TRUSTEE's module, importable on its own (the tool parser: with verl)",
                            f"{type(err).__name__}: {err}", _FIX) from err
    return module


def _function(module: ModuleType, path: Path, name: str):
    function = getattr(module, name, None)
    if not callable(function):
        raise ContractError(str(path), f"a function {name}() (TRUSTEE at {PINNED_COMMIT[:7]})",
                            "no such function", _FIX)
    return function


class TrusteeCheckout:
    """TRUSTEE's prompt functions and tool library, from a checkout at the pinned commit."""

    def __init__(self, root: Path, modules: dict[str, ModuleType]) -> None:
        self.root = root
        paths = {key: root / rel for key, rel in TEMPLATES.items()}
        self._system_prompt = _function(modules["system_prompt"], paths["system_prompt"], "get_system_prompt")
        self._task = _function(modules["task_generation"], paths["task_generation"], "get_task_generation_prompt")
        self._tool = _function(modules["tool_simulation"], paths["tool_simulation"], "get_tool_simulation_prompt")
        self._user = _function(modules["user_simulation"], paths["user_simulation"], "get_user_simulation_prompt")
        self._verifier = _function(modules["verifier_simulation"], paths["verifier_simulation"],
                                   "get_verifier_simulation_prompt")
        self._criteria = list(getattr(modules["verifier_simulation"], "VERIFIER_CRITERIA", []))
        self._tool_parser: ModuleType | None = None

    @classmethod
    def open(cls, root: str | Path, commit: str | None = None) -> TrusteeCheckout:
        """Check the checkout (folder, commit, every file's bytes against the commit) and import its templates.

        Args:
            root: the checkout's folder.
            commit: the commit it must be at; None: PINNED_COMMIT.

        Raises:
            ContractError: the folder, a file or the commit is not what the trustee mode needs.
        """
        return _open(Path(root).expanduser().resolve(), commit or PINNED_COMMIT)

    tool_parser_path = TOOL_PARSER

    def tool_parser_module(self) -> ModuleType:
        """TRUSTEE's tool-parser module, imported from the checkout (it imports verl's utilities: the trainer's
        environment has them).

        Raises:
            ContractError: it does not import here.
        """
        if self._tool_parser is None:  # once per checkout: the agent loop is built once per episode
            self._tool_parser = _import(self.root / TOOL_PARSER, "tool_parser")
        return self._tool_parser

    @property
    def library_path(self) -> Path:
        """TRUSTEE's ToolBench library. Only its presence is checked here; the simulator reads it by the rule of
        `toolcanary.contract.tasks` (entries it cannot use are left out and reported, not a refused file)."""
        return self.root / LIBRARY

    # --- the policy -------------------------------------------------------------------------------
    def system_prompt(self, level: int) -> str:
        """TRUSTEE's policy system prompt of a verbosity level (0 detailed ... 3 default), Hermes format."""
        return self._system_prompt(level, format="hermes")

    # --- the four roles, each with the arguments TRUSTEE's simulator and curriculum pass ------------
    def author_messages(self, tools: list[dict], num_expected_calls: int, user_persona_level: int,
                        query_ambiguity_level: int, expected_turns_level: int) -> list[dict[str, str]]:
        """The task author's chat: TRUSTEE sends a generic system message (the same text as its default
        system-prompt level at the pinned commit), then the rendered prompt as the user message."""
        prompt = self._task(tools=tools, num_expected_calls=num_expected_calls, user_persona_level=user_persona_level,
                            query_ambiguity_level=query_ambiguity_level, expected_turns_level=expected_turns_level)
        return [{"role": "system", "content": self.system_prompt(3)}, {"role": "user", "content": prompt}]

    def tool_prompt(self, history: list[dict], call: dict[str, Any], tools: list[dict], user_intent: str) -> str:
        # TRUSTEE hands the call over as indented JSON text, which the template encodes once more.
        call_text = json.dumps({"type": "function", "function": call}, indent=2)
        return self._tool(history, call_text, tools, user_intent=user_intent)

    def user_prompt(self, history: list[dict], user_query: str, tools: list[dict], user_intent: str,
                    user_persona: str) -> str:
        latest = history[-1]["content"] if history else ""
        return self._user(history, latest, user_query, tools, user_intent=user_intent, user_persona=user_persona)

    def verifier_prompt(self, history: list[dict], user_query: str, tools: list[dict], expected_tool_calls: list[str],
                        user_intent: str, user_persona: str, num_criteria: int) -> tuple[str, list[str]]:
        prompt = self._verifier(history, user_query, tools, expected_tool_calls=expected_tool_calls,
                                user_intent=user_intent, user_persona=user_persona, num_criteria=num_criteria)
        return prompt, self._criteria[:num_criteria]


@cache
def _open(root: Path, pinned: str) -> TrusteeCheckout:
    if not root.is_dir():
        raise ContractError("trustee_dir", "a checkout of TRUSTEE (JamyDon/TRUSTEE)", f"no folder at {root}", _FIX)
    commit = head_commit(root)
    if commit is None:
        raise ContractError(str(root), f"a git checkout of TRUSTEE at commit {pinned}",
                            "a folder without git metadata (.git), so its commit cannot be checked", _FIX)
    if commit != pinned:
        raise ContractError(str(root), f"TRUSTEE at commit {pinned}", f"commit {commit}",
                            f"Run: git -C {root} checkout {pinned}")
    needed = [*TEMPLATES.values(), LIBRARY, TOOL_PARSER]
    missing = [rel for rel in needed if not (root / rel).is_file()]
    if missing:
        raise ContractError(str(root), "every file the trustee mode reads", "missing: " + ", ".join(missing), _FIX)
    # Before any import: the bytes that would run must be the commit's, whatever .git claims.
    problems = files_at_commit(root, pinned, needed)
    if problems:
        raise ContractError(str(root), f"the files of TRUSTEE's commit {pinned}, byte for byte", "; ".join(problems),
                            f"Restore them: git -C {root} checkout {pinned} -- . (or clone TRUSTEE anew and "
                            f"check out {pinned})")
    return TrusteeCheckout(root, {key: _import(root / rel, key) for key, rel in TEMPLATES.items()})
