"""The audit's CSV outputs: `audit.csv` (one row per BFCL item) and `robustness.csv` (one row per pass and
aggregate). Lists inside a cell are `key=score` pairs joined by " | "; scores have four decimals.

Written by `python -m toolcanary.audit` (see its --help).
"""

from __future__ import annotations

import csv
import io

from toolcanary.audit.item_audit import FLAGS, ItemAudit, Neighbour
from toolcanary.audit.robustness import Robustness
from toolcanary.contract.bfcl import AGGREGATE_NAMES

AUDIT_COLUMNS = (
    "category",
    "id",
    "functions",
    "turns",
    "judged_turns",
    "flagged",
    *FLAGS,
    "exact_name_tools",
    "name_score",
    "name_function",
    "name_tool",
    "schema_score",
    "schema_function",
    "schema_tool",
    "schema_top",
    "query_score",
    "query_verbatim",
    "query_turn",
    "query_task",
    "query_top",
)
ROBUSTNESS_COLUMNS = ("step", "pass", "aggregate", "full", "unflagged", "items", "items_unflagged")


def _score(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def _pairs(neighbours: tuple[Neighbour, ...]) -> str:
    return " | ".join(f"{n.key}={n.score:.4f}" for n in neighbours)


def audit_row(audit: ItemAudit) -> dict[str, object]:
    best_schema = audit.schemas[0] if audit.schemas else None
    best_query = audit.queries[0] if audit.queries else None
    row: dict[str, object] = {
        "category": audit.item.category,
        "id": audit.item.id,
        "functions": len(audit.item.functions),
        "turns": len(audit.item.turns),
        "judged_turns": audit.judged_turns,
        "flagged": int(bool(audit.flags)),
        "exact_name_tools": " | ".join(f"{n.via} -> {n.key}" for n in audit.exact),
        "name_score": _score(audit.name.score if audit.name else None),
        "name_function": audit.name.via if audit.name else "",
        "name_tool": audit.name.key if audit.name else "",
        "schema_score": _score(best_schema.score if best_schema else None),
        "schema_function": best_schema.via if best_schema else "",
        "schema_tool": best_schema.key if best_schema else "",
        "schema_top": _pairs(audit.schemas),
        "query_score": _score(best_query.score if best_query else None),
        "query_verbatim": _score(audit.query_verbatim),
        "query_turn": best_query.via if best_query else "",
        "query_task": best_query.key if best_query else "",
        "query_top": _pairs(audit.queries),
    }
    row.update({flag: int(flag in audit.flags) for flag in FLAGS})
    return row


def audit_csv(audits: list[ItemAudit]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=AUDIT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(audit_row(a) for a in audits)
    return buffer.getvalue()


def robustness_csv(robustness: Robustness) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(ROBUSTNESS_COLUMNS)
    for row in robustness.passes:
        for name in AGGREGATE_NAMES:
            writer.writerow(
                [
                    row.step,
                    row.pass_index,
                    name,
                    _score(row.full[name]),
                    _score(row.unflagged[name]),
                    row.items,
                    row.items_unflagged,
                ]
            )
    return buffer.getvalue()
