"""Every default of the contamination audit, in one place, with its environment-variable override.

Each field `name` can be set with `TOOLCANARY_AUDIT_<NAME>`; the two shared folders also read
`TOOLCANARY_RUNS_DIR` and `TOOLCANARY_RESULTS_DIR`, the TRUSTEE checkout .env's `TRUSTEE_DIR`. CLI flags of the
same name beat both (toolcanary.settings). The three thresholds are the audit's published definitions:
docs/audit.md explains how each was chosen.

    from toolcanary.audit.settings import AuditSettings
    settings = AuditSettings.from_env()
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

import toolcanary
from toolcanary.contract.bfcl import OFFLINE_CATEGORIES
from toolcanary.contract.errors import UsageError
from toolcanary.contract.run_id import RunId
from toolcanary.settings import Cli, Options, ServiceSettings, env, project_root, volume

REPO_ROOT = project_root()
# The simulator's packaged library; referenced by path so the eval image need not import the simulator.
DEFAULT_LIBRARY = Path(toolcanary.__file__).parent / "simulator" / "data" / "default_library.json"
ENV_PREFIX = "TOOLCANARY_AUDIT_"


class AuditSettings(ServiceSettings, env_prefix=ENV_PREFIX):
    """Defaults for `python -m toolcanary.audit`; docs/audit.md gives the meaning of each threshold."""

    # The stack's own names: the volume roots, and .env's TRUSTEE checkout (a trustee-mode run's library is in it).
    runs_dir: Path = Field(volume("runs"), validation_alias=env(ENV_PREFIX + "RUNS_DIR", "TOOLCANARY_RUNS_DIR"),
                           description="runs root")
    results_dir: Path = Field(volume("results"), validation_alias=env(ENV_PREFIX + "RESULTS_DIR",
                                                                      "TOOLCANARY_RESULTS_DIR"),
                              description="results root")
    library: Path | None = Field(None, description="training tool library in TRUSTEE's format (default: the "
                                                   "library the run's simulator recorded in "
                                                   "<runs>/RUN/simulator/libraries.jsonl)")
    trustee_dir: Path | None = Field(None, validation_alias=env(ENV_PREFIX + "TRUSTEE_DIR", "TRUSTEE_DIR"),
                                     description="the TRUSTEE checkout, where a trustee-mode run's ToolBench "
                                                 "library is found")
    schema_threshold: float = Field(0.8, description="TF-IDF cosine (name + description + parameter names) at or "
                                                     "above which a schema is a near duplicate")
    query_threshold: float = Field(0.5, description="TF-IDF cosine (content words and word pairs) between a BFCL "
                                                    "turn and a generated task at or above which the turn overlaps "
                                                    "the task")
    query_ngram: int = Field(2, description="longest content-word n-gram the query TF-IDF uses")
    min_query_words: int = Field(4, description="turns with fewer content words than this are too short to judge "
                                                "and never flag")
    verbatim_ngram: int = Field(3, description="word n-gram size of the reported verbatim containment (a score for "
                                               "the reader, not a flag)")
    top_k: int = Field(3, description="neighbours listed per BFCL item for schema similarity and query overlap")
    chunk_rows: int = Field(512, description="BFCL rows per sparse product; bounds memory at scale")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> AuditSettings:
        """Defaults overridden by TOOLCANARY_* variables, then by `overrides`, checked."""
        return super().from_env(environ, **overrides).validated()

    def replace(self, **changes: object) -> AuditSettings:
        """A copy with the CLI values that were given (None means not given)."""
        return self.model_copy(update={k: v for k, v in changes.items() if v is not None}).validated()

    def validated(self) -> AuditSettings:
        for name in ("schema_threshold", "query_threshold"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise UsageError(
                    f"--{name}", "a number in (0, 1]", repr(value), "Pick a threshold in (0, 1]"
                )
        for name in ("query_ngram", "min_query_words", "verbatim_ngram", "top_k", "chunk_rows"):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name}", "a positive integer", repr(getattr(self, name)))
        return self


# The thresholds and sizes of the audit's measures, shown in a group of their own.
MEASURES = ("schema_threshold", "query_threshold", "query_ngram", "min_query_words", "verbatim_ngram", "top_k",
            "chunk_rows")


class AuditOptions(Options):
    """Which run and which BFCL categories one audit reads."""

    run: RunId = Field(description="run name: reads <runs>/RUN/simulator, writes <results>/RUN/audit")
    categories: Annotated[list[str], Cli(nargs="+", metavar="CATEGORY", show_default=False)] = Field(
        list(OFFLINE_CATEGORIES), description=f"BFCL categories to audit (default: the {len(OFFLINE_CATEGORIES)} "
                                              "offline ones)")
    quiet: Annotated[bool, Cli(off="")] = Field(False, description="no progress bars, warnings only")
