"""Importing the contract pulls in the standard library and pydantic v2, nothing else; and every service
reports the contract's one version.

Every image depends on the contract, so a heavy import here would leak into all of them.
Run: .venvs/dev/bin/python -m pytest tests/contract/test_contract_is_light.py -q
"""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ALLOWED_THIRD_PARTY = {
    "pydantic",
    "pydantic_core",
    "typing_extensions",
    "annotated_types",
    "typing_inspection",
}


@pytest.mark.parametrize("package", ["toolcanary.contract", "toolcanary.common.trustee_checkout",
                                     "toolcanary.common.loopback"])
def test_import_loads_only_stdlib_and_pydantic(package):
    # The shared helpers are held to the contract's rule: every image imports them.
    code = (
        f"import sys, json; before = set(sys.modules); import {package};"
        "print(json.dumps(sorted({m.split('.')[0] for m in set(sys.modules) - before})))"
    )
    loaded = json.loads(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    )
    third_party = {
        m for m in loaded if m not in sys.stdlib_module_names and m != "toolcanary" and not m.startswith("_")
    }
    assert third_party <= ALLOWED_THIRD_PARTY, third_party - ALLOWED_THIRD_PARTY


def _carriers(contract_dir: Path) -> set[str]:
    """The contract's models that carry a `contract_version` field."""
    found = set()
    for path in contract_dir.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(item, ast.AnnAssign) and getattr(item.target, "id", None) == "contract_version"
                for item in node.body
            ):
                found.add(node.name)
    return found


def _built(call: ast.Call) -> str | None:
    """The class a call builds: `Health(...)`, or `RoleRecord.model_construct(...)`."""
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name):
        return call.func.value.id if call.func.attr.startswith("model_") else call.func.attr
    return None


def test_every_service_reports_the_same_contract_version():
    # What a service reports its contract version in (the simulator's health answer and records, the trainer's
    # checkpoint manifest, the evaluation's pass manifest) is built with the contract's own CONTRACT_VERSION,
    # imported from toolcanary.contract: no service states a version of its own, and none is left out.
    import toolcanary.contract as contract

    assert re.fullmatch(r"\d+\.\d+", contract.CONTRACT_VERSION), contract.CONTRACT_VERSION
    package = Path(contract.__file__).resolve().parents[1]
    carriers = _carriers(package / "contract")
    assert {"Health", "RoleRecord", "CheckpointManifest", "EvalPassManifest"} <= carriers, carriers
    built: dict[str, set[str]] = {}
    wrong = []
    for path in sorted(package.rglob("*.py")):
        service = path.relative_to(package).parts[0]
        if service == "contract" or not path.relative_to(package).parts[1:]:
            continue  # the contract itself, and the package's shared modules (no service's)
        tree = ast.parse(path.read_text())
        names = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 and node.module == "toolcanary.contract" for alias in node.names if alias.name == "CONTRACT_VERSION"}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            for keyword in node.keywords:
                if keyword.arg != "contract_version":
                    continue
                if isinstance(keyword.value, ast.Name) and keyword.value.id in names:
                    built.setdefault(_built(node), set()).add(service)
                else:
                    wrong.append(f"{path.relative_to(package)}:{node.lineno}: {ast.unparse(keyword.value)}")
    assert not wrong, f"contract versions not taken from toolcanary.contract.CONTRACT_VERSION: {wrong}"
    assert {"simulator", "train", "evaluate"} <= set().union(*built.values()), built
    assert carriers <= set(built), f"models with a contract_version no service builds: {carriers - set(built)}"
