"""Every default of the contamination audit, in one place, with its environment-variable override.

Each field `name` can be set with `TOOLCANARY_AUDIT_<NAME>`; the two shared folders use
`TOOLCANARY_RUNS_DIR` and `TOOLCANARY_RESULTS_DIR`. CLI flags of the same name beat both. The three
thresholds are the audit's published definitions: docs/audit.md explains how each was chosen.

    from toolcanary.audit.settings import AuditSettings
    settings = AuditSettings.from_env()
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

import toolcanary
from toolcanary.contract.errors import ContractError

REPO_ROOT = Path(__file__).resolve().parents[3]
# The simulator's packaged library; referenced by path so the eval image need not import the simulator.
DEFAULT_LIBRARY = Path(toolcanary.__file__).parent / "simulator" / "data" / "default_library.json"
# The stack's own names: the volume roots, and .env's TRUSTEE checkout (a trustee-mode run's library is in it).
SHARED_DIRS = {"runs_dir": "TOOLCANARY_RUNS_DIR", "results_dir": "TOOLCANARY_RESULTS_DIR", "trustee_dir": "TRUSTEE_DIR"}
ENV_PREFIX = "TOOLCANARY_AUDIT_"


@dataclass
class AuditSettings:
    """Defaults for `python -m toolcanary.audit`; docs/audit.md gives the meaning of each threshold."""

    runs_dir: Path = REPO_ROOT / "volumes" / "runs"
    results_dir: Path = REPO_ROOT / "volumes" / "results"
    library: Path | None = None
    """Training tool library; None: the one the run's simulator recorded (libraries.jsonl)."""
    trustee_dir: Path | None = None
    """The TRUSTEE checkout, where a trustee-mode run's library is found outside the container."""
    schema_threshold: float = 0.8
    """TF-IDF cosine (name + description + parameter names) at or above which a schema is a near duplicate."""
    query_threshold: float = 0.5
    """TF-IDF cosine (content words and word pairs) between a BFCL turn and a generated task at or above
    which the turn overlaps the task."""
    query_ngram: int = 2
    """Longest content-word n-gram the query TF-IDF uses."""
    min_query_words: int = 4
    """Turns with fewer content words than this are too short to judge and never flag."""
    verbatim_ngram: int = 3
    """Word n-gram size of the reported verbatim containment (a score for the reader, not a flag)."""
    top_k: int = 3
    """Neighbours listed per BFCL item for schema similarity and query overlap."""
    chunk_rows: int = 512
    """BFCL rows per sparse product; bounds memory at scale (the benchmark varies it)."""

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> AuditSettings:
        """Defaults overridden by TOOLCANARY_* variables, converted to each field's type."""
        environ = dict(os.environ if environ is None else environ)
        defaults, values = cls(), {}
        for spec in dataclasses.fields(cls):
            name = SHARED_DIRS.get(spec.name, ENV_PREFIX + spec.name.upper())
            if environ.get(name, "") != "":  # .env's empty entries (TRUSTEE_DIR=) mean unset
                values[spec.name] = _convert(name, environ[name], spec.name, getattr(defaults, spec.name))
        return cls(**values).validated()

    def replace(self, **changes: object) -> AuditSettings:
        """A copy with the CLI values that were given (None means not given)."""
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None}).validated()

    def validated(self) -> AuditSettings:
        for name in ("schema_threshold", "query_threshold"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise ContractError(
                    f"--{name}", "a number in (0, 1]", repr(value), "Pick a threshold in (0, 1]"
                )
        for name in ("query_ngram", "min_query_words", "verbatim_ngram", "top_k", "chunk_rows"):
            if getattr(self, name) < 1:
                raise ContractError(f"--{name}", "a positive integer", repr(getattr(self, name)))
        return self


def _convert(name: str, raw: str, field: str, default: object) -> object:
    try:
        if field in ("library", "trustee_dir") or isinstance(default, Path):
            return Path(raw)
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
    except ValueError:
        raise ContractError(
            f"environment variable {name}",
            f"a value of type {type(default).__name__}",
            repr(raw),
            f"Fix or unset {name}",
        ) from None
    return raw
