"""BFCL result files of one pass: read them strictly, classify failed requests, clean them for a resume.

bfcl-eval stores a failed request as the string "Error during inference: ..." and later scores it (an
abstention category counts it as correct). This module finds those (guard 2), tells context-length
errors apart (guard 4), and spots empty answers.

    python -c "from toolcanary.evaluate.result_files import classify; print(classify({'result': ''}))"
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from toolcanary.contract.errors import ContractError
from toolcanary.evaluate.bfcl_data import RESULT_PREFIX, group_dir

ERROR_PREFIX = "Error during inference"
OVERLONG = re.compile(r"maximum context length|max_model_len|longer than the maximum model length|"
                      r"context length exceeded|context_length_exceeded|reduce the length", re.IGNORECASE)
REQUEST_ERROR, OVERLONG_ERROR, EMPTY_RESPONSE = "request_error", "overlong", "empty_response"


def result_path(result_dir: Path, registry_key: str, category: str) -> Path:
    return result_dir / registry_key.replace("/", "_") / group_dir(category) / f"{RESULT_PREFIX}{category}_result.json"


def _empty(response: object, tokens: object) -> bool:
    if response is None or response == "":
        return True
    # The chat handler stores [] when the server sends `tool_calls: []`; only zero output tokens make it empty.
    return response == [] and tokens in (0, None)


def classify(entry: dict) -> str | None:
    """None for an answer BFCL may score; otherwise request_error, overlong or empty_response."""
    result = entry.get("result")
    if isinstance(result, str) and result.startswith(ERROR_PREFIX):
        return OVERLONG_ERROR if OVERLONG.search(result) else REQUEST_ERROR
    tokens = entry.get("output_token_count")
    if isinstance(result, list) and result and all(isinstance(turn, list) for turn in result) and \
            isinstance(tokens, list) and all(isinstance(t, list) for t in tokens):
        steps = [(s, t) for turn, turn_tokens in zip(result, tokens, strict=False)
                 for s, t in zip(turn, turn_tokens, strict=False)]
        return EMPTY_RESPONSE if any(_empty(s, t) for s, t in steps) else None
    return EMPTY_RESPONSE if _empty(result, tokens) else None


def read_lines(path: Path, strict: bool) -> list[dict]:
    """JSON lines of a result file; a torn line (a kill mid-write) raises in strict mode, else is dropped."""
    entries = []
    if not path.is_file():
        return entries
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            entry["id"]
        except (ValueError, KeyError, TypeError):
            if strict:
                raise ContractError(f"{path}: line {number}", "one JSON result per line", repr(line[:120]),
                                    "Rerun the pass with --resume to regenerate it") from None
            continue
        entries.append(entry)
    return entries


def read_results(result_dir: Path, registry_key: str, ids: dict[str, list[str]]) -> dict[str, dict[str, dict]]:
    """Every expected id's result, exactly once; refuses missing, unexpected or repeated ids.

    Raises:
        ContractError: bfcl-eval generated something other than exactly the requested items.
    """
    found: dict[str, dict[str, dict]] = {}
    for category, expected in ids.items():
        path = result_path(result_dir, registry_key, category)
        entries = read_lines(path, strict=True)
        by_id = {e["id"]: e for e in entries}
        repeated = len(entries) - len(by_id)
        missing = sorted(set(expected) - set(by_id))
        extra = sorted(set(by_id) - set(expected))
        if missing or extra or repeated:
            raise ContractError(
                str(path), f"exactly the {len(expected)} requested {category} items",
                f"{len(missing)} missing {missing[:5]}, {len(extra)} unexpected {extra[:5]}, {repeated} repeated",
                "Rerun with --resume to generate the missing items; unexpected ones mean a reused folder",
            )
        found[category] = by_id
    return found


def clean_for_resume(result_dir: Path, registry_key: str, ids: dict[str, list[str]]) -> dict[str, int]:
    """Keep only whole, expected, answered entries, so bfcl-eval regenerates everything else.

    bfcl-eval never retries an id it has a result for, errors included; dropping those lines is what
    makes a resumed pass end exactly like an uninterrupted one.
    """
    kept = {}
    for category, expected in ids.items():
        path = result_path(result_dir, registry_key, category)
        wanted = set(expected)
        good = {e["id"]: e for e in read_lines(path, strict=False) if e["id"] in wanted and classify(e) is None}
        if path.exists():
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text("".join(json.dumps(good[i]) + "\n" for i in expected if i in good))
            tmp.replace(path)
        kept[category] = len(good)
    return kept


def progress_counts(result_dir: Path) -> tuple[int, int]:
    """(results written, of which errors) across the pass's result files, cheaply, for the progress bar."""
    done = errors = 0
    for path in result_dir.rglob(f"{RESULT_PREFIX}*_result.json"):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        done += data.count(b"\n")
        errors += data.count(ERROR_PREFIX.encode())
    return done, errors
