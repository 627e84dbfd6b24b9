"""The services' imports point one way: no import circle, and no service reaching into another's internals.

The rule (docs/architecture.md, "Layers"): a service imports the shared layers (`toolcanary.contract`,
`toolcanary.settings`, `toolcanary.common`) and its own modules; it imports another service only where
`CROSS_SERVICE_IMPORTS` lists the pair, with the reason, and the list holds no pair the code does not use.

Read from the source (every `import`, at module level or inside a function), so it needs none of the
services' dependencies.
Run: .venvs/dev/bin/python -m pytest tests/contract/test_layering.py -q
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SERVICES = Path(__file__).resolve().parents[2] / "services"

# What the trainer may import from the simulator's code: nothing. It talks to the simulator over HTTP
# (toolcanary.contract.simulator_api); the embedded simulator for CPU runs is started as a child process
# (`python -m toolcanary.simulator`), and the tiny tokenizer reads the packaged default library as a data file.
TRAIN_MAY_IMPORT_FROM_SIMULATOR: dict[str, set[str]] = {}

SHARED_LAYERS = ("contract", "settings", "common")
# (importer, imported): why. The table in docs/architecture.md lists the same pairs.
CROSS_SERVICE_IMPORTS = {
    ("toolcanary.audit.bfcl_items", "toolcanary.evaluate.bfcl_data"):
        "the audit compares with the BFCL items the evaluation scores, read from the same installed bfcl-eval "
        "(both run in the eval image)",
    ("toolcanary.demo.pipeline", "toolcanary.train.settings"):
        "the demo starts the trainer as a process and names its settings through the trainer's declaration",
    ("toolcanary.evaluate.__main__", "toolcanary.serve.command"):
        "the eval client serves a checkpoint with the serve image's one vLLM command line (stdlib only)",
    ("toolcanary.evaluate.schedule", "toolcanary.serve.command"): "as above, for eval-all and watch",
    ("toolcanary.evaluate.serving", "toolcanary.serve.reload"):
        "the worker method a reloading server runs, by the name serve gives it (no vLLM import)",
    ("toolcanary.evaluate.settings", "toolcanary.serve.command"): "the served-model name, as serve names it",
}


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
    assert {"toolcanary.simulator.llm", "toolcanary.simulator.scripted", "toolcanary.train.cpu.tiny_policy",
            "toolcanary.simulator.__main__", "toolcanary.simulator.library_builder"} <= set(MODULES)
    assert "toolcanary.simulator.calls" in GRAPH["toolcanary.simulator.llm"]


def test_no_import_circle():
    assert _circles() == []


def test_a_circle_is_found_when_there_is_one():
    GRAPH["toolcanary.train.cpu.policy_files"].add("toolcanary.train.cpu.tiny_policy")
    try:
        circles = _circles()
        assert any({"toolcanary.train.cpu.policy_files", "toolcanary.train.cpu.tiny_policy"} <= set(c) for c in circles)
    finally:
        GRAPH["toolcanary.train.cpu.policy_files"].discard("toolcanary.train.cpu.tiny_policy")


def test_neither_simulator_backend_imports_the_other():
    assert _offenders("toolcanary.simulator.llm", "toolcanary.simulator.scripted") == {}
    assert _offenders("toolcanary.simulator.scripted", "toolcanary.simulator.llm") == {}


def test_the_trainer_imports_nothing_of_the_simulator():
    assert _offenders("toolcanary.train", "toolcanary.simulator", TRAIN_MAY_IMPORT_FROM_SIMULATOR) == {}


def _service(module: str) -> str | None:
    """`train` for toolcanary.train.grpo; None for the shared layers and the package itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] not in SHARED_LAYERS else None


def _cross_service_imports() -> set[tuple[str, str]]:
    return {(module, imported) for module, imports in GRAPH.items() for imported in imports
            if _service(module) and _service(imported) and _service(module) != _service(imported)}


def test_a_service_imports_another_only_where_the_rule_lists_it():
    found = _cross_service_imports()
    assert sorted(found - set(CROSS_SERVICE_IMPORTS)) == [], "add the pair, with its reason, or import a shared layer"
    assert sorted(set(CROSS_SERVICE_IMPORTS) - found) == [], "a listed pair the code no longer uses"


def test_the_architecture_page_lists_the_same_pairs():
    page = (SERVICES.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    listed = {(a, b) for a, b in re.findall(r"^\| `(toolcanary\.[\w.]+)` \| `(toolcanary\.[\w.]+)` \|", page, re.M)}
    assert listed == set(CROSS_SERVICE_IMPORTS)


def test_a_new_cross_service_import_is_caught():
    GRAPH["toolcanary.analysis.table"].add("toolcanary.train.settings")
    try:
        assert ("toolcanary.analysis.table", "toolcanary.train.settings") in _cross_service_imports()
    finally:
        GRAPH["toolcanary.analysis.table"].discard("toolcanary.train.settings")


def test_the_shared_layers_import_no_service():
    assert {m: sorted(i for i in GRAPH[m] if _service(i)) for m in MODULES
            if not _service(m) and any(_service(i) for i in GRAPH[m])} == {}


def test_the_contract_imports_no_service():
    assert {m: sorted(i for i in GRAPH[m] if not i.startswith("toolcanary.contract"))
            for m in _under("toolcanary.contract") if any(not i.startswith("toolcanary.contract") for i in GRAPH[m])} == {}


def test_the_trainer_paths_stay_apart():
    """train/cpu/ and train/gpu/ import each other nothing; the modules beside them, shared by both paths,
    import neither (the command line, which dispatches to both, aside)."""
    crossing = {}
    for module in _under("toolcanary.train"):
        side = next((s for s in ("cpu", "gpu") if module.startswith(f"toolcanary.train.{s}")), None)
        if module == "toolcanary.train.__main__":
            continue
        bad = sorted(i for i in GRAPH[module] for other in ("cpu", "gpu")
                     if other != side and i.startswith(f"toolcanary.train.{other}"))
        if bad:
            crossing[module] = bad
    assert crossing == {}
