"""Importing the contract pulls in the standard library and pydantic v2, nothing else.

Every image depends on the contract, so a heavy import here would leak into all of them.
Run: .venvs/dev/bin/python -m pytest tests/contract/test_contract_is_light.py -q
"""

import json
import subprocess
import sys

ALLOWED_THIRD_PARTY = {
    "pydantic",
    "pydantic_core",
    "typing_extensions",
    "annotated_types",
    "typing_inspection",
}


def test_import_loads_only_stdlib_and_pydantic():
    code = (
        "import sys, json; before = set(sys.modules); import toolcanary.contract;"
        "print(json.dumps(sorted({m.split('.')[0] for m in set(sys.modules) - before})))"
    )
    loaded = json.loads(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    )
    third_party = {
        m for m in loaded if m not in sys.stdlib_module_names and m != "toolcanary" and not m.startswith("_")
    }
    assert third_party <= ALLOWED_THIRD_PARTY, third_party - ALLOWED_THIRD_PARTY


def test_every_service_reports_the_same_contract_version():
    import toolcanary.contract as contract

    assert contract.CONTRACT_VERSION.count(".") == 1
