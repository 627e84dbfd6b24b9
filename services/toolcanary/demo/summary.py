"""The demo's closing screen: where everything is, the headline table, and what to run next on GPUs.

Printed by `python -m toolcanary.demo` at the end of a run.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from toolcanary.contract.bfcl import OFFLINE_CATEGORIES
from toolcanary.contract.csv_schemas import (
    BFCL_BY_CATEGORY,
    TRAIN_METRICS,
    read_bfcl_by_category,
    read_train_metrics,
)
from toolcanary.contract.errors import ContractError
from toolcanary.contract.volumes import REPORT_FILE
from toolcanary.demo.settings import REPO_ROOT, DemoSettings

POLICY_WORDS = {"tiny": "a tiny random model", "smollm2": "SmolLM2-135M trained for a few GRPO steps"}


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def reward_lines(results: Path) -> list[str]:
    """The reward trend the analysis found, beside its noise: how much the step mean moves from step to step
    and how far rewards spread within a step, with the analysis's calibrated verdict on its change."""
    try:
        found = json.loads((results / "tables" / "findings.json").read_text(encoding="utf-8"))["training"]["reward"]
        rows = read_train_metrics(results / TRAIN_METRICS)
    except (OSError, ValueError, KeyError, TypeError, ContractError):
        return []
    means = [r["reward_mean"] for r in rows if math.isfinite(r["reward_mean"])]
    spreads = [r["reward_std"] for r in rows if math.isfinite(r["reward_std"])]
    per, slope = next(((k.removeprefix("slope_per_"), v) for k, v in found["trend"].items()
                       if k.startswith("slope_per_")), ("", None))
    t = found["trend"].get("t")
    reason = found["trend"].get("not_measurable")
    p_change = found["trend"].get("p_change")
    verdict = "a change" if found["trend"].get("changes") else "no change beyond a trend-free wander"
    trend = (f"slope {slope:+.3f} per {per.replace('_', ' ')} ({verdict}, p change {p_change:.2g}; t = {t:+.2f}, "
             "descriptive)" if slope is not None and t is not None and p_change is not None
             else f"no trend measurable ({reason})" if reason else "no trend measurable")
    noise = (f"step-to-step s.d. {statistics.stdev(means):.3f}" if len(means) > 1 else "one step only")
    if spreads:
        noise += f", within-step s.d. {statistics.fmean(spreads):.3f}"
    return [f"Reward in the simulator: {found['first']:+.3f} at the first step, {found['last']:+.3f} at the last; "
            f"{trend}; {noise}.", ""]


def category_lines(results: Path) -> list[str]:
    """Correct/total per BFCL category at the first and the last scored step, over all passes of each: the
    counts behind the table's percentages, so a reader sees how few items a CPU run scores."""
    try:
        rows = read_bfcl_by_category(results / BFCL_BY_CATEGORY)
    except ContractError:
        return []
    steps = sorted({r.step for r in rows})
    if not steps:
        return []
    shown = [steps[0], steps[-1]] if len(steps) > 1 else steps[:1]
    counts = {(r.step, r.category): (0, 0) for r in rows}
    for r in rows:
        correct, total = counts[(r.step, r.category)]
        counts[(r.step, r.category)] = (correct + r.correct, total + r.total)
    categories = [c for c in OFFLINE_CATEGORIES if any((step, c) in counts for step in shown)]
    lines = ["Per category, correct/total over every pass of the step:",
             "  " + f"{'category':<26}" + "".join(f"{f'step {step}':>10}" for step in shown)]
    for category in categories:
        cells = ["{}/{}".format(*counts[(step, category)]) if (step, category) in counts else "-" for step in shown]
        lines.append("  " + f"{category:<26}" + "".join(f"{cell:>10}" for cell in cells))
    return [*lines, ""]


def item_lines(results: Path) -> list[str]:
    """What the item-level analysis found (make_figures --items --stability): the abstentions BFCL credited
    for unparsed call markup, the items each headline group gained and lost, and the items that flipped
    between repeat passes."""
    try:
        found = json.loads((results / "tables" / "findings.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    lines = []
    credit = (found.get("bfcl") or {}).get("abstention_credit")
    if credit:
        lines.append(f"Abstention without BFCL's credit for unparsed call markup: {credit['without_credit']['delta_pp']:+.2f}"
                     f" pp against {credit['with_credit']['delta_pp']:+.2f} with it." if credit["measured"]
                     else f"Abstention without BFCL's credit for unparsed call markup: not measured ({credit['not_measured']}).")
    items = found.get("items")
    if items:
        step_a, step_b = items["steps"]
        groups = [f"{name} {e['delta_pp']:+.2f} pp over {e['items']} items (permutation p={e['permutation_p']:.2g})"
                  for name, e in items["aggregates"].items()
                  if name in ("Abstention required", "Tool call required") and not e.get("not_measurable")]
        if groups:
            lines.append(f"Item by item, step {step_a} to {step_b}: {'; '.join(groups)}.")
    stability = found.get("stability")
    if stability and stability["steps"]:
        flips = ", ".join(f"{e['flipping']} of {e['items']} at step {s}" for s, e in stability["steps"].items())
        lines.append(f"Items whose outcome differs between repeat passes: {flips} ({_rel(results / 'tables' / 'stability.csv')}).")
    return [*lines, ""] if lines else []


def render(settings: DemoSettings, wall_s: float, time_lines: list[str] | None = None) -> str:
    """The closing screen; `time_lines` is the breakdown of toolcanary.demo.timing."""
    results = settings.result_dir
    table = results / "tables" / "headline.md"
    figures = sorted(p.name for p in (results / "figures").glob("*.png"))
    audit = results / "audit" / "audit.md"
    lines = [
        "",
        f"ToolCanary demo finished: run {settings.run} in {wall_s / 60:.1f} min",
        "",
        f"  report       {_rel(results / REPORT_FILE)}  (open it in a browser: every table and figure below)",
        f"  results      {_rel(results)}/  (bfcl_by_category.csv, train_metrics.csv, passes/)",
        f"  figures      {_rel(results / 'figures')}/  ({', '.join(figures) or 'none'})",
        f"  checkpoints  {_rel(settings.checkpoints / settings.run)}/",
        f"  simulator    {_rel(settings.runs / settings.run / 'simulator')}/  (every task and role call)",
        f"  audit        {_rel(audit)}",
        f"  logs         {_rel(settings.logs)}/",
        "",
    ]
    if table.is_file():
        lines += [table.read_text().rstrip(), ""]
    lines += category_lines(results)
    lines += item_lines(results)
    lines += reward_lines(results)
    if time_lines:
        lines += [*time_lines, ""]
    lines += [
        f"On CPU the policy is {POLICY_WORDS[settings.policy]}: the numbers show the pipeline works, "
        "not what RL does to a 4B policy.",
        "Whether the evaluation resolves what training does, on both arms of the abstention ablation with seeds",
        "and intervals: make study (about half an hour on 2 cores; docs/demo.md, \"The study\").",
        "Next, on GPUs: docs/gpu.md, every command from the TRUSTEE checkout and the simulator's token to the",
        "headline table and the report page (make up trains Qwen3-4B against Qwen3-8B for 200 steps).",
        f"Rerun or resume this demo with: make demo RUN={settings.run}",
    ]
    return "\n".join(lines)
