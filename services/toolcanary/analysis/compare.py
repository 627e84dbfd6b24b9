"""Two runs compared: each run's change over the same span of steps, side by side, and the difference of the two
changes with an interval that carries both runs' repeat noise.

    .venvs/analysis/bin/make_figures --compare RUN_A RUN_B
    docker compose run analysis make_figures --compare trustee-qwen3-4b trustee-qwen3-4b-abstain

RUN_A and RUN_B are run ids under the results folder (or run folders). Both need their pass folders: the
comparison is made item by item, and the pass manifests say how each run was scored.

- **Comparable or refused.** Every pass counted at the two compared steps of both runs must agree on what
  decides a number: bfcl-eval version, handler, categories, the items scored (sample size, seed and ids),
  the served context window, temperature, output cap and the overlong rule. The first difference is named,
  with both runs' values, before anything is computed.
- **Steps.** Both runs' headline tables are restricted to the steps both scored; each run's change is taken
  from the baseline step to the last step both scored, so the two changes cover the same training span.
- **Change** of a run (`delta_pp`): as `--items` computes it (`toolcanary.analysis.items`), the aggregate at
  the last step minus at the baseline, from each item's share of passes correct, over the items the run
  scored in every pass of both steps.
- **Difference** (`difference_pp`): run B's change minus run A's.
- **Bootstrap interval** of each change and of the difference: for every category, items are resampled with
  replacement and each drawn item's outcome at each step is read from one of that step's passes drawn
  uniformly (repeat noise and item sampling, as `--items`). A category both runs scored on the same items
  is resampled once for both (paired by item: the shared item difficulty cancels); otherwise each run's
  items are drawn on their own. The draw order is in `bootstrap_changes`.

Writes `<results>/_compare/<A>_vs_<B>/` (a name no run id can take): tables/compare.md, compare.csv (full
precision), compare.json (the findings) and figures/compare.png and .pdf (both runs' abstention and
tool-call series against step).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from toolcanary.analysis.data import BfclRun, finite_or_none, load_bfcl
from toolcanary.analysis.items import PairedCategory, pair_steps, percentile_interval
from toolcanary.analysis.passes import RunItems, pass_folder
from toolcanary.analysis.settings import AnalysisSettings
from toolcanary.contract.bfcl import AGGREGATES, CATEGORIES, aggregate_value
from toolcanary.contract.csv_schemas import BFCL_BY_CATEGORY
from toolcanary.contract.errors import ContractError
from toolcanary.contract.manifests import PASS_MANIFEST, EvalPassManifest

COMPARE_DIR = "_compare"
# What decides a pass's numbers, as the pass manifest records it; sample_ids stands for the items scored.
SCORING_TERMS = ("bfcl_eval_version", "handler", "categories", "sample_size", "sample_seed", "sample_ids",
                 "served_max_model_len", "temperature", "max_tokens", "overlong_counted_wrong")
CSV_COLUMNS = ("aggregate", "a_first", "a_last", "a_delta_pp", "a_low", "a_high", "b_first", "b_last", "b_delta_pp",
               "b_low", "b_high", "difference_pp", "difference_low", "difference_high", "paired_categories")


def compare_folder(results_dir: Path, run_a: str, run_b: str) -> Path:
    return results_dir / COMPARE_DIR / f"{Path(run_a).name}_vs_{Path(run_b).name}"


def run_folder(results_dir: Path, run: str) -> Path:
    """A run id under `results_dir`, or a run folder given as a path."""
    given = Path(run)
    folder = given if (given / BFCL_BY_CATEGORY).is_file() else results_dir / run
    if not (folder / BFCL_BY_CATEGORY).is_file():
        raise ContractError(str(folder), f"a run folder holding {BFCL_BY_CATEGORY}", "no such file",
                            "Name a run under the results folder (TOOLCANARY_RESULTS_DIR) or give a run folder")
    return folder


@dataclass(frozen=True)
class ComparedRun:
    name: str
    data: Path
    bfcl: BfclRun
    items: RunItems


def _restricted(run: BfclRun, steps: list[int]) -> BfclRun:
    keep = [i for i, s in enumerate(run.steps) if int(s) in steps]
    return replace(run, steps=run.steps[keep], counts=tuple(run.counts[i] for i in keep),
                   pass_indices=tuple(run.pass_indices[i] for i in keep),
                   unparsed=tuple(run.unparsed[i] for i in keep))


def scoring_terms(run: ComparedRun, steps: tuple[int, int]) -> dict[str, Any]:
    """The scoring terms every counted pass of `steps` shares.

    Raises:
        ContractError: a pass without its manifest, or two passes of the run scored under different terms.
    """
    seen: dict[str, Any] | None = None
    where = ""
    for step in steps:
        for pass_index in run.items.pass_indices(step):
            path = pass_folder(run.data, step, pass_index) / PASS_MANIFEST
            try:
                manifest = EvalPassManifest.model_validate_json(path.read_bytes())
            except (OSError, ValueError) as err:
                raise ContractError(str(path), "the pass manifest the evaluation wrote (it says how the pass was "
                                               "scored)", f"{type(err).__name__}: {str(err)[:200]}",
                                    "Copy the run's pass folders whole, or re-score that pass") from None
            terms = {name: getattr(manifest, name) for name in SCORING_TERMS}
            terms["categories"] = sorted(terms["categories"])
            terms["sample_ids"] = {c: sorted(ids) for c, ids in sorted(terms["sample_ids"].items())}
            if seen is not None and terms != seen:
                name = next(n for n in SCORING_TERMS if terms[n] != seen[n])
                raise ContractError(f"{run.data}: {path.parent.name}", f"{name} = {_shown(seen[name])}, as {where}",
                                    _shown(terms[name]), "Compare runs scored one way throughout; re-score the "
                                                         "passes that differ")
            seen, where = terms, path.parent.name
    assert seen is not None
    return seen


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return f"{sum(map(len, value.values()))} sampled ids over {len(value)} categories" if value else "all items"
    return repr(value)


def check_comparable(a: ComparedRun, terms_a: dict[str, Any], b: ComparedRun, terms_b: dict[str, Any]) -> None:
    for name in SCORING_TERMS:
        if terms_a[name] != terms_b[name]:
            detail = ""
            if name == "sample_ids":
                differ = sorted(c for c in {*terms_a[name], *terms_b[name]}
                                if terms_a[name].get(c) != terms_b[name].get(c))
                detail = f" (the ids differ in {differ[:5]})"
            raise ContractError(
                f"--compare {a.name} {b.name}: {name}", f"both runs scored alike; {a.name} has {_shown(terms_a[name])}",
                f"{b.name} has {_shown(terms_b[name])}{detail}",
                "A difference in how the runs were scored would pass for a difference of training: re-score one "
                "run the way the other was (make eval with the same BFCL install, sample and serving), then compare")


def aligned_span(a: ComparedRun, b: ComparedRun) -> tuple[list[int], tuple[int, int]]:
    """The steps both runs scored, and the span compared: the baseline and the last common step."""
    common = sorted({int(s) for s in a.bfcl.steps} & {int(s) for s in b.bfcl.steps})
    first = int(a.bfcl.steps[0])
    if int(b.bfcl.steps[0]) != first or len(common) < 2:
        raise ContractError(f"--compare {a.name} {b.name}: steps",
                            "the baseline and at least one later step scored in both runs",
                            f"{a.name} scored {_steps(a.bfcl)}, {b.name} scored {_steps(b.bfcl)}",
                            "Score a common step in both runs (make eval STEP=N RUN=...)")
    return common, (first, common[-1])


def _steps(run: BfclRun) -> str:
    steps = [int(s) for s in run.steps]
    return ", ".join(map(str, steps[:10])) + (" ..." if len(steps) > 10 else "")


def _shares(paired: list[PairedCategory], side: str) -> dict[str, tuple[float, int]]:
    return {p.category: (float(getattr(p, side).mean(axis=1).sum()), p.size) for p in paired if p.size}


def _measurable(paired: list[PairedCategory]) -> list[str]:
    sizes = {p.category: p.size for p in paired}
    return [a.name for a in AGGREGATES if all(sizes.get(c) for c in a.categories)]


def bootstrap_changes(paired_a: list[PairedCategory], paired_b: list[PairedCategory], replicates: int,
                      seed: int) -> dict[str, dict[str, np.ndarray]]:
    """Bootstrap replicates (pp) of run A's change, run B's change and their difference B − A, per aggregate
    both runs can measure.

    The draw order, exactly, so that a separately written reference reproduces every replicate:

        rng = numpy.random.default_rng(seed)
        for r in range(replicates):
            for each category with paired items in either run, in the order of toolcanary.contract.bfcl.CATEGORIES:
                shared = both runs have paired items there, and the same ids
                for run in (A, B), skipping a run without paired items there:
                    n = its paired items, rows in ascending id order; k_first, k_last = its passes at the
                        baseline and at the last step, columns in ascending pass index
                    rows = (A's rows of this category) if shared and run is B else rng.integers(0, n, size=n)
                    at_first = rng.integers(0, k_first, size=n)
                    at_last = rng.integers(0, k_last, size=n)
                    counts[run][first][category] = (sum_i FIRST[rows[i], at_first[i]], n)
                    counts[run][last][category] = (sum_i LAST[rows[i], at_last[i]], n)
            change[run][r] = aggregate_value(aggregate, counts[run][last]) − aggregate_value(aggregate, counts[run][first])
            difference[r] = change[B][r] − change[A][r]

    FIRST[i, j] is True when item i was correct in the j-th pass at the baseline (PairedCategory.a), LAST at the
    last step (PairedCategory.b).
    """
    by_run = {"a": {p.category: p for p in paired_a if p.size}, "b": {p.category: p for p in paired_b if p.size}}
    names = [n for n in _measurable(paired_a) if n in _measurable(paired_b)]
    out = {n: {"a": np.empty(replicates), "b": np.empty(replicates), "difference": np.empty(replicates)}
           for n in names}
    order = [c.name for c in CATEGORIES if c.name in by_run["a"] or c.name in by_run["b"]]
    rng = np.random.default_rng(seed)
    for r in range(replicates):
        counts = {run: {"first": {}, "last": {}} for run in by_run}
        for category in order:
            in_a, in_b = by_run["a"].get(category), by_run["b"].get(category)
            shared = in_a is not None and in_b is not None and in_a.ids == in_b.ids
            rows = None
            for run, paired in (("a", in_a), ("b", in_b)):
                if paired is None:
                    continue
                if not (shared and run == "b"):
                    rows = rng.integers(0, paired.size, size=paired.size)
                at_first = rng.integers(0, paired.a.shape[1], size=paired.size)
                at_last = rng.integers(0, paired.b.shape[1], size=paired.size)
                counts[run]["first"][category] = (int(paired.a[rows, at_first].sum()), paired.size)
                counts[run]["last"][category] = (int(paired.b[rows, at_last].sum()), paired.size)
        for name in names:
            for run in by_run:
                out[name][run][r] = (aggregate_value(name, counts[run]["last"])
                                     - aggregate_value(name, counts[run]["first"]))
            out[name]["difference"][r] = out[name]["b"][r] - out[name]["a"][r]
    return out


def compare_findings(a: ComparedRun, b: ComparedRun, settings: AnalysisSettings) -> dict[str, Any]:
    """Everything the comparison reports (JSON-ready), after the refusals."""
    common, span = aligned_span(a, b)
    terms_a, terms_b = scoring_terms(a, span), scoring_terms(b, span)
    check_comparable(a, terms_a, b, terms_b)
    paired_a, paired_b = pair_steps(a.items, *span), pair_steps(b.items, *span)
    replicates = bootstrap_changes(paired_a, paired_b, settings.bootstrap_replicates, settings.bootstrap_seed)
    ids_b = {p.category: p.ids for p in paired_b if p.size}
    level = settings.interval_level
    rows = {}
    for aggregate in AGGREGATES:
        if aggregate.name not in replicates:
            rows[aggregate.name] = {"not_measurable": "a category of it has no item scored at both steps in a run"}
            continue
        row: dict[str, Any] = {}
        for side, paired in (("a", paired_a), ("b", paired_b)):
            first = aggregate_value(aggregate.name, _shares(paired, "a"))
            last = aggregate_value(aggregate.name, _shares(paired, "b"))
            row[side] = {"first": first, "last": last, "delta_pp": last - first,
                         "interval_pp": list(percentile_interval(replicates[aggregate.name][side], level))}
        row["difference_pp"] = row["b"]["delta_pp"] - row["a"]["delta_pp"]
        row["difference_interval_pp"] = list(percentile_interval(replicates[aggregate.name]["difference"], level))
        row["paired_categories"] = [c for c in aggregate.categories
                                    if any(p.category == c and p.size and p.ids == ids_b.get(c) for p in paired_a)]
        rows[aggregate.name] = row
    return {
        "runs": {"a": a.name, "b": b.name}, "common_steps": common, "span": list(span),
        "passes": {side: {str(s): list(run.items.pass_indices(s)) for s in span}
                   for side, run in (("a", a), ("b", b))},
        "scoring": {k: _shown(v) if k == "sample_ids" else v for k, v in terms_a.items()},
        "bootstrap": {"replicates": settings.bootstrap_replicates, "seed": settings.bootstrap_seed,
                      "level": level, "interval": "percentile"},
        "aggregates": rows,
    }


def load_compared(results_dir: Path, run: str, settings: AnalysisSettings) -> ComparedRun:
    data = run_folder(results_dir, run)
    bfcl = load_bfcl(data / BFCL_BY_CATEGORY, settings.baseline_step)
    return ComparedRun(Path(run).name, data, bfcl, RunItems(bfcl, data))


def restricted_runs(a: ComparedRun, b: ComparedRun, common: list[int]) -> tuple[BfclRun, BfclRun]:
    """Both runs' CSV series on the steps both scored (for their headline tables and the figure)."""
    return _restricted(a.bfcl, common), _restricted(b.bfcl, common)


def _interval(values: list[float]) -> str:
    return f"[{values[0]:+.2f}, {values[1]:+.2f}]"


def render_markdown(found: Mapping[str, Any]) -> str:
    a, b = found["runs"]["a"], found["runs"]["b"]
    first, last = found["span"]
    level = round(100 * found["bootstrap"]["level"])
    headers = ["", f"{a} step {first}", f"{a} step {last}", f"{a} delta pp", f"{b} step {first}",
               f"{b} step {last}", f"{b} delta pp", "B - A pp", f"{level}% interval", "paired by item"]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(["---"] + ["---:"] * (len(headers) - 1)) + "|"]
    for name, row in found["aggregates"].items():
        if "not_measurable" in row:
            lines.append(f"| {name} | " + " | ".join(["n/a"] * (len(headers) - 1)) + " |")
            continue
        ra, rb = row["a"], row["b"]
        aggregate = next(x for x in AGGREGATES if x.name == name)
        paired = f"{len(row['paired_categories'])}/{len(aggregate.categories)} categories"
        cells = [f"{ra['first']:.2f}", f"{ra['last']:.2f}", f"{ra['delta_pp']:+.2f} {_interval(ra['interval_pp'])}",
                 f"{rb['first']:.2f}", f"{rb['last']:.2f}", f"{rb['delta_pp']:+.2f} {_interval(rb['interval_pp'])}",
                 f"{row['difference_pp']:+.2f}", _interval(row["difference_interval_pp"]), paired]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render_csv(found: Mapping[str, Any]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for name, row in found["aggregates"].items():
        if "not_measurable" in row:
            writer.writerow([name, *[""] * (len(CSV_COLUMNS) - 1)])
            continue
        ra, rb = row["a"], row["b"]
        values = [ra["first"], ra["last"], ra["delta_pp"], *ra["interval_pp"], rb["first"], rb["last"],
                  rb["delta_pp"], *rb["interval_pp"], row["difference_pp"], *row["difference_interval_pp"]]
        writer.writerow([name, *(repr(float(v)) for v in values), ";".join(row["paired_categories"])])
    return buffer.getvalue()


def prose(found: Mapping[str, Any]) -> list[str]:
    a, b = found["runs"]["a"], found["runs"]["b"]
    first, last = found["span"]
    level = round(100 * found["bootstrap"]["level"])
    lines = [f"Compared over steps {first} -> {last} (both runs scored {len(found['common_steps'])} common steps), "
             f"scored alike ({found['scoring']['bfcl_eval_version']}, {found['scoring']['handler']}, "
             f"{len(found['scoring']['categories'])} categories)."]
    for name in ("Abstention required", "Tool call required"):
        row = found["aggregates"].get(name, {})
        if "not_measurable" in row or not row:
            continue
        low, high = row["difference_interval_pp"]
        verdict = ("the interval excludes 0" if low > 0 or high < 0 else "the interval includes 0")
        lines.append(f"{name}: {a} changed {row['a']['delta_pp']:+.2f} pp, {b} {row['b']['delta_pp']:+.2f} pp; "
                     f"B - A = {row['difference_pp']:+.2f} pp, {level}% interval {_interval([low, high])} "
                     f"({verdict}).")
    return lines


def json_ready(found: Any) -> Any:
    """Floats made JSON-safe (nan and infinities as null)."""
    if isinstance(found, dict):
        return {k: json_ready(v) for k, v in found.items()}
    if isinstance(found, list):
        return [json_ready(v) for v in found]
    if isinstance(found, float) and not math.isfinite(found):
        return finite_or_none(found)
    return found
