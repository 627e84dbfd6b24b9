"""The registry of the files under the volume roots: each pattern names a contract type, and matching works.

The demo test checks every file a quick run writes against it (tests/demo/test_demo.py).
Run: .venvs/dev/bin/python -m pytest tests/contract/test_volumes.py -q
"""

from __future__ import annotations

from pydantic import BaseModel

from toolcanary.contract.csv_schemas import TRAIN_METRICS_COLUMNS
from toolcanary.contract.manifests import CheckpointManifest
from toolcanary.contract.simulator_api import RoleRecord
from toolcanary.contract.training_files import CurriculumFile, EpisodeRecord
from toolcanary.contract.volumes import ROOTS, VOLUME_FILES, Csv, Document, Foreign, Lines, Report, match


def test_every_entry_names_its_root_and_a_contract_type():
    for entry in VOLUME_FILES:
        assert entry.root in ROOTS and entry.writer
        assert isinstance(entry.holds, Lines | Document | Csv | Report | Foreign), entry
        if isinstance(entry.holds, Lines | Document):
            assert issubclass(entry.holds.model, BaseModel)
    assert len({(e.root, e.pattern) for e in VOLUME_FILES}) == len(VOLUME_FILES)


def test_the_trainers_and_simulators_files_resolve_to_their_types():
    assert match("results", "episodes.jsonl").holds == Lines(EpisodeRecord)
    assert match("results", "episodes/step_0010/host-12.jsonl").holds == Lines(EpisodeRecord)
    assert match("results", "episodes/host-12.jsonl") is None  # every worker file lies in its step's folder
    assert match("runs", "trainer/curriculum.json").holds == Document(CurriculumFile)
    assert match("runs", "simulator/step_0003.jsonl").holds == Lines(RoleRecord)
    assert match("runs", "simulator/step_none.jsonl").holds == Lines(RoleRecord)
    assert match("results", "train_metrics.csv").holds == Csv(TRAIN_METRICS_COLUMNS)


def test_the_manifest_wins_over_the_checkpoint_folders_other_files():
    assert match("checkpoints", "step_0002/manifest.json").holds == Document(CheckpointManifest)
    assert isinstance(match("checkpoints", "step_0002/model.safetensors").holds, Foreign)
    assert isinstance(match("runs", "trainer/base_policy/tokenizer.json").holds, Foreign)


def test_an_unknown_file_or_the_wrong_root_matches_nothing():
    assert match("results", "notes.txt") is None
    assert match("runs", "episodes.jsonl") is None
    assert match("checkpoints", "step_x/manifest.json") is None  # a step folder has four digits
