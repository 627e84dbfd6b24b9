"""The guards: every way bfcl-eval reports a wrong number without failing, and which phase of a pass stops it.

A pass runs the phases of `PHASES` in order (toolcanary.evaluate.runner states them top to bottom). Each
guard is one `Guard` in `GUARDS`, with the phase it runs in and the failure it prevents; the functions that
enforce a guard carry `@enforces(<its entry>)`, so the list also says where each one lives.

    python -m toolcanary.evaluate guards
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

PHASES = ("resolve inputs", "preflight", "generate", "refuse errors", "evaluate", "count", "append")

F = TypeVar("F", bound=Callable)


@dataclass(frozen=True)
class Guard:
    number: int
    name: str
    phase: str
    prevents: str
    does: str
    enforced_by: list[str] = field(default_factory=list, compare=False)
    """Filled in by `enforces` as the enforcing modules are imported."""


REUSED_FOLDER = Guard(
    1, "reused-folder", "resolve inputs",
    "a reused result folder mixes an old checkpoint's answers into the pass",
    "a pass folder that holds anything, or a (step, pass) already in the CSV, is refused; --resume of the same "
    "request.json is the only way back in",
)
FAILED_REQUESTS = Guard(
    2, "failed-requests", "refuse errors",
    "HTTP errors, timeouts, dropped connections and empty answers are stored and scored (as correct "
    "abstentions in irrelevance)",
    "any such item fails the pass; failure.json lists them; --resume retries only those",
)
PREFLIGHT = Guard(
    3, "preflight", "preflight",
    "a server serving another model, without auto tool choice, or without the tool parser (calls left as "
    "<tool_call> text) scores as abstentions",
    'GET /models lists the model, tool_choice="auto" is accepted, a forced call comes back as structured '
    "tool_calls, no raw <tool_call> text, all before any BFCL request",
)
OVERLONG_ITEMS = Guard(
    4, "overlong-items", "count",
    "items longer than the served context get HTTP 400 and are scored (correct in irrelevance)",
    'marked "overlong" in the outcomes and listed in the manifest; counted wrong (--overlong-wrong, default) '
    "or left out of the total (--overlong-excluded)",
)
SCORE_FILES = Guard(
    5, "score-files", "evaluate",
    "a missing category counts as 0, and stale score files are re-read",
    "exactly one score file per requested category, written by this evaluate phase, with the requested item "
    "count and correct = total - failed lines; none for other categories",
)
UNKNOWN_IDS = Guard(
    6, "unknown-ids", "resolve inputs",
    "--run-ids drops unknown ids silently",
    "every id must be an item of its category (with a near-match suggestion); after generate, every requested "
    "id must have exactly one result",
)

TRUNCATED_ANSWERS = Guard(
    7, "truncated-answers", "count",
    "an answer cut at the output cap (a thinking trace that never reached its call) is scored like a finished "
    "one: a correct abstention in irrelevance",
    'the handler counts responses with finish_reason "length" per item; such items are marked "truncated" in '
    "the outcomes and counted wrong; the manifest lists them and the ones BFCL alone would have credited",
)

GUARDS: tuple[Guard, ...] = (REUSED_FOLDER, FAILED_REQUESTS, PREFLIGHT, OVERLONG_ITEMS, SCORE_FILES, UNKNOWN_IDS,
                             TRUNCATED_ANSWERS)


def enforces(*guards: Guard) -> Callable[[F], F]:
    """Mark a function as (part of) the enforcement of `guards`; the function itself is unchanged."""
    def mark(function: F) -> F:
        for guard in guards:
            guard.enforced_by.append(f"{function.__module__}.{function.__qualname__}")
        return function
    return mark


def describe() -> str:
    """The guard list as `python -m toolcanary.evaluate guards` prints it, in phase order.

    `enforced_by` is filled in by the @enforces marks as the pass's modules are imported: the CLI imports
    `toolcanary.evaluate.runner` (which imports the rest) before it calls this.
    """
    lines = [f"phases of a pass: {' -> '.join(PHASES)}", ""]
    for guard in sorted(GUARDS, key=lambda g: (PHASES.index(g.phase), g.number)):
        lines += [f"guard {guard.number} {guard.name}  (phase: {guard.phase})",
                  f"  prevents: {guard.prevents}",
                  f"  does:     {guard.does}",
                  f"  code:     {', '.join(sorted(set(guard.enforced_by))) or '-'}", ""]
    return "\n".join(lines).rstrip() + "\n"
