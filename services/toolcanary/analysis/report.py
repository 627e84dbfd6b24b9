"""The run's report page: one self-contained HTML file that grows as the run's checkpoints are scored.

    .venvs/analysis/bin/make_figures --run RUN --report          # make report RUN=...
    .venvs/analysis/bin/make_figures --compare RUN_A RUN_B --report

`make_figures --report` computes what `--table --findings --fig all --items --stability` compute, as far as the
run's data reaches (the item-level parts need pass folders and two scored steps; the repeat stability a step
scored more than once), and writes `DIR/report/index.html` with them: where the run stands (steps published,
scored and pending; passes refused), the headline table, the findings, the figures, correct/total per category,
step and pass, the item-level comparison and the repeat stability, the training metrics with the curriculum
level, what the simulator trained on, the contamination audit's summary (when `make audit` has run) and the
provenance of every pass. The figures are the PNGs inlined as data URIs and the style is in the page, so a copy
of the one file opens anywhere with no network. `make watch` regenerates it after every scored step; while steps
are pending the page reloads itself every few minutes.

Every number on the page is one the CSVs and the other outputs already hold; the page adds no statistic.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import markdown
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from pydantic import ValidationError

from toolcanary.analysis.credit import (
    BFCL_ROW,
    NO_CREDIT_ROW,
    WITH_CREDIT_ROW,
    bfcl_series,
    no_credit_series,
    override_steps,
)
from toolcanary.analysis.data import BfclRun, TrainRun
from toolcanary.analysis.passes import PASSES_DIR
from toolcanary.analysis.table import ChangeRow, shown_table
from toolcanary.contract.bfcl import AGGREGATES, aggregate_value
from toolcanary.contract.errors import ContractError
from toolcanary.contract.manifests import PASS_MANIFEST, EvalPassManifest, read_published
from toolcanary.contract.pass_files import read_failure

AUDIT_MD = "audit/audit.md"
AUDIT_SUMMARY_SECTIONS = ("Counts per category", "Robustness of the result")
RELOAD_S = 300  # how often a page with pending steps reloads itself
_PASS_FOLDER = re.compile(r"step_(\d+)_pass_(\d+)")

FIGURE_TITLES = {
    "f1_training": "Training: reward, tool-call share and curriculum level",
    "f2_aggregates": "BFCL aggregates over steps",
    "f3_categories": "BFCL categories over steps",
    "f4_abstention_vs_tool_call": "Abstention against tool calling",
    "f5_training_distribution": "What the simulator trained on",
}


@dataclass(frozen=True)
class RunStatus:
    """Which steps the trainer published, which the evaluation scored (with their passes), which wait."""

    published: list[int] | None  # None: no ledger to read (a results folder copied without its checkpoints)
    ledger: Path
    scored: dict[int, list[int]]
    refused: list[tuple[int, int, str]] = field(default_factory=list)

    @property
    def pending(self) -> list[int]:
        return [s for s in self.published or [] if s not in self.scored]


def run_status(data: Path, run: str, checkpoints_dir: Path, bfcl: BfclRun) -> RunStatus:
    """The run's status from its ledger (`<checkpoints>/<run>/published.jsonl`), its CSV and its pass folders."""
    scored = {int(s): list(p) for s, p in zip(bfcl.steps, bfcl.pass_indices, strict=True)}
    ledger_folder = checkpoints_dir / run
    try:
        published = sorted({e.step for e in read_published(ledger_folder)}) if ledger_folder.is_dir() else None
    except ContractError:
        published = None  # a damaged ledger is the evaluation's to refuse; the page says it could not read one
    refused = []
    for failure in sorted((data / PASSES_DIR).glob("step_*_pass_*/failure.json")):
        found = _PASS_FOLDER.fullmatch(failure.parent.name)
        if found is None:
            continue
        step, pass_index = int(found[1]), int(found[2])
        if pass_index in scored.get(step, []):
            continue  # a later try of the same pass was scored
        try:
            reason = read_failure(failure).reason
        except ContractError as error:
            reason = f"failure.json unreadable: {error.got}"
        refused.append((step, pass_index, reason))
    return RunStatus(published, ledger_folder / "published.jsonl", scored, refused)


def pass_manifests(data: Path) -> list[EvalPassManifest]:
    """The manifests of the run's passes, in step and pass order; unreadable ones are left out (the item-level
    analysis refuses a scored pass whose folder is damaged)."""
    manifests = []
    for path in (data / PASSES_DIR).glob(f"step_*_pass_*/{PASS_MANIFEST}"):
        try:
            manifests.append(EvalPassManifest.model_validate_json(path.read_text()))
        except (OSError, ValidationError):
            continue
    return sorted(manifests, key=lambda m: (m.step, m.pass_index))


def provenance(manifests: Sequence[EvalPassManifest]) -> list[tuple[str, str]]:
    """(what, value) rows: one value when every pass agrees, else each value with the passes that had it."""
    def described(m: EvalPassManifest) -> dict[str, Any]:
        checkpoint = m.checkpoint
        return {
            "commit (checkpoint)": checkpoint.commit if checkpoint else "none (an untrained base model)",
            "base model": checkpoint.base_model if checkpoint else m.base_model,
            "weights dtype": checkpoint.dtype if checkpoint else None,
            "thinking mode": ("on" if checkpoint.enable_thinking else "off")
            if checkpoint and checkpoint.enable_thinking is not None else None,
            "thinking mode served": None if m.served_enable_thinking is None
            else "on" if m.served_enable_thinking else "off",
            "bfcl-eval": m.bfcl_eval_version, "handler": m.handler,
            "categories": len(m.categories),
            "sample": f"{m.sample_size} per category, seed {m.sample_seed}" if m.sample_size else "every item",
            "served context": m.served_max_model_len, "output cap": m.max_tokens,
            "temperature": m.temperature,
            "overlong answers": "counted wrong" if m.overlong_counted_wrong else "left out",
            "contract version": m.contract_version,
        }

    rows: dict[str, dict[str, list[str]]] = {}
    for m in manifests:
        for what, value in described(m).items():
            rows.setdefault(what, {}).setdefault("n/a" if value is None else str(value), []).append(
                f"{m.step}/{m.pass_index}")
    out = []
    for what, values in rows.items():
        if len(values) == 1:
            out.append((what, next(iter(values))))
        else:
            out.append((what, "; ".join(f"{v} (step/pass {', '.join(where)})" for v, where in values.items())))
    return out


def category_table(bfcl: BfclRun) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """(column heads "step S pass P", rows of category -> "correct/total" per column)."""
    columns = [(si, pi) for si, indices in enumerate(bfcl.pass_indices) for pi in range(len(indices))]
    heads = [f"step {int(bfcl.steps[si])} pass {bfcl.pass_indices[si][pi]}" for si, pi in columns]
    rows = []
    for category in bfcl.categories:
        cells = []
        for si, pi in columns:
            correct, total = bfcl.counts[si][pi][category]
            cells.append(f"{correct}/{total}")
        rows.append((category, cells))
    return heads, rows


def training_table(train: TrainRun) -> tuple[list[str], list[list[str]]]:
    """train_metrics.csv as shown: every column, numbers to four significant digits, empty cells blank."""
    names = list(train.columns)
    rows = []
    for i, step in enumerate(train.steps):
        cells = [str(int(step))]
        for name in names:
            value = float(train.columns[name][i])
            cells.append("" if value != value else f"{value:.4g}")
        rows.append(cells)
    return ["step", *names], rows


def audit_summary(data: Path) -> str | None:
    """The audit's summary sections as HTML (None: `make audit` has not written DIR/audit/audit.md)."""
    path = data / AUDIT_MD
    if not path.is_file():
        return None
    kept, keep = [], False
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("# "):
            continue
        if line.startswith("## "):
            keep = line[3:].strip() in AUDIT_SUMMARY_SECTIONS
        if keep:
            kept.append(line)
    return markdown.markdown("\n".join(kept), extensions=["tables"])


def png_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def figures(folder: Path | None) -> list[tuple[str, str]]:
    """(title, data URI) of every PNG figure in `folder`, in name order (none without a folder)."""
    return [] if folder is None else [(FIGURE_TITLES.get(p.stem, p.stem), png_uri(p))
                                      for p in sorted(folder.glob("*.png"))]


def first_step_values(bfcl: BfclRun) -> list[tuple[str, float]]:
    """(aggregate, mean over the passes) at the run's first scored step: a young run's headline, with the
    abstention rows the run measures around "Abstention required" as in the table (`table.table_rows`)."""
    values = []
    for a in AGGREGATES:
        if a.name == WITH_CREDIT_ROW and (as_bfcl := bfcl_series(bfcl)) is not None:
            values.append((BFCL_ROW, as_bfcl.first))
        values.append((a.name, bfcl.series(partial(aggregate_value, a.name)).first))
        if a.name == WITH_CREDIT_ROW and (without := no_credit_series(bfcl)) is not None:
            values.append((NO_CREDIT_ROW, without.first))
    return values


# The per-step table of truncated and overlong items: (group, column of VERDICT_COLUMNS, heading), under
# one heading per group.
OVERRIDE_GROUPS = {"abstention": "abstention categories", "tool_call": "tool call categories"}
OVERRIDE_CELLS = (
    ("abstention", "truncated", "truncated"),
    ("abstention", "truncated_bfcl_correct", "correct by BFCL"),
    ("abstention", "overlong", "overlong"),
    ("abstention", "overlong_bfcl_correct", "correct by BFCL"),
    ("abstention", "correct_empty_reasoning", "correct, reasoning alone"),
    ("tool_call", "truncated", "truncated"),
    ("tool_call", "truncated_bfcl_correct", "correct by BFCL"),
    ("tool_call", "overlong", "overlong"),
    ("tool_call", "overlong_bfcl_correct", "correct by BFCL"),
)


def override_table(bfcl: BfclRun) -> dict[str, Any]:
    """The truncated and overlong items per step (`credit.override_steps`), as the page shows them: the group
    headings with their widths, the column heads, and per step its number, pass count and (group.column, count
    or None) cells; or why they are not measured."""
    found = override_steps(bfcl)
    if not found["measured"]:
        return {"not_measured": found["not_measured"], "groups": [], "heads": [], "rows": []}
    rows = [(step["step"], step["passes"], [(f"{group}.{column}", step[group][column])
                                             for group, column, _ in OVERRIDE_CELLS])
            for step in found["steps"]]
    groups = [(label, sum(g == group for g, *_ in OVERRIDE_CELLS)) for group, label in OVERRIDE_GROUPS.items()]
    return {"not_measured": None, "empty_cells": found["empty_cells"], "groups": groups,
            "heads": ["step", "passes", *(head for *_, head in OVERRIDE_CELLS)], "rows": rows}


def _environment() -> Environment:
    return Environment(loader=PackageLoader("toolcanary.analysis", "."), autoescape=select_autoescape(["jinja"]),
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


@dataclass(frozen=True)
class RunReport:
    """What one run's page shows; every part is computed elsewhere (make_figures' analysis)."""

    run: str
    data: Path
    status: RunStatus
    headline: list[ChangeRow]
    prose: list[str]
    bfcl: BfclRun
    train: TrainRun | None
    figure_folder: Path | None  # None: no figure yet
    items: tuple[list[str], list[str]] | None  # (prose, details)
    items_missing: str
    stability: tuple[list[str], list[str]] | None
    stability_missing: str
    distribution: list[str]

    def render(self) -> str:
        headers, shown = shown_table(self.headline) if self.headline else ([], [])
        manifests = pass_manifests(self.data)
        levels = {m.step: m.checkpoint.curriculum_level for m in manifests if m.checkpoint}
        return _environment().get_template("report.jinja").render(
            run=self.run, generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), status=self.status,
            reload_s=RELOAD_S if self.status.pending else None,
            headers=headers, shown=shown, prose=self.prose,
            first_step=None if self.headline else (int(self.bfcl.steps[0]), first_step_values(self.bfcl)),
            figures=figures(self.figure_folder),
            categories=category_table(self.bfcl), overrides=override_table(self.bfcl),
            items=self.items, items_missing=self.items_missing,
            stability=self.stability, stability_missing=self.stability_missing,
            training=training_table(self.train) if self.train is not None else None,
            levels=sorted(levels.items()), distribution=self.distribution,
            audit=audit_summary(self.data), provenance=provenance(manifests),
        )


def render_compare(name_a: str, name_b: str, compare_markdown: str, figure_folder: Path) -> str:
    """The compare page of `make_figures --compare A B --report`: the comparison's tables and prose, its figure."""
    return _environment().get_template("compare_report.jinja").render(
        run_a=name_a, run_b=name_b, generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        body=markdown.markdown(compare_markdown, extensions=["tables"]), figures=figures(figure_folder))
