"""The services' imports point one way: no import circle, and no service reaching into another's internals.

Read from the source (every `import`, at module level or inside a function), so it needs none of the
services' dependencies.
Run: .venvs/dev/bin/python -m pytest tests/contract/test_layering.py -q
"""

from __future__ import annotations

import ast
from pathlib import Path

SERVICES = Path(__file__).resolve().parents[2] / "services"

# What the trainer may import from the simulator's code: nothing. It talks to the simulator over HTTP
# (toolcanary.contract.simulator_api); the embedded simulator for CPU runs is started as a child process
# (`python -m toolcanary.simulator`), and the tiny tokenizer reads the packaged default library as a data file.
TRAIN_MAY_IMPORT_FROM_SIMULATOR: dict[str, set[str]] = {}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SERVICES / "toolcanary").rglob("*.py")):
        parts = list(path.relative_to(SERVICES).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The toolcanary modules `name` imports; `from package import submodule` counts as the submodule."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _circles() -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in sorted(GRAPH[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    return found


def _under(prefix: str) -> list[str]:
    return [m for m in MODULES if m == prefix or m.startswith(prefix + ".")]


def _offenders(importers: str, imported: str, allowed: dict[str, set[str]] | None = None) -> dict[str, list[str]]:
    allowed = allowed or {}
    out = {}
    for module in _under(importers):
        bad = sorted(m for m in GRAPH[module] if (m == imported or m.startswith(imported + "."))
                     and m not in allowed.get(module, set()))
        if bad:
            out[module] = bad
    return out


def test_the_graph_sees_the_modules_it_checks():
    assert {"toolcanary.simulator.llm", "toolcanary.simulator.scripted", "toolcanary.train.tiny_policy",
            "toolcanary.simulator.__main__", "toolcanary.simulator.library_builder"} <= set(MODULES)
    assert "toolcanary.simulator.calls" in GRAPH["toolcanary.simulator.llm"]


def test_no_import_circle():
    assert _circles() == []


def test_a_circle_is_found_when_there_is_one():
    GRAPH["toolcanary.train.policy_files"].add("toolcanary.train.tiny_policy")
    try:
        circles = _circles()
        assert any({"toolcanary.train.policy_files", "toolcanary.train.tiny_policy"} <= set(c) for c in circles)
    finally:
        GRAPH["toolcanary.train.policy_files"].discard("toolcanary.train.tiny_policy")


def test_neither_simulator_backend_imports_the_other():
    assert _offenders("toolcanary.simulator.llm", "toolcanary.simulator.scripted") == {}
    assert _offenders("toolcanary.simulator.scripted", "toolcanary.simulator.llm") == {}


def test_the_trainer_imports_nothing_of_the_simulator():
    assert _offenders("toolcanary.train", "toolcanary.simulator", TRAIN_MAY_IMPORT_FROM_SIMULATOR) == {}


def test_the_contract_imports_no_service():
    assert {m: sorted(i for i in GRAPH[m] if not i.startswith("toolcanary.contract"))
            for m in _under("toolcanary.contract") if any(not i.startswith("toolcanary.contract") for i in GRAPH[m])} == {}
