"""`audit.md`: what was compared, counts per category, the robustness table, the flagged items with their
neighbours, and what the audit cannot see.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from toolcanary.audit.item_audit import FLAGS, ItemAudit
from toolcanary.audit.robustness import Robustness
from toolcanary.audit.settings import AuditSettings
from toolcanary.audit.training_inputs import TaskReading
from toolcanary.contract.bfcl import AGGREGATE_NAMES

MAX_LISTED = 200


@dataclass(frozen=True)
class AuditInputs:
    run: str
    library: str
    library_tools: int
    reading: TaskReading
    settings: AuditSettings
    library_source: str = ""


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _snippet(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split()).replace("|", "/")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _inputs(inputs: AuditInputs) -> list[str]:
    reading, s = inputs.reading, inputs.settings
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(reading.skipped.items())) or "none"
    return [
        f"# Contamination audit: run `{inputs.run}`",
        "",
        f"- Tool library: `{inputs.library}` ({inputs.library_tools} tools; {inputs.library_source}), plus "
        f"{len(reading.task_tools)} tools that generated tasks offered and the library does not hold.",
        f"- Generated tasks: {len(reading.tasks)} distinct tasks from {reading.files} files under "
        f"`{reading.folder.name}/` ({reading.duplicates} repeats, {reading.other_roles} records of other roles); "
        f"lines skipped: {skipped}.",
        f"- Flags: `exact_name` (same normalised name); `near_duplicate_schema` (TF-IDF cosine >= "
        f"{s.schema_threshold}); `query_overlap` (TF-IDF cosine >= {s.query_threshold} between a turn with >= "
        f"{s.min_query_words} content words and one task). See docs/audit.md.",
        "",
    ]


def _counts(audits: list[ItemAudit]) -> list[str]:
    lines = [
        "## Counts per category",
        "",
        "| category | items | " + " | ".join(FLAGS) + " | flagged | no judged turn |",
        "|---|---:|" + "---:|" * (len(FLAGS) + 2),
    ]
    totals: Counter[str] = Counter()
    for category in dict.fromkeys(a.item.category for a in audits):
        rows = [a for a in audits if a.item.category == category]
        counts = Counter(
            {
                "items": len(rows),
                "flagged": sum(bool(a.flags) for a in rows),
                "unjudged": sum(a.judged_turns == 0 for a in rows),
            }
        )
        counts.update(f for a in rows for f in a.flags)
        totals.update(counts)
        lines.append(
            f"| {category} | {counts['items']} | "
            + " | ".join(str(counts[f]) for f in FLAGS)
            + f" | {counts['flagged']} | {counts['unjudged']} |"
        )
    lines.append(
        f"| **all** | {totals['items']} | "
        + " | ".join(str(totals[f]) for f in FLAGS)
        + f" | {totals['flagged']} | {totals['unjudged']} |"
    )
    return lines + [""]


def _robustness(robustness: Robustness) -> list[str]:
    lines = ["## Robustness of the result", ""]
    if not robustness.passes:
        lines += ["No pass folder with `outcomes.jsonl` was found, so nothing was recomputed.", ""]
    else:
        full, kept = robustness.step_means("full"), robustness.step_means("unflagged")
        first, last = min(full), max(full)
        d_full, d_kept = robustness.deltas("full"), robustness.deltas("unflagged")
        lines += [
            f"Aggregates in percent, mean over each step's passes; items: {robustness.passes[-1].items} scored, "
            f"{robustness.passes[-1].items_unflagged} unflagged at the last pass. Per pass: `robustness.csv`.",
            "",
            f"| aggregate | all, step {first} | all, step {last} | all, change | unflagged, step {first} "
            f"| unflagged, step {last} | unflagged, change |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for name in AGGREGATE_NAMES:
            lines.append(
                f"| {name} | {_num(full[first][name])} | {_num(full[last][name])} | {_num(d_full[name])} "
                f"| {_num(kept[first][name])} | {_num(kept[last][name])} | {_num(d_kept[name])} |"
            )
        lines.append("")
    lines += [f"- {problem}" for problem in robustness.problems]
    return lines + ([""] if robustness.problems else [])


def _flagged(audits: list[ItemAudit], queries: dict[str, str], s: AuditSettings) -> list[str]:
    flagged = [a for a in audits if a.flags]
    lines = ["## Flagged items", ""]
    if not flagged:
        return lines + ["None.", ""]
    if len(flagged) > MAX_LISTED:
        lines += [f"The first {MAX_LISTED} of {len(flagged)}; `audit.csv` holds them all.", ""]
    for audit in flagged[:MAX_LISTED]:
        lines.append(f"- `{audit.item.id}` ({audit.item.category}): {', '.join(audit.flags)}")
        for hit in audit.exact:
            lines.append(f"  - same name: `{hit.via}` ~ `{hit.key}`")
        if "near_duplicate_schema" in audit.flags:
            best = audit.schemas[0]
            lines.append(f"  - schema: `{best.via}` ~ `{best.key}` (cosine {best.score:.3f})")
        if "query_overlap" in audit.flags:
            best = audit.queries[0]
            number = int(best.via.split()[-1]) - 1
            lines.append(
                f'  - query: {best.via} "{_snippet(audit.item.turns[number])}" ~ task `{best.key}` '
                f'"{_snippet(queries.get(best.key, ""))}" (cosine {best.score:.3f}, '
                f"{s.verbatim_ngram}-grams verbatim {audit.query_verbatim or 0:.2f})"
            )
    return lines + [""]


def _blind_spots(audits: list[ItemAudit], inputs: AuditInputs) -> list[str]:
    unjudged = sum(a.judged_turns == 0 for a in audits)
    no_tasks = (
        f"This run persisted no readable generated task under `{inputs.reading.folder}`, so query overlap "
        "was not measured at all."
        if not inputs.reading.tasks
        else "Tasks of runs (or steps) that did not persist them, and lines that could not be read (above)."
    )
    return [
        "## What the audit cannot see",
        "",
        f"- Paraphrases below threshold: a question reworded so far that its TF-IDF cosine to the task falls under "
        f"{inputs.settings.query_threshold}, or a tool described in other words (cosine under "
        f"{inputs.settings.schema_threshold}), is not flagged. The scores are in `audit.csv` for a reader to judge.",
        f"- Short questions: {unjudged} items have no turn with {inputs.settings.min_query_words} or more content "
        "words and are never judged on query overlap (mostly live_irrelevance).",
        "- Knowledge in the base model or in the simulator's own pretraining: BFCL is public, and what either model "
        "saw before this run is outside any file the audit reads.",
        f"- {no_tasks}",
        "- Simulated tool outputs, user turns and verifier text: only task queries and tool schemas are compared; "
        "argument values and expected answers are not.",
        "- Categories outside the 17 offline ones (web search, memory).",
        "",
    ]


def render(audits: list[ItemAudit], robustness: Robustness, inputs: AuditInputs) -> str:
    queries = {t.task_id: t.query for t in inputs.reading.tasks}
    return "\n".join(
        _inputs(inputs)
        + _counts(audits)
        + _robustness(robustness)
        + _flagged(audits, queries, inputs.settings)
        + _blind_spots(audits, inputs)
    )
