"""Every file a run writes under the volume roots, and the contract type it holds.

The three roots are `<runs>`, `<checkpoints>` and `<results>` (`volumes/runs`, ...); every pattern is a path
relative to `<root>/<run>/`, one glob per path segment (`**`: any number of segments). `match(root, path)`
names the entry a file falls under, the first that matches:

    entry = match("results", "episodes.jsonl")      # VolumeFile(..., holds=Lines(EpisodeRecord))

What a file holds is one of: `Lines(model)` (JSONL, one model per line, append-only), `Document(model)` (one
JSON document), `Csv(columns)` (the contract's header, in order), `Report(form, writer)` (an output for people,
read back by no service) or `Foreign(form, owner)` (another tool's format: weights, tokenizers, logs).
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import PurePosixPath
from typing import Literal

from pydantic import BaseModel

from toolcanary.contract.csv_schemas import (
    BFCL_BY_CATEGORY,
    BFCL_WRITTEN_COLUMNS,
    TRAIN_METRICS,
    TRAIN_METRICS_COLUMNS,
    WARM_START,
    WARM_START_COLUMNS,
)
from toolcanary.contract.manifests import (
    CHECKPOINT_MANIFEST,
    PUBLISHED,
    CheckpointManifest,
    EvalPassManifest,
    PublishedCheckpoint,
)
from toolcanary.contract.pass_files import (
    COUNTS_FILE,
    FAILURE_FILE,
    OUTCOMES_FILE,
    REQUEST_FILE,
    SAMPLE_FILE,
    ItemOutcome,
    PassCounts,
    PassFailure,
    PassRequest,
    RunSample,
)
from toolcanary.contract.simulator_api import LIBRARIES_FILE, LibraryRecord, RoleRecord
from toolcanary.contract.training_files import (
    CURRICULUM_FILE,
    EPISODES_DIR,
    EPISODES_FILE,
    HELD_OUT_FILE,
    TASK_KEY_TAG_FILE,
    CurriculumFile,
    EpisodeRecord,
    HeldOutAnswer,
)

Root = Literal["runs", "checkpoints", "results"]
ROOTS: tuple[Root, ...] = ("runs", "checkpoints", "results")


@dataclass(frozen=True)
class Lines:
    model: type[BaseModel]


@dataclass(frozen=True)
class Document:
    model: type[BaseModel]


@dataclass(frozen=True)
class Csv:
    columns: tuple[str, ...]


@dataclass(frozen=True)
class Report:
    form: str
    writer: str


@dataclass(frozen=True)
class Foreign:
    form: str
    owner: str


Holds = Lines | Document | Csv | Report | Foreign


@dataclass(frozen=True)
class VolumeFile:
    root: Root
    pattern: str
    holds: Holds
    writer: str

    def matches(self, root: str, relative: str | PurePosixPath) -> bool:
        return root == self.root and _glob(self.pattern.split("/"), PurePosixPath(relative).parts)


def _glob(pattern: list[str], parts: tuple[str, ...]) -> bool:
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_glob(pattern[1:], parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatchcase(parts[0], pattern[0]) and _glob(pattern[1:], parts[1:])


REPORT_FILE = "report/index.html"  # <results>/<run>/: the run's report page (make_figures --report)
TENSORBOARD_DIR = "tensorboard"  # <results>/<run>/: verl's training curves and, in bfcl/, each pass's scores
_HF = "Hugging Face transformers / vLLM"
_PASS = "passes/step_[0-9][0-9][0-9][0-9]*_pass_*"
_STEP = "step_[0-9][0-9][0-9][0-9]*"

VOLUME_FILES: tuple[VolumeFile, ...] = (
    # --- <runs>/<run>/: the simulator's records, the trainer's private state, every service's log ---------
    VolumeFile("runs", f"simulator/{_STEP}.jsonl", Lines(RoleRecord), "simulator"),
    VolumeFile("runs", "simulator/step_none.jsonl", Lines(RoleRecord), "simulator"),
    VolumeFile("runs", f"simulator/{LIBRARIES_FILE}", Lines(LibraryRecord), "simulator"),
    VolumeFile("runs", f"trainer/{CURRICULUM_FILE}", Document(CurriculumFile), "train (verl hooks)"),
    VolumeFile("runs", f"trainer/{TASK_KEY_TAG_FILE}", Foreign("16 hex digits, the run's task-key tag",
                                                         "toolcanary.train.task_keys"), "train"),
    VolumeFile("runs", "trainer/state_[0-9][0-9][0-9][0-9]*.pt", Foreign("trainer state", "torch.save"),
               "train (CPU run)"),
    VolumeFile("runs", "trainer/base_policy/**", Foreign("the base policy's checkpoint folder", _HF),
               "train (build-policy)"),
    VolumeFile("runs", "trainer/reference/**", Foreign("the frozen reference policy's folder", _HF),
               "train (CPU run)"),
    VolumeFile("runs", "verl/**", Foreign("verl's own checkpoints", "verl"), "train (verl)"),
    VolumeFile("runs", "embedded_simulator.log", Foreign("log text", "the embedded simulator"), "train (CPU run)"),
    VolumeFile("runs", "logs/*.log", Foreign("log text", "each service"), "demo"),
    # --- <checkpoints>/<run>/: the published policies ---------------------------------------------------
    VolumeFile("checkpoints", f"{_STEP}/{CHECKPOINT_MANIFEST}", Document(CheckpointManifest), "train (publisher)"),
    VolumeFile("checkpoints", PUBLISHED, Lines(PublishedCheckpoint), "train (publisher)"),
    VolumeFile("checkpoints", f"{_STEP}/**", Foreign("a published checkpoint's files", _HF), "train (publisher)"),
    # --- <results>/<run>/: what the trainer, the evaluation, the analysis and the audit report ------------
    VolumeFile("results", TRAIN_METRICS, Csv(TRAIN_METRICS_COLUMNS), "train"),
    VolumeFile("results", WARM_START, Csv(WARM_START_COLUMNS), "train (CPU run)"),
    VolumeFile("results", EPISODES_FILE, Lines(EpisodeRecord), "train (CPU run)"),
    VolumeFile("results", HELD_OUT_FILE, Lines(HeldOutAnswer), "train (starting-policy check)"),
    VolumeFile("results", f"{EPISODES_DIR}/{_STEP}/*.jsonl", Lines(EpisodeRecord), "train (verl agent loops)"),
    VolumeFile("results", BFCL_BY_CATEGORY, Csv(BFCL_WRITTEN_COLUMNS), "evaluate"),
    VolumeFile("results", SAMPLE_FILE, Document(RunSample), "evaluate"),
    VolumeFile("results", f"{_PASS}/manifest.json", Document(EvalPassManifest), "evaluate"),
    VolumeFile("results", f"{_PASS}/{REQUEST_FILE}", Document(PassRequest), "evaluate"),
    VolumeFile("results", f"{_PASS}/{OUTCOMES_FILE}", Lines(ItemOutcome), "evaluate"),
    VolumeFile("results", f"{_PASS}/{COUNTS_FILE}", Document(PassCounts), "evaluate"),
    VolumeFile("results", f"{_PASS}/{FAILURE_FILE}", Document(PassFailure), "evaluate"),
    VolumeFile("results", f"{_PASS}/bfcl/**", Foreign("bfcl-eval's results, scores and id list", "bfcl-eval"),
               "evaluate (bfcl-eval)"),
    VolumeFile("results", f"{_PASS}/.lock", Foreign("empty lock file", "the pass's one writer (fcntl)"), "evaluate"),
    VolumeFile("results", f"{_PASS}/logs/*.log", Foreign("log text", "bfcl-eval's generate and evaluate"),
               "evaluate"),
    VolumeFile("results", "serving/*.log", Foreign("log text", "the policy server"), "evaluate"),
    VolumeFile("results", "tables/headline.md", Report("markdown table", "toolcanary.analysis"), "analysis"),
    VolumeFile("results", "tables/headline.csv", Report("CSV table", "toolcanary.analysis"), "analysis"),
    VolumeFile("results", "tables/headline.tex", Report("LaTeX table", "toolcanary.analysis"), "analysis"),
    VolumeFile("results", "tables/findings.txt", Report("prose", "toolcanary.analysis"), "analysis"),
    VolumeFile("results", "tables/findings.json", Report("JSON findings", "toolcanary.analysis"), "analysis"),
    VolumeFile("results", "tables/items_step*_step*.csv", Report("CSV, the items lost and gained between two steps",
                                                                 "toolcanary.analysis.items"), "analysis"),
    VolumeFile("results", "tables/stability.csv", Report("CSV, the items that flip between repeat passes",
                                                         "toolcanary.analysis.stability"), "analysis"),
    VolumeFile("results", "tables/training_distribution.csv",
               Report("CSV, what the simulator trained on, per step", "toolcanary.analysis.training_distribution"),
               "analysis"),
    VolumeFile("results", "tables/training_distribution_by_level.csv",
               Report("CSV, what the simulator trained on, per curriculum level",
                      "toolcanary.analysis.training_distribution"), "analysis"),
    VolumeFile("results", "figures/*.png", Report("figure", "toolcanary.analysis"), "analysis"),
    VolumeFile("results", "figures/*.pdf", Report("figure", "toolcanary.analysis"), "analysis"),
    VolumeFile("results", REPORT_FILE, Report("self-contained HTML page", "toolcanary.analysis.report"), "analysis"),
    VolumeFile("results", f"{TENSORBOARD_DIR}/**", Foreign("TensorBoard event files", "verl's tensorboard logger; "
                                                           "toolcanary.evaluate.tracker in bfcl/"), "train, evaluate"),
    VolumeFile("results", "demo_timings.json", Report("JSON, where the demo's time went", "toolcanary.demo"), "demo"),
    VolumeFile("results", "audit/audit.md", Report("markdown report", "toolcanary.audit"), "audit"),
    VolumeFile("results", "audit/audit.csv", Report("CSV, one row per BFCL item", "toolcanary.audit"), "audit"),
    VolumeFile("results", "audit/robustness.csv", Report("CSV, aggregates without flagged items",
                                                         "toolcanary.audit"), "audit"),
)


# Beside any append-only file (`append_only.lock_path`, `append_only.fence_path`), in every root.
SIDECARS: tuple[VolumeFile, ...] = tuple(
    VolumeFile(root, pattern, holds, "the file's writers")
    for root in ROOTS
    for pattern, holds in (("**/.*.lock", Foreign("empty lock file", "append_only.lock_path (fcntl)")),
                           ("**/.*.torn", Foreign("fenced torn-line offsets", "append_only.fence_path")))
)


def match(root: str, relative: str | PurePosixPath) -> VolumeFile | None:
    """The first entry `<root>/<run>/<relative>` falls under, or None for a file no entry describes."""
    return next((entry for entry in VOLUME_FILES + SIDECARS if entry.matches(root, relative)), None)
