"""Which tool library the audit checks: the one the run's simulator recorded at each start (libraries.jsonl).

Run: .venvs/eval/bin/python -m pytest tests/audit/test_run_library.py -q
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from toolcanary.audit.settings import DEFAULT_LIBRARY, AuditSettings
from toolcanary.audit.training_inputs import run_library
from toolcanary.contract import CONTRACT_VERSION, ContractError, LibraryRecord

IN_CHECKOUT = "verl/recipe/trustee/data/toolbench_tools.json"


def _record(path: Path, *, packaged: bool = False, in_checkout: str | None = None, sha: str | None = None) -> str:
    return LibraryRecord(contract_version=CONTRACT_VERSION, time="2026-12-01T00:00:00+00:00", run="r",
                         mode="toolcanary" if packaged else "trustee", path=str(path), packaged=packaged,
                         sha256=sha or hashlib.sha256(path.read_bytes()).hexdigest(), tools=2,
                         in_checkout=in_checkout).model_dump_json() + "\n"


def _run(tmp_path: Path, *lines: str) -> Path:
    folder = tmp_path / "runs" / "r"
    (folder / "simulator").mkdir(parents=True)
    (folder / "simulator" / "libraries.jsonl").write_text("".join(lines))
    return folder


def test_a_run_without_a_record_is_audited_against_the_packaged_library_and_says_so(tmp_path):
    folder = tmp_path / "runs" / "old"
    folder.mkdir(parents=True)
    assert run_library(folder, DEFAULT_LIBRARY) == (DEFAULT_LIBRARY, "the packaged library (the run recorded none)")


def test_the_packaged_record_resolves_to_this_installation_and_a_trustee_one_through_the_checkout(tmp_path,
                                                                                                 trustee_checkout):
    assert run_library(_run(tmp_path, _record(DEFAULT_LIBRARY, packaged=True) * 2), DEFAULT_LIBRARY)[0] == \
        DEFAULT_LIBRARY
    # The simulator read it at /trustee in its container; the host has the checkout elsewhere.
    library = trustee_checkout / IN_CHECKOUT
    line = _record(library, in_checkout=IN_CHECKOUT).replace(str(library), "/trustee/" + IN_CHECKOUT)
    found, how = run_library(_run(tmp_path / "t", line), DEFAULT_LIBRARY, trustee_checkout)
    assert found == trustee_checkout / IN_CHECKOUT and "trustee mode" in how
    with pytest.raises(ContractError, match="TRUSTEE_DIR"):
        run_library(_run(tmp_path / "u", line), DEFAULT_LIBRARY)


def test_a_changed_library_and_a_run_on_two_libraries_are_refused(tmp_path, trustee_checkout):
    library = trustee_checkout / IN_CHECKOUT
    changed = _record(library, sha="0" * 64)
    with pytest.raises(ContractError, match="other contents"):
        run_library(_run(tmp_path, changed), DEFAULT_LIBRARY)
    packaged_changed = _record(DEFAULT_LIBRARY, packaged=True, sha="0" * 64)
    with pytest.raises(ContractError, match=r"other contents\. Audit with the version the run used \(--library\)"):
        run_library(_run(tmp_path / "p", packaged_changed), DEFAULT_LIBRARY)
    two = _record(library) + _record(DEFAULT_LIBRARY, packaged=True)
    with pytest.raises(ContractError, match="one library for the whole run.*--library"):
        run_library(_run(tmp_path / "two", two), DEFAULT_LIBRARY)
    with pytest.raises(ContractError, match="line 1"):
        run_library(_run(tmp_path / "bad", json.dumps({"not": "a record"}) + "\n"), DEFAULT_LIBRARY)


def test_the_checkout_comes_from_the_stacks_trustee_dir_and_an_empty_entry_means_unset(tmp_path):
    assert AuditSettings.from_env({"TRUSTEE_DIR": str(tmp_path)}).trustee_dir == tmp_path
    assert AuditSettings.from_env({"TRUSTEE_DIR": ""}).trustee_dir is None
