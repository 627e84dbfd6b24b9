"""BFCL's files of one pass: its result files, its score files, and the per-item outcomes made from both.

bfcl-eval stores a failed request as the string "Error during inference: ..." and later scores it (an
abstention category counts it as correct); it re-reads every score file it finds and counts a missing
category as 0. So the client reads both kinds of file strictly:

- result files (`bfcl/result/...`): every requested id exactly once (guard unknown-ids), failed and empty requests
  found (`classify`, guard failed-requests), context-length errors told apart (guard overlong-items), cleaned for a resume;
- score files (`bfcl/score/...`): exactly one fresh file per requested category, with the requested item
  count (guard score-files);
- outcomes (`outcomes.jsonl`, typed in `toolcanary.contract.pass_files`): "correct", BFCL's error type,
  "overlong" or "truncated", both of which override BFCL's verdict (an irrelevance item the server refused as
  too long, or whose answer was cut at the output cap, is not a correct abstention), and the kind of answer
  the model gave (toolcanary.evaluate.answers), which leaves BFCL's verdict alone: the rows count the correct
  items that held unparsed call markup in `correct_unparsed`. Each outcome keeps BFCL's own verdict
  (`bfcl_correct`) and the tokens the server generated (`output_tokens`), so the rows also count the truncated
  and overlong items with BFCL's verdict on them, and the correct items that were a reasoning trace alone
  (`truncated`, `truncated_bfcl_correct`, `overlong`, `overlong_bfcl_correct`, `correct_empty_reasoning`).

    results = read_results(paths.result_dir, "toolcanary-served-FC", ids)
    outcomes = build_outcomes(ids, results, read_scores(paths.score_dir, ids, not_before))
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from toolcanary.contract.csv_schemas import BfclRow
from toolcanary.contract.errors import ContractError
from toolcanary.contract.pass_files import (
    CORRECT,
    OVERLONG,
    TRUNCATED,
    AnswerKind,
    ItemOutcome,
    count_outcomes,
    count_unparsed_correct,
    count_verdicts,
)
from toolcanary.evaluate import guards
from toolcanary.evaluate.answers import entry_answer_kind
from toolcanary.evaluate.bfcl_data import RESULT_PREFIX, function_names, group_dir
from toolcanary.evaluate.bfcl_wrapper import TRUNCATED_FIELD

ERROR_PREFIX = "Error during inference"
OVERLONG_TEXT = re.compile(r"maximum context length|max_model_len|longer than the maximum model length|"
                           r"context length exceeded|context_length_exceeded|reduce the length", re.IGNORECASE)
REQUEST_ERROR, OVERLONG_ERROR, EMPTY_RESPONSE = "request_error", OVERLONG, "empty_response"
SCORE_SUFFIX = "_score.json"


# Result files


def result_path(result_dir: Path, registry_key: str, category: str) -> Path:
    return result_dir / registry_key.replace("/", "_") / group_dir(category) / f"{RESULT_PREFIX}{category}_result.json"


def truncated(entry: dict) -> bool:
    """Whether the server cut one of the item's responses at the output cap (the handler's count)."""
    count = entry.get(TRUNCATED_FIELD, 0)
    return isinstance(count, int) and count > 0


def output_tokens(entry: dict) -> int | None:
    """Tokens the server generated for the item, over all its responses: BFCL's `output_token_count`, a number
    for a single-turn item and a list per turn of numbers per step for a multi-turn one. None when the line has
    none (a failed request) or holds anything else."""
    def total(value: object) -> float | None:
        if isinstance(value, bool):
            return None
        if isinstance(value, int | float):
            return value if 0 <= value < float("inf") else None
        if isinstance(value, list):
            parts = [total(v) for v in value]
            return None if None in parts else sum(parts)
        return None

    found = total(entry.get("output_token_count"))
    return None if found is None else int(found)


def _empty(response: object, tokens: object) -> bool:
    if response is None or response == "":
        return True
    # The chat handler stores [] when the server sends `tool_calls: []`; only zero output tokens make it empty.
    return response == [] and tokens in (0, None)


@guards.enforces(guards.FAILED_REQUESTS, guards.OVERLONG_ITEMS)
def classify(entry: dict) -> str | None:
    """None for an answer BFCL may score; otherwise request_error, overlong or empty_response.

    An answer cut at the output cap is an answer (its outcome is "truncated", see `build_outcomes`), even when
    the cut left nothing but a reasoning trace outside `content`."""
    result = entry.get("result")
    if isinstance(result, str) and result.startswith(ERROR_PREFIX):
        return OVERLONG_ERROR if OVERLONG_TEXT.search(result) else REQUEST_ERROR
    if truncated(entry):
        return None
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
    # Lines end at "\n" only: a model's answer may hold U+2028 or U+0085, which splitlines() also splits at.
    for number, line in enumerate(path.read_text().split("\n"), start=1):
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


@guards.enforces(guards.UNKNOWN_IDS)
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


# Score files


@dataclass(frozen=True)
class CategoryScore:
    correct: int
    total: int
    failed: dict[str, str]


def _category(path: Path) -> str:
    return path.name.removeprefix(RESULT_PREFIX).removesuffix(SCORE_SUFFIX)


def error_type(failure: dict) -> str:
    """Single-turn score lines carry `error_type`; multi-turn ones nest it under `error`."""
    nested = failure.get("error")
    return str(failure.get("error_type") or (nested.get("error_type") if isinstance(nested, dict) else None)
               or "unknown_error")


@guards.enforces(guards.SCORE_FILES)
def read_scores(score_dir: Path, ids: dict[str, list[str]], not_before: float) -> dict[str, CategoryScore]:
    """One CategoryScore per expected category.

    Raises:
        ContractError: a category missing, a score file older than this pass's evaluate phase, one for a
            category this pass did not ask for, or counts that do not add up to the requested items.
    """
    files = {}
    for path in sorted(score_dir.rglob(f"{RESULT_PREFIX}*{SCORE_SUFFIX}")):
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
        lines = [json.loads(line) for line in path.read_text().split("\n") if line.strip()]
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


# Outcomes and rows


@guards.enforces(guards.OVERLONG_ITEMS, guards.TRUNCATED_ANSWERS)
def build_outcomes(
    ids: dict[str, list[str]], results: dict[str, dict[str, dict]], scores: dict[str, CategoryScore],
) -> list[ItemOutcome]:
    """One outcome per requested item, in request order, with the kind of answer the model gave, BFCL's own
    verdict (before the overlong and truncated overrides) and the tokens generated for it."""
    outcomes = []
    for category, expected in ids.items():
        failed = scores[category].failed
        offered = function_names(category)
        for item in expected:
            entry = results[category][item]
            answer: AnswerKind | None
            if classify(entry) == OVERLONG_ERROR:
                # The server refused the request: the model returned nothing (bfcl-eval keeps no record of
                # the item's earlier turns once a request fails).
                outcome, answer = OVERLONG_ERROR, "empty"
            else:
                outcome = TRUNCATED if truncated(entry) else failed.get(item, CORRECT)
                answer = entry_answer_kind(entry, offered[item])
            outcomes.append(ItemOutcome(category=category, id=item, outcome=outcome, answer=answer,
                                        bfcl_correct=item not in failed, output_tokens=output_tokens(entry)))
    return outcomes


def count_rows(step: int, pass_index: int, outcomes: list[ItemOutcome], overlong_counted_wrong: bool) -> list[BfclRow]:
    """Raw correct/total per category, in the order categories were requested; how many of the correct items
    held call markup the server did not parse (None for a category with unclassified items); the truncated and
    overlong items with BFCL's verdict on them, and the correct items that were a reasoning trace alone
    (`toolcanary.contract.pass_files.count_verdicts`)."""
    counts = count_outcomes(outcomes, overlong_counted_wrong)
    unparsed = count_unparsed_correct(outcomes)
    verdicts = count_verdicts(outcomes)
    return [BfclRow(step, pass_index, c, correct, total, unparsed[c], **verdicts[c])
            for c, (correct, total) in counts.items()]
