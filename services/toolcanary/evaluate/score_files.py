"""Guard 5: read correct/total and the failed ids from this pass's BFCL score files, and nothing else.

bfcl-eval re-reads every score file it finds and counts a missing category as 0, so the client insists on
exactly one fresh score file per expected category, with the expected item count, and none other.

    python -c "from toolcanary.evaluate.score_files import read_scores; help(read_scores)"
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from toolcanary.contract.errors import ContractError
from toolcanary.evaluate.bfcl_data import RESULT_PREFIX

SUFFIX = "_score.json"


@dataclass(frozen=True)
class CategoryScore:
    correct: int
    total: int
    failed: dict[str, str]


def _category(path: Path) -> str:
    return path.name.removeprefix(RESULT_PREFIX).removesuffix(SUFFIX)


def error_type(failure: dict) -> str:
    """Single-turn score lines carry `error_type`; multi-turn ones nest it under `error`."""
    nested = failure.get("error")
    return str(failure.get("error_type") or (nested.get("error_type") if isinstance(nested, dict) else None)
               or "unknown_error")


def read_scores(score_dir: Path, ids: dict[str, list[str]], not_before: float) -> dict[str, CategoryScore]:
    """One CategoryScore per expected category.

    Raises:
        ContractError: a category missing, a score file older than this pass's evaluate phase, one for a
            category this pass did not ask for, or counts that do not add up to the requested items.
    """
    files = {}
    for path in sorted(score_dir.rglob(f"{RESULT_PREFIX}*{SUFFIX}")):
        category = _category(path)
        if category in files:
            raise ContractError(str(score_dir), "one score file per category", f"two for {category}",
                                "Score files from another pass are present; rerun with --resume")
        files[category] = path
    missing = sorted(set(ids) - set(files))
    extra = sorted(set(files) - set(ids))
    if missing or extra:
        raise ContractError(
            str(score_dir), f"score files for exactly {sorted(ids)}", f"missing {missing}, unexpected {extra}",
            "bfcl-eval counts a missing category as 0 and re-reads stale files; rerun the pass with --resume",
        )
    scores = {}
    for category, path in files.items():
        if path.stat().st_mtime < not_before:
            raise ContractError(str(path), "a score file written by this evaluate phase", "an older file",
                                "Score files left from another run; rerun with --resume")
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        header, failures = lines[0], lines[1:]
        failed = {f["id"]: error_type(f) for f in failures}
        expected = set(ids[category])
        score = CategoryScore(int(header["correct_count"]), int(header["total_count"]), failed)
        if score.total != len(expected) or not set(failed) <= expected or \
                score.correct != score.total - len(failed):
            raise ContractError(
                str(path), f"{len(expected)} items with correct = total - failed lines",
                f"total {score.total}, correct {score.correct}, {len(failed)} failed lines "
                f"({len(set(failed) - expected)} not requested)",
                "The score file does not belong to this pass; rerun with --resume",
            )
        scores[category] = score
    return scores
