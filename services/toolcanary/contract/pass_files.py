"""The evaluation's per-run and per-pass files: `sample.json`, `request.json`, `outcomes.jsonl`, `counts.json`
and `failure.json`.

Under `<results>/<run>/`:

- `sample.json` (`RunSample`): the `--sample`/`--seed` of the run and the ids it chose, pinned so every pass
  of the run scores the same items.
- `passes/step_NNNN_pass_P/request.json` (`PassRequest`): everything that decides a pass's numbers; a
  resumed pass must ask for exactly the same.
- `passes/step_NNNN_pass_P/outcomes.jsonl` (`ItemOutcome`, one line per item): "correct", BFCL's error type,
  "overlong" or "truncated", what kind of answer the model gave (`ANSWER_KINDS`), BFCL's own verdict and the
  tokens the server generated for it. `count_outcomes` turns them into (correct, total) per category, the one
  counting rule that the evaluation's rows and the audit's recomputation share; `count_unparsed_correct`
  counts the correct ones that held unparsed call markup, `count_verdicts` the truncated and overlong ones
  with BFCL's verdict on them and the correct ones that were a reasoning trace alone.
- `passes/step_NNNN_pass_P/counts.json` (`PassCounts`): the pass's rows, `csv_schemas.BfclRow`s as JSON,
  written before they are appended to `bfcl_by_category.csv`, so a pass killed during the append resumes with
  the append alone.
- `passes/step_NNNN_pass_P/failure.json` (`PassFailure`): why a pass was refused, when it was.

The evaluation writes all of them (atomically: a temporary file renamed into place); the evaluation and the
audit read them through the readers here, which refuse a bad file with what was expected and what to do.

    request = read_request(folder / REQUEST_FILE)
    counts = count_outcomes(read_outcomes(folder / OUTCOMES_FILE), request.overlong_counted_wrong)
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError, field_validator

from toolcanary.contract.append_only import json_line
from toolcanary.contract.bfcl import BY_NAME
from toolcanary.contract.csv_schemas import CORRECT_EMPTY_REASONING, VERDICT_COLUMNS, BfclRow
from toolcanary.contract.errors import ContractError

SAMPLE_FILE = "sample.json"
REQUEST_FILE = "request.json"
OUTCOMES_FILE = "outcomes.jsonl"
COUNTS_FILE = "counts.json"
FAILURE_FILE = "failure.json"
# The two outcomes that are not BFCL error types; every other outcome is an error type and counts as wrong.
CORRECT = "correct"
OVERLONG = "overlong"
# Cut at the pass's output cap: never BFCL's verdict, always wrong (toolcanary.evaluate.guards, guard truncated-answers).
TRUNCATED = "truncated"
# What the model returned for an item (toolcanary.evaluate.answers decides it, docs/analysis.md explains it):
# structured calls the server parsed, call markup it did not parse, plain text, or nothing.
AnswerKind = Literal["calls", "unparsed_call", "text", "empty"]
ANSWER_KINDS: tuple[str, ...] = get_args(AnswerKind)
UNPARSED_CALL = "unparsed_call"
CALL_ATTEMPTS = ("calls", UNPARSED_CALL)
"""The answer kinds that tried to call a tool, whether or not the server parsed the call."""
EMPTY = "empty"


class RunSample(BaseModel):
    """`<results>/<run>/sample.json`: the item sample every pass of a run scores."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    size: int = Field(ge=1, description="items per category")
    multi_turn_size: int | None = Field(None, ge=1, description="items per multi-turn category, when not `size`")
    seed: int
    ids: dict[str, list[str]] = Field(description="the chosen ids per category, in BFCL's data order")


class PassRequest(BaseModel):
    """`<results>/<run>/passes/step_NNNN_pass_P/request.json`: what decides a pass's numbers."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    run: str
    step: int = Field(ge=0)
    pass_index: int = Field(ge=1)
    served_model: str
    registry_key: str
    weights_sha256: str | None = Field(description="None: an untrained base model, not a checkpoint")
    categories: list[str]
    ids: dict[str, list[str]]
    temperature: float
    overlong_counted_wrong: bool

    def differences(self, other: PassRequest) -> list[str]:
        """One line per field that differs from `other` (the request in the folder)."""
        mine, theirs = self.model_dump(), other.model_dump()
        return [f"{k}: folder has {theirs[k]!r:.120}, now {mine[k]!r:.120}" for k in mine if mine[k] != theirs[k]]


class ItemOutcome(BaseModel):
    """One line of `outcomes.jsonl`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    category: str
    id: str
    outcome: str = Field(description='"correct", "overlong", "truncated", or the BFCL error type of a wrong answer')
    answer: AnswerKind | None = Field(None, description="what the model returned; None: not classified (a pass "
                                                        "from before contract 1.5)")
    bfcl_correct: bool | None = Field(None, description="whether BFCL's own scoring counted the item correct, "
                                                        "before any override (truncated, overlong); None: not "
                                                        "recorded (a pass from before contract 1.10)")
    output_tokens: int | None = Field(None, ge=0, description="tokens the server generated for the item, over "
                                                              "all its responses (BFCL's output_token_count); "
                                                              "None: not recorded")

    @field_validator("category")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in BY_NAME:
            raise ValueError(f"a BFCL V4 category, not {value!r}")
        return value


class PassCounts(RootModel[list[BfclRow]]):
    """`counts.json`: a JSON list of the `BfclRow`s a pass appends to `bfcl_by_category.csv`, one per category."""


class FailedItem(BaseModel):
    category: str
    id: str
    error: str


class PassFailure(BaseModel):
    """`failure.json`: why a pass was refused; `counts`, `items` and `example` when requests failed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reason: str
    at: str = Field(description="UTC time of the refusal, ISO 8601")
    counts: dict[str, int] | None = Field(None, description="failed requests by kind")
    items: list[FailedItem] | None = Field(None, description="every failed request; --resume retries only these")
    example: str | None = Field(None, description="the start of one failed request's answer")


def write_json(path: Path, value: object) -> None:
    """Write through a temporary file so a kill never leaves half a file behind; the temporary name is the
    writer's own (process and thread), so two writers never replace each other's half-written file."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def _read_model(path: Path, model: type[BaseModel], what: str, fix: str) -> BaseModel:
    try:
        # Bytes, not text: pydantic refuses text that is not UTF-8 and JSON nested too deeply as ValidationError.
        return model.model_validate_json(path.read_bytes())
    except OSError as err:
        raise ContractError(str(path), what, f"an unreadable file ({err.strerror})", fix) from None
    except ValidationError as err:
        errors = sorted(err.errors(), key=lambda e: e["type"] == "missing")  # a wrong value before a gap
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'file'}: {e['msg']}" for e in errors[:3])
        raise ContractError(str(path), what, problems, fix) from None


def read_sample(path: Path) -> RunSample:
    """The run's pinned sample. Raises ContractError for a file that is not a whole `RunSample`."""
    return _read_model(path, RunSample, 'JSON {"size": K, "seed": S, "ids": {"category": ["id", ...]}}',
                       "The run's sample file is damaged; restore it, or score under another --run")


def write_sample(path: Path, sample: RunSample) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, sample.model_dump(mode="json"))


def read_request(path: Path) -> PassRequest:
    """A pass's frozen request. Raises ContractError for a file that is not a whole `PassRequest`."""
    return _read_model(path, PassRequest, f"a pass request with the fields {list(PassRequest.model_fields)}",
                       "The pass folder is damaged or from another version; move it away and score the pass again")


def write_request(path: Path, request: PassRequest) -> None:
    write_json(path, request.model_dump(mode="json"))


def read_outcomes(path: Path) -> list[ItemOutcome]:
    """Every line of `outcomes.jsonl`, in file order.

    Raises:
        ContractError: a line that is not `{"category", "id", "outcome"}` with a BFCL V4 category (its number
            is named), or a file that cannot be read.
    """
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as err:
        raise ContractError(str(path), "a pass's outcomes file", f"an unreadable file ({err.strerror})",
                            "Re-run that pass's evaluation") from None
    except UnicodeDecodeError as err:
        raise ContractError(str(path), "a pass's outcomes file in UTF-8", f"byte {err.start} is not UTF-8",
                            "Re-run that pass's evaluation") from None
    outcomes = []
    for number, line in enumerate(text.split("\n"), start=1):  # "\n" only: U+2028 may be in an answer
        if not line.strip():
            continue
        try:
            outcomes.append(ItemOutcome.model_validate_json(line))
        except ValidationError as err:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'line'}: {e['msg']}" for e in err.errors()[:3])
            raise ContractError(f"{path}: line {number}", '{"category", "id", "outcome"} with a BFCL V4 category',
                                f"{line[:120]!r} ({problems})", "Re-run that pass's evaluation") from None
    return outcomes


def write_outcomes(path: Path, outcomes: Iterable[ItemOutcome]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json_line(o) for o in outcomes))
    tmp.replace(path)


def count_outcomes(outcomes: Iterable[ItemOutcome], overlong_counted_wrong: bool,
                   leave_out: frozenset[tuple[str, str]] | set[tuple[str, str]] = frozenset(),
                   ) -> dict[str, tuple[int, int]]:
    """(correct, total) per category, in the order categories first appear.

    "correct" is right and every other outcome wrong; "overlong" leaves the total when the pass was run with
    `overlong_counted_wrong=False`. Items in `leave_out` ((category, id) pairs) are not counted, but their
    category stays, with total 0 when nothing of it is left.
    """
    tallies: dict[str, list[int]] = {}
    for item in outcomes:
        tally = tallies.setdefault(item.category, [0, 0])
        if (item.outcome == OVERLONG and not overlong_counted_wrong) or (item.category, item.id) in leave_out:
            continue
        tally[0] += item.outcome == CORRECT
        tally[1] += 1
    return {c: (correct, total) for c, (correct, total) in tallies.items()}


def count_unparsed_correct(outcomes: Iterable[ItemOutcome]) -> dict[str, int | None]:
    """Per category, the correct items whose answer held call markup the server did not parse: BFCL's credit
    for a call that failed to parse, in an abstention category. None when an item of the category was not
    classified: not measured, never 0."""
    counts: dict[str, int | None] = {}
    for item in outcomes:
        so_far = counts.setdefault(item.category, 0)
        if item.answer is None or so_far is None:
            counts[item.category] = None
        else:
            counts[item.category] = so_far + (item.outcome == CORRECT and item.answer == UNPARSED_CALL)
    return counts


def count_verdicts(outcomes: Iterable[ItemOutcome]) -> dict[str, dict[str, int | None]]:
    """Per category, the counts of `csv_schemas.VERDICT_COLUMNS`, each None when an item it needs lacks the
    field (not measured, never 0):

    - `truncated`, `overlong`: the items with that outcome (whether `overlong` ones are in the total is the
      pass's rule, `count_outcomes`);
    - `truncated_bfcl_correct`, `overlong_bfcl_correct`: of those, the ones BFCL's own scoring counted correct;
    - `correct_empty_reasoning`: the correct items whose answer was `empty` although the server generated
      tokens for them (a reasoning trace with nothing after it), which BFCL credits as abstentions.
    """
    counts: dict[str, dict[str, int | None]] = {}
    for item in outcomes:
        tally = counts.setdefault(item.category, dict.fromkeys(VERDICT_COLUMNS, 0))
        overridden = {TRUNCATED: "truncated", OVERLONG: "overlong"}.get(item.outcome)
        if overridden is not None:
            tally[overridden] += 1
            _add(tally, f"{overridden}_bfcl_correct", item.bfcl_correct)
        if item.answer is None or (item.outcome == CORRECT and item.answer == EMPTY and item.output_tokens is None):
            tally[CORRECT_EMPTY_REASONING] = None
        else:
            _add(tally, CORRECT_EMPTY_REASONING,
                 item.outcome == CORRECT and item.answer == EMPTY and item.output_tokens > 0)
    return counts


def _add(tally: dict[str, int | None], column: str, value: bool | None) -> None:
    """Add one item to a count; an item that lacks the field makes the count not measured."""
    so_far = tally[column]
    tally[column] = None if so_far is None or value is None else so_far + value


def error_counts(outcomes: Iterable[ItemOutcome]) -> dict[str, int]:
    """How many items ended with each outcome other than "correct", by outcome name."""
    counts: dict[str, int] = {}
    for item in outcomes:
        if item.outcome != CORRECT:
            counts[item.outcome] = counts.get(item.outcome, 0) + 1
    return dict(sorted(counts.items()))


def write_counts(path: Path, rows: Iterable[BfclRow]) -> None:
    write_json(path, PassCounts(list(rows)).model_dump(mode="json"))


def read_counts(path: Path) -> list[BfclRow]:
    """The rows a pass counted. Raises ContractError for a file that is not a JSON list of rows."""
    try:
        return PassCounts.model_validate_json(path.read_bytes()).root
    except OSError as err:
        raise ContractError(str(path), "a pass's counted rows", f"an unreadable file ({err.strerror})",
                            "Score the pass again") from None
    except ValidationError as err:
        raise ContractError(str(path), 'a JSON list of {"step", "pass_index", "category", "correct", "total"}',
                            str(err).splitlines()[0][:200],
                            "The pass folder is damaged; move it away and score the pass again") from None


def write_failure(path: Path, failure: PassFailure) -> None:
    write_json(path, failure.model_dump(mode="json", exclude_none=True))


def read_failure(path: Path) -> PassFailure:
    """Why a pass was refused. Raises ContractError for a file that is not a `PassFailure`."""
    return _read_model(path, PassFailure, f"a refusal with the fields {list(PassFailure.model_fields)}",
                       "Move the damaged file away; rerun the pass with --resume")
