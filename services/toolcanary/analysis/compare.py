"""Two arms compared, each one training run or several (other seeds of the same recipe): every run's change over
the same span of steps, each arm's mean change, and the difference B − A with an interval.

    .venvs/analysis/bin/make_figures --compare RUN_A RUN_B
    .venvs/analysis/bin/make_figures --compare A1,A2 B1,B2
    docker compose run analysis make_figures --compare trustee-qwen3-4b trustee-qwen3-4b-abstain

Each arm is a run id under the results folder (or a run folder), or several separated by commas. Every run needs
its pass folders: the comparison is made item by item, and the pass manifests say how each pass was scored.

- **Comparable or refused.** Every pass counted in the CSV, at every step all the runs scored, of every run of
  both arms must agree on what decides a number (`SCORING_TERMS`): contract version, bfcl-eval version,
  handler, categories, the items scored (sample size, seed and ids), the served context window and thinking
  mode, temperature, output cap and the overlong rule. The first difference is named, with the run, step and
  pass on each side, before anything is computed. A difference in `threads` (requests sent at once) is printed
  as a warning: it can move a server's batch numerics, but the CPU sizing picks it per machine.
- **Steps.** Every run's headline table is restricted to the steps all the runs scored; each run's change is
  taken from the baseline step to the last step all of them scored, so every change covers the same span.
- **Change** of a run (`runs_delta_pp`): as `--items` computes it (`toolcanary.analysis.items`), the aggregate
  at the last step minus at the baseline, from each item's share of passes correct, over the items the run
  scored in every pass of both steps. An arm's change (`delta_pp`) is the mean of its runs' changes, its
  `first` and `last` the means of theirs.
- **Difference** (`difference_pp`): arm B's change minus arm A's.
- **Rows** (`ROWS`): the headline aggregates, then the behaviour rows (no unparsed credit, BFCL's own verdict,
  call attempts on abstention and on call items, answers cut at the cap), each an aggregate of the same paired
  items scored by a measure of `toolcanary.analysis.items.MEASURES`, with the same change and intervals.
- **Training** (`training_movement`): per run, whether its policy moved: the first and last steps' tool-call
  share and reward with an exact permutation test (`toolcanary.analysis.training.first_last_shift`), the steps
  with a reward spread, the KL at the last step, the canary, and whether the served weights differ.
- **Interval, several runs** (at least three in all, so the spread between runs has a degree of freedom): a
  Student t interval on the runs' changes. With n_A and n_B runs, changes c and arm means m_A, m_B:
  s² = (Σ_A (c − m_A)² + Σ_B (c − m_B)²) / (n_A + n_B − 2), s.e. = s·sqrt(1/n_A + 1/n_B), and
  (m_B − m_A) ± t_q·s.e. with t_q the Student t quantile at (1 + level)/2 on n_A + n_B − 2 degrees of freedom;
  each arm's own change gets m ± t_q·s/sqrt(n). Each run's change already carries its repeat noise, so the
  interval holds the spread between training runs and the repeat noise, on this bank of items.
- **Interval, one run per arm**: a percentile bootstrap of items. For every category, items are resampled with
  replacement and each drawn item counts with its share of passes correct at each step (the mean over that
  step's passes, as the change itself), so repeat noise enters once, through the items' shares. A category
  both runs scored on the same items is resampled once for both (paired by item: the shared item difficulty
  cancels); otherwise each run's items are drawn on their own. The draw order is in `bootstrap_changes`. The
  two trained runs are held fixed: the spread between training runs is not in this interval, and the output
  says so beside it.

Writes `<results>/_compare/<A>_vs_<B>/` (a name no run id can take), with an arm of several runs named by its
runs in the order given, joined by `+` (`A1+A2_vs_B1+B2`; a name past 255 bytes is cut to the first run of each
arm, how many more, and a hash of the whole name): tables/compare.md, compare.csv (full precision),
compare.json (the findings) and figures/compare.png and .pdf (each arm's abstention and tool-call series
against step).
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from toolcanary.analysis.credit import BFCL_ROW, NO_CREDIT_ROW
from toolcanary.analysis.data import BfclRun, finite_or_none, fmt, load_bfcl, load_training
from toolcanary.analysis.items import (
    NotRecorded,
    PairedCategory,
    drawn_and_measurable,
    observed_shares,
    pair_steps,
    percentile_interval,
)
from toolcanary.analysis.passes import RunItems, pass_folder
from toolcanary.analysis.settings import AnalysisSettings
from toolcanary.analysis.training import SHIFT_NULL, canary_findings, first_last_shift
from toolcanary.analysis.verdicts import p_text
from toolcanary.contract.bfcl import AGGREGATES, CATEGORIES, aggregate_value
from toolcanary.contract.csv_schemas import BFCL_BY_CATEGORY, TRAIN_METRICS
from toolcanary.contract.errors import ContractError, UsageError
from toolcanary.contract.manifests import PASS_MANIFEST, EvalPassManifest
from toolcanary.contract.pass_files import REQUEST_FILE, read_request

COMPARE_DIR = "_compare"
SHIFT_STEPS = 5
"""Steps at each end of a training series whose means the training table compares (the canary's default too)."""
NAME_MAX = 255
"""Bytes in one file name on the usual file systems: a longer compare folder name is shortened."""
# What decides a pass's numbers, as the pass manifest records it; sample_ids stands for the items scored.
SCORING_TERMS = ("contract_version", "bfcl_eval_version", "handler", "categories", "sample_size", "sample_seed",
                 "sample_ids", "served_max_model_len", "served_enable_thinking", "temperature", "max_tokens",
                 "overlong_counted_wrong")
# Recorded and compared, but a difference is a warning: the CPU sizing picks it per machine.
WARNED_TERMS = ("threads",)
BETWEEN_RUNS, ITEMS_BOOTSTRAP = "between_runs_t", "items_bootstrap"
ONE_RUN_CAVEAT = ("with one training run per arm, this interval resamples the items (each counted with its share of "
                  "repeat passes correct) of the two trained runs, which it holds fixed; the spread between training "
                  "runs is not in it, so it cannot say whether another seed of either recipe would show the same "
                  "difference")
CSV_COLUMNS = ("aggregate", "a_first", "a_last", "a_delta_pp", "a_low", "a_high", "b_first", "b_last", "b_delta_pp",
               "b_low", "b_high", "difference_pp", "difference_low", "difference_high", "paired_categories",
               "interval")
@dataclass(frozen=True)
class Row:
    """One row of the comparison: an aggregate of the items, each item scored by a measure of `items.MEASURES`."""

    label: str
    aggregate: str
    measure: str


CALLS_ON_ABSTENTION, CALLS_ON_TOOL_CALL = "Call attempted, abstention items", "Call attempted, tool call items"
TRUNCATED_ON_ABSTENTION = "Cut at the output cap, abstention items"
ROWS: tuple[Row, ...] = (
    *(Row(a.name, a.name, "correct") for a in AGGREGATES),
    Row(NO_CREDIT_ROW, "Abstention required", "no_unparsed_credit"),
    Row(BFCL_ROW, "Abstention required", "bfcl_correct"),
    Row(CALLS_ON_ABSTENTION, "Abstention required", "call_attempted"),
    Row(CALLS_ON_TOOL_CALL, "Tool call required", "call_attempted"),
    Row(TRUNCATED_ON_ABSTENTION, "Abstention required", "truncated"),
)
"""The table's rows: the headline aggregates as the table scores them, then what the policy did. The three
abstention rows are the headline table's (`toolcanary.analysis.credit`), here over the paired items; a call
attempt is an answer that held a call, parsed or not; the last row counts the abstention items whose answer was
cut at the output cap, which the table counts wrong and BFCL may credit. The study's claim rests on the
behaviour rows: BFCL's credit for unparsed calls can hide a policy that calls more, and a policy that stops
calling but never stops writing loses "Abstention required" to the cap, not to calls."""
PROSE_ROWS = ("Abstention required", NO_CREDIT_ROW, CALLS_ON_ABSTENTION, CALLS_ON_TOOL_CALL, "Tool call required")


def arm_names(given: str) -> list[str]:
    """The runs of one arm as `--compare` takes them: one run, or several separated by commas.

    Raises:
        UsageError: an empty name (two commas, a comma at either end).
    """
    names = [name.strip() for name in given.split(",")]
    if not all(names):
        raise UsageError("--compare", "run ids or run folders separated by commas (A1,A2)", repr(given),
                         "Remove the empty name")
    return names


def arm_label(names: Sequence[str]) -> str:
    return "+".join(Path(name).name for name in names)


def compare_folder(results_dir: Path, arm_a: Sequence[str], arm_b: Sequence[str]) -> Path:
    """`<results>/_compare/A1+A2_vs_B1+B2`; a name past NAME_MAX bytes becomes
    `A1+1more_vs_B1+1more_<12 hex digits of its sha256>`."""
    name = f"{arm_label(arm_a)}_vs_{arm_label(arm_b)}"
    if len(name.encode()) > NAME_MAX:
        digest = hashlib.sha256(name.encode()).hexdigest()[:12]
        name = "_vs_".join(f"{Path(arm[0]).name}+{len(arm) - 1}more" if len(arm) > 1 else Path(arm[0]).name
                           for arm in (arm_a, arm_b)) + f"_{digest}"
    return results_dir / COMPARE_DIR / name


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


# "a" and "b": the runs of each arm, in the order given.
Arms = Mapping[str, Sequence[ComparedRun]]


def _all_runs(arms: Arms) -> list[ComparedRun]:
    return [*arms["a"], *arms["b"]]


def command_label(arms: Arms) -> str:
    """The comparison as it was asked for, for messages: `--compare A1,A2 B1`."""
    return "--compare " + " ".join(",".join(run.name for run in arms[side]) for side in ("a", "b"))


def _restricted(run: BfclRun, steps: list[int]) -> BfclRun:
    keep = [i for i, s in enumerate(run.steps) if int(s) in steps]
    return replace(run, steps=run.steps[keep], counts=tuple(run.counts[i] for i in keep),
                   pass_indices=tuple(run.pass_indices[i] for i in keep),
                   unparsed=tuple(run.unparsed[i] for i in keep))


def pass_terms(run: ComparedRun, step: int, pass_index: int) -> dict[str, Any]:
    """The scoring terms (and the warned ones) one counted pass was scored under, from its manifest.

    Raises:
        ContractError: the pass has no readable manifest.
    """
    path = pass_folder(run.data, step, pass_index) / PASS_MANIFEST
    try:
        manifest = EvalPassManifest.model_validate_json(path.read_bytes())
    except (OSError, ValueError) as err:
        raise ContractError(str(path), "the pass manifest the evaluation wrote (it says how the pass was "
                                       "scored)", f"{type(err).__name__}: {str(err)[:200]}",
                            "Copy the run's pass folders whole, or re-score that pass") from None
    terms = {name: getattr(manifest, name) for name in (*SCORING_TERMS, *WARNED_TERMS)}
    terms["categories"] = sorted(terms["categories"])
    terms["sample_ids"] = {c: sorted(ids) for c, ids in sorted(terms["sample_ids"].items())}
    return terms


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return f"{sum(map(len, value.values()))} sampled ids over {len(value)} categories" if value else "all items"
    if value is None:
        return "None (not recorded)"
    return repr(value)


def check_comparable(arms: Arms, steps: Sequence[int]) -> tuple[dict[str, Any], list[str]]:
    """The scoring terms every counted pass of every run shares at `steps`, and the warnings (a difference in
    threads). Runs are read in the order given, A's then B's, each step ascending, each pass ascending; the
    first pass read is the reference the others are held to.

    Raises:
        ContractError: a pass without its manifest, or one scored under other terms than the reference, naming
            the term and, on each side, the run, step and pass.
    """
    reference: dict[str, Any] | None = None
    where = ""
    threads: dict[int, list[str]] = {}
    for run in _all_runs(arms):
        for step in steps:
            for pass_index in run.items.pass_indices(step):
                terms = pass_terms(run, step, pass_index)
                here = f"{run.name} step {step} pass {pass_index}"
                threads.setdefault(terms.pop("threads"), []).append(here)
                if reference is None:
                    reference, where = terms, here
                    continue
                name = next((n for n in SCORING_TERMS if terms[n] != reference[n]), None)
                if name is None:
                    continue
                detail = ""
                if name == "sample_ids":
                    differ = sorted(c for c in {*terms[name], *reference[name]}
                                    if terms[name].get(c) != reference[name].get(c))
                    detail = f" (the ids differ in {differ[:5]})"
                raise ContractError(
                    f"{command_label(arms)}: {name}",
                    f"every counted pass of every run scored alike; {where} has {_shown(reference[name])}",
                    f"{here} has {_shown(terms[name])}{detail}",
                    "A difference in how the passes were scored would pass for a difference of training: re-score "
                    "one run the way the other was (make eval with the same BFCL install, sample and serving), or "
                    "the passes that differ, then compare")
    assert reference is not None
    warnings = []
    if len(threads) > 1:
        seen = "; ".join(f"{n} in {len(passes)} pass(es), e.g. {passes[0]}" for n, passes in sorted(threads.items()))
        warnings.append(f"the passes sent different numbers of requests at once (threads: {seen}); on a GPU server "
                        "that can move batch numerics, and so a score, a little. Not refused: the CPU sizing picks "
                        "threads per machine")
    return reference, warnings


def aligned_span(arms: Arms) -> tuple[list[int], tuple[int, int]]:
    """The steps every run scored, and the span compared: the baseline and the last common step."""
    runs = _all_runs(arms)
    common = sorted(set.intersection(*({int(s) for s in run.bfcl.steps} for run in runs)))
    first = int(runs[0].bfcl.steps[0])
    if any(int(run.bfcl.steps[0]) != first for run in runs) or len(common) < 2:
        raise ContractError(f"{command_label(arms)}: steps",
                            "the baseline and at least one later step scored in every run",
                            "; ".join(f"{run.name} scored {_steps(run.bfcl)}" for run in runs),
                            "Score a common step in every run (make eval STEP=N RUN=...)")
    return common, (first, common[-1])


def _steps(run: BfclRun) -> str:
    steps = [int(s) for s in run.steps]
    return ", ".join(map(str, steps[:10])) + (" ..." if len(steps) > 10 else "")


def _measurable(paired: list[PairedCategory]) -> list[str]:
    return drawn_and_measurable(paired)[1]


def run_values(paired: list[PairedCategory]) -> dict[str, tuple[float, float]]:
    """(at the baseline, at the last step) of every aggregate the run can measure, from its paired items."""
    first, last = observed_shares(paired)
    return {name: (aggregate_value(name, first), aggregate_value(name, last)) for name in _measurable(paired)}


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
                    n = its paired items, rows in ascending id order
                    rows = (A's rows of this category) if shared and run is B else rng.integers(0, n, size=n)
                    counts[run][first][category] = (sum_i FIRST[rows[i]], n)
                    counts[run][last][category] = (sum_i LAST[rows[i]], n)
            change[run][r] = aggregate_value(aggregate, counts[run][last]) − aggregate_value(aggregate, counts[run][first])
            difference[r] = change[B][r] − change[A][r]

    FIRST[i] is item i's share of passes correct at the baseline (the mean over the columns of
    PairedCategory.a, one per pass), LAST at the last step (PairedCategory.b): no pass is drawn, each drawn item
    counts with the mean over its passes, as the change itself does.
    """
    by_run = {"a": {p.category: p for p in paired_a if p.size}, "b": {p.category: p for p in paired_b if p.size}}
    shares = {run: {c: (p.a.mean(axis=1), p.b.mean(axis=1)) for c, p in paired.items()}
              for run, paired in by_run.items()}
    names = [n for n in _measurable(paired_a) if n in _measurable(paired_b)]
    out = {n: {"a": np.empty(replicates), "b": np.empty(replicates), "difference": np.empty(replicates)}
           for n in names}
    order = [c.name for c in CATEGORIES if c.name in by_run["a"] or c.name in by_run["b"]]
    rng = np.random.default_rng(seed)
    for r in range(replicates):
        counts: dict[str, dict[str, dict[str, tuple[float, int]]]] = {run: {"first": {}, "last": {}}
                                                                      for run in by_run}
        for category in order:
            in_a, in_b = by_run["a"].get(category), by_run["b"].get(category)
            shared = in_a is not None and in_b is not None and in_a.ids == in_b.ids
            rows = None
            for run, paired in (("a", in_a), ("b", in_b)):
                if paired is None:
                    continue
                if not (shared and run == "b"):
                    rows = rng.integers(0, paired.size, size=paired.size)
                first, last = shares[run][category]
                counts[run]["first"][category] = (float(first[rows].sum()), paired.size)
                counts[run]["last"][category] = (float(last[rows].sum()), paired.size)
        for name in names:
            for run in by_run:
                out[name][run][r] = (aggregate_value(name, counts[run]["last"])
                                     - aggregate_value(name, counts[run]["first"]))
            out[name]["difference"][r] = out[name]["b"][r] - out[name]["a"][r]
    return out


def between_run_interval(changes_a: Sequence[float], changes_b: Sequence[float], level: float) -> dict[str, Any]:
    """The Student t interval of the difference of arm means B − A from the runs' changes, with the between-run
    variance pooled over both arms (n_A + n_B − 2 degrees of freedom, at least 1), and each arm mean's interval
    on the same pooled s.d."""
    from scipy.stats import t

    a, b = np.asarray(changes_a, dtype=float), np.asarray(changes_b, dtype=float)
    df = len(a) + len(b) - 2
    if df < 1:
        raise ValueError("a between-run interval needs at least three runs in all")
    sd = math.sqrt((float(np.sum((a - a.mean()) ** 2)) + float(np.sum((b - b.mean()) ** 2))) / df)
    quantile = float(t.ppf((1 + level) / 2, df))
    se = sd * math.sqrt(1 / len(a) + 1 / len(b))
    difference = float(b.mean() - a.mean())

    def around(centre: float, half: float) -> list[float]:
        return [centre - half, centre + half]

    return {"df": df, "t_quantile": quantile, "between_run_sd_pp": sd, "standard_error_pp": se,
            "difference": around(difference, quantile * se),
            "a": around(float(a.mean()), quantile * sd / math.sqrt(len(a))),
            "b": around(float(b.mean()), quantile * sd / math.sqrt(len(b)))}


def compare_findings(arms: Arms, settings: AnalysisSettings) -> dict[str, Any]:
    """Everything the comparison reports (JSON-ready), after the refusals; `warnings` are for printing too."""
    common, span = aligned_span(arms)
    terms, warnings = check_comparable(arms, common)
    paired, unrecorded = {}, {}
    for measure in dict.fromkeys(row.measure for row in ROWS):
        try:
            paired[measure] = {side: [pair_steps(run.items, *span, measure) for run in arms[side]]
                               for side in ("a", "b")}
        except NotRecorded as err:
            unrecorded[measure] = f"a pass does not record {err}"
    values = {m: {side: [run_values(p) for p in by_side[side]] for side in ("a", "b")} for m, by_side in paired.items()}
    single = len(arms["a"]) == 1 and len(arms["b"]) == 1
    level = settings.interval_level
    if single:
        replicates = {m: bootstrap_changes(by_side["a"][0], by_side["b"][0], settings.bootstrap_replicates,
                                           settings.bootstrap_seed) for m, by_side in paired.items()}
        ids_b = {p.category: p.ids for p in paired["correct"]["b"][0] if p.size}
        interval: dict[str, Any] = {"method": ITEMS_BOOTSTRAP, "level": level,
                                    "replicates": settings.bootstrap_replicates, "seed": settings.bootstrap_seed,
                                    "kind": "percentile", "leaves_out": ONE_RUN_CAVEAT}
    else:
        runs = len(arms["a"]) + len(arms["b"])
        interval = {"method": BETWEEN_RUNS, "level": level, "df": runs - 2, "holds": (
            "the spread between training runs and each run's repeat noise, on this bank of items")}
    rows: dict[str, dict[str, Any]] = {}
    for shown in ROWS:
        name, aggregate = shown.aggregate, next(x for x in AGGREGATES if x.name == shown.aggregate)
        if shown.measure in unrecorded:
            rows[shown.label] = {"aggregate": name, "not_measurable": unrecorded[shown.measure]}
            continue
        measured = values[shown.measure]
        if not all(name in v for side in measured.values() for v in side):
            rows[shown.label] = {"aggregate": name,
                                 "not_measurable": "a category of it has no item scored at both steps in a run"}
            continue
        row: dict[str, Any] = {"aggregate": name, "measure": shown.measure}
        changes = {side: [v[name][1] - v[name][0] for v in measured[side]] for side in ("a", "b")}
        for side in ("a", "b"):
            row[side] = {"first": float(np.mean([v[name][0] for v in measured[side]])),
                         "last": float(np.mean([v[name][1] for v in measured[side]])),
                         "delta_pp": float(np.mean(changes[side])), "runs_delta_pp": changes[side]}
        row["difference_pp"] = row["b"]["delta_pp"] - row["a"]["delta_pp"]
        if single:
            drawn = replicates[shown.measure][name]
            for side in ("a", "b"):
                row[side]["interval_pp"] = list(percentile_interval(drawn[side], level))
            row["difference_interval_pp"] = list(percentile_interval(drawn["difference"], level))
            row["paired_categories"] = [c for c in aggregate.categories if any(
                p.category == c and p.size and p.ids == ids_b.get(c) for p in paired["correct"]["a"][0])]
        else:
            t = between_run_interval(changes["a"], changes["b"], level)
            interval["t_quantile"] = t["t_quantile"]
            for side in ("a", "b"):
                row[side]["interval_pp"] = t[side]
            row["difference_interval_pp"] = t["difference"]
            row["between_run_sd_pp"], row["standard_error_pp"] = t["between_run_sd_pp"], t["standard_error_pp"]
            row["paired_categories"] = []
        rows[shown.label] = row
    return {
        "runs": {side: arm_label([run.name for run in arms[side]]) for side in ("a", "b")},
        "arms": {side: [run.name for run in arms[side]] for side in ("a", "b")},
        "common_steps": common, "span": list(span),
        "passes": {side: {run.name: {str(s): list(run.items.pass_indices(s)) for s in span} for run in arms[side]}
                   for side in ("a", "b")},
        "scoring": {k: _shown(v) if k == "sample_ids" else v for k, v in terms.items()},
        "warnings": warnings,
        "interval": interval,
        "aggregates": rows,
        "training": training_movement(arms, span, settings),
    }


def served_weights(run: ComparedRun, step: int) -> str | None:
    """The sha256 of the weights the first counted pass of `step` was served (its request.json), or None."""
    passes = run.items.pass_indices(step)
    if not passes:
        return None
    try:
        return read_request(pass_folder(run.data, step, passes[0]) / REQUEST_FILE).weights_sha256
    except ContractError:
        return None


def training_movement(arms: Arms, span: tuple[int, int], settings: AnalysisSettings) -> dict[str, Any]:
    """Per run, whether training moved the policy: its tool-call share and reward over the steps
    (`toolcanary.analysis.training`, with the calibrated change verdict), the steps whose episodes differed in
    reward (GRPO learns nothing from a group that scored alike), the KL to the starting policy at the last step,
    the canary, and whether the weights served at the span's two ends differ."""
    out = {}
    for run in _all_runs(arms):
        ends = [served_weights(run, step) for step in span]
        weights = ("not recorded" if None in ends else "differ" if ends[0] != ends[1] else "identical")
        entry: dict[str, Any] = {"weights_at_span_ends": weights}
        path = run.data / TRAIN_METRICS
        if path.is_file():
            train = load_training(path)
            _, kl = train.series("kl")
            _, spread = train.series("reward_std")
            shifts = {name: first_last_shift(train.series(name)[1], SHIFT_STEPS, settings.verdict_level)
                      for name in ("tool_call_share", "reward_mean")}
            entry |= {"steps": len(train.steps), "canary": canary_findings(train), "first_last": shifts,
                      "kl_last": float(kl[-1]) if len(kl) else None,
                      "steps_with_reward_spread": int((spread > 0).sum())}
        out[run.name] = entry
    return out


def training_markdown(found: Mapping[str, Any]) -> list[str]:
    """The training table of the comparison: did each run's policy move."""
    lines = ["", "Training: did each run's policy move (tool-call share of assistant turns and mean reward: the mean "
             f"of the first and of the last {SHIFT_STEPS} steps, and whether the difference is beyond the "
             "step-to-step noise, by an exact permutation test of those steps, null: "
             f"{SHIFT_NULL}; KL to the starting policy at the last step):", "",
             "| run | arm | steps | tool-call share | reward | steps with a reward spread | KL | canary fired | "
             "weights served at the span's ends |", "|---|---|---:|---|---|---:|---:|---|---|"]
    for side in ("a", "b"):
        for run in found["arms"][side]:
            entry = found["training"][run]
            if "steps" not in entry:
                lines.append(f"| {run} | {side.upper()} | no train_metrics.csv | | | | | | "
                             f"{entry['weights_at_span_ends']} |")
                continue
            canary = entry["canary"]
            fired = f"from step {canary['fired_steps'][0]}" if canary["fired_steps"] else "no"
            share, reward = entry["first_last"]["tool_call_share"], entry["first_last"]["reward_mean"]
            lines.append(
                f"| {run} | {side.upper()} | {entry['steps']} | {_moved(share, '.2f')} | {_moved(reward, '+.2f')} | "
                f"{entry['steps_with_reward_spread']} | {fmt(entry['kl_last'], '.3g')} | {fired} | "
                f"{entry['weights_at_span_ends']} |")
    return lines


def _moved(shift: Mapping[str, Any], spec: str) -> str:
    if shift["not_measurable"]:
        return "too few steps"
    verdict = "moved" if shift["moved"] else "within the noise"
    return f"{shift['first']:{spec}} -> {shift['last']:{spec}} ({verdict}, p {p_text(shift['p'])})"


def load_compared(results_dir: Path, run: str, settings: AnalysisSettings) -> ComparedRun:
    data = run_folder(results_dir, run)
    bfcl = load_bfcl(data / BFCL_BY_CATEGORY, settings.baseline_step)
    return ComparedRun(Path(run).name, data, bfcl, RunItems(bfcl, data))


def restricted_runs(arms: Arms, common: list[int]) -> dict[str, BfclRun]:
    """Every run's CSV series on the steps all the runs scored (for its headline table), by run name."""
    return {run.name: _restricted(run.bfcl, common) for run in _all_runs(arms)}


def arm_series(arms: Arms, common: list[int]) -> dict[str, BfclRun]:
    """Each arm's series for the figure, by arm label: one run's own, or every pass of its runs at each common
    step taken together (the mean over them, their s.d. holding both the spread between runs and the repeats)."""
    out = {}
    for side in ("a", "b"):
        runs = [_restricted(run.bfcl, common) for run in arms[side]]
        merged = runs[0]
        if len(runs) > 1:
            counts = tuple(tuple(c for run in runs for c in run.counts[i]) for i in range(len(common)))
            merged = replace(merged, counts=counts,
                             pass_indices=tuple(tuple(range(1, len(c) + 1)) for c in counts),
                             unparsed=tuple(tuple(u for run in runs for u in run.unparsed[i])
                                            for i in range(len(common))))
        out[arm_label([run.name for run in arms[side]])] = merged
    return out


def _interval(values: list[float]) -> str:
    return f"[{values[0]:+.2f}, {values[1]:+.2f}]"


def render_markdown(found: Mapping[str, Any]) -> str:
    a, b = found["runs"]["a"], found["runs"]["b"]
    first, last = found["span"]
    level = round(100 * found["interval"]["level"])
    single = found["interval"]["method"] == ITEMS_BOOTSTRAP
    kind = "item bootstrap" if single else "between runs"
    headers = ["", f"{a} step {first}", f"{a} step {last}", f"{a} delta pp", f"{b} step {first}",
               f"{b} step {last}", f"{b} delta pp", "B - A pp", f"{level}% interval ({kind})",
               "paired by item" if single else "between-run s.d. pp"]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(["---"] + ["---:"] * (len(headers) - 1)) + "|"]
    for name, row in found["aggregates"].items():
        if "not_measurable" in row:
            lines.append(f"| {name} | " + " | ".join(["n/a"] * (len(headers) - 1)) + " |")
            continue
        ra, rb = row["a"], row["b"]
        aggregate = next(x for x in AGGREGATES if x.name == row["aggregate"])
        last_cell = (f"{len(row['paired_categories'])}/{len(aggregate.categories)} categories" if single
                     else f"{row['between_run_sd_pp']:.2f}")
        cells = [f"{ra['first']:.2f}", f"{ra['last']:.2f}", f"{ra['delta_pp']:+.2f} {_interval(ra['interval_pp'])}",
                 f"{rb['first']:.2f}", f"{rb['last']:.2f}", f"{rb['delta_pp']:+.2f} {_interval(rb['interval_pp'])}",
                 f"{row['difference_pp']:+.2f}", _interval(row["difference_interval_pp"]), last_cell]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if not single:
        lines += ["", f"Each run's change, step {first} -> {last} (pp):", ""]
        names = [n for n, row in found["aggregates"].items() if "not_measurable" not in row]
        lines += ["| run | arm | " + " | ".join(names) + " |", "|---|---|" + "---:|" * len(names)]
        for side in ("a", "b"):
            for i, run in enumerate(found["arms"][side]):
                cells = [f"{found['aggregates'][n][side]['runs_delta_pp'][i]:+.2f}" for n in names]
                lines.append(f"| {run} | {side.upper()} | " + " | ".join(cells) + " |")
    lines += training_markdown(found)
    return "\n".join(lines) + "\n"


def render_csv(found: Mapping[str, Any]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    method = found["interval"]["method"]
    for name, row in found["aggregates"].items():
        if "not_measurable" in row:
            writer.writerow([name, *[""] * (len(CSV_COLUMNS) - 2), method])
            continue
        ra, rb = row["a"], row["b"]
        values = [ra["first"], ra["last"], ra["delta_pp"], *ra["interval_pp"], rb["first"], rb["last"],
                  rb["delta_pp"], *rb["interval_pp"], row["difference_pp"], *row["difference_interval_pp"]]
        writer.writerow([name, *(repr(float(v)) for v in values), ";".join(row["paired_categories"]), method])
    return buffer.getvalue()


def prose(found: Mapping[str, Any]) -> list[str]:
    a, b = found["runs"]["a"], found["runs"]["b"]
    first, last = found["span"]
    interval = found["interval"]
    level = round(100 * interval["level"])
    single = interval["method"] == ITEMS_BOOTSTRAP
    lines = [f"Compared over steps {first} -> {last} (every run scored {len(found['common_steps'])} common steps), "
             f"scored alike ({found['scoring']['bfcl_eval_version']}, {found['scoring']['handler']}, "
             f"{len(found['scoring']['categories'])} categories)."]
    if single:
        lines.append(f"Interval: {level}% percentile bootstrap of items; {ONE_RUN_CAVEAT}.")
    else:
        counts = {side: len(found["arms"][side]) for side in ("a", "b")}
        lines.append(f"A = {', '.join(found['arms']['a'])} ({counts['a']} run(s)); B = {', '.join(found['arms']['b'])} "
                     f"({counts['b']} run(s)); each arm's change is the mean of its runs' changes.")
        lines.append(f"Interval: {level}% Student t on the runs' changes ({interval['df']} df, between-run variance "
                     f"pooled over both arms): it holds {interval['holds']}.")
    for name in PROSE_ROWS:
        row = found["aggregates"].get(name, {})
        if "not_measurable" in row or not row:
            continue
        low, high = row["difference_interval_pp"]
        if not (low > 0 or high < 0):
            # At the same spread, an interval of this width excludes 0 only around a difference past its half-width.
            verdict = (f"the interval includes 0; at this spread a difference would have to be past "
                       f"{(high - low) / 2:.2f} pp either way for its interval to exclude 0")
        elif single:
            verdict = "the interval excludes 0 for these two training runs only; another seed may differ"
        else:
            verdict = "the interval excludes 0"
        lines.append(f"{name}: {a} changed {row['a']['delta_pp']:+.2f} pp, {b} {row['b']['delta_pp']:+.2f} pp; "
                     f"B - A = {row['difference_pp']:+.2f} pp, {level}% interval {_interval([low, high])} "
                     f"({verdict}).")
    lines += [f"Warning: {warning}." for warning in found["warnings"]]
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
