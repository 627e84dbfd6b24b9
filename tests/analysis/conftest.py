"""Golden run folders for the analysis tests, written by a seeded generator with known structure.

ToolCanary's shape by default: 21 checkpoints every 10 steps from 0 to 200, three passes at steps 0, 150
and 200, the 17 offline categories with their BFCL item counts; each category follows a base accuracy,
a linear trend, an optional level shift and binomial-like noise. Training metrics for steps 1..200 with a
tool-call share that drops at a known step and a curriculum that climbs to its ceiling and stays there.

`item_run` writes a run item by item instead: a pass folder per (step, pass) with the outcome and answer kind
of every item, chosen by the test, and the CSV rows counted from them by the contract's rules, so the tests
can plant gains, losses, flips and unparsed-call credit and know the answer.

    .venvs/analysis/bin/python -m pytest tests/analysis -q
"""

from __future__ import annotations

import csv
import functools
import math
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))  # report_browser, the browser driver the report tests share

from toolcanary.contract import CONTRACT_VERSION  # noqa: E402
from toolcanary.contract.bfcl import BY_NAME, OFFLINE_CATEGORIES
from toolcanary.contract.csv_schemas import (
    BFCL_COLUMNS,
    CANARY_COLUMNS,
    TRAIN_METRICS_COLUMNS,
    BfclRow,
    append_bfcl_rows,
)
from toolcanary.contract.manifests import EvalPassManifest
from toolcanary.contract.pass_files import (
    ItemOutcome,
    PassRequest,
    count_outcomes,
    count_unparsed_correct,
    count_verdicts,
    write_outcomes,
    write_request,
)

BASE = {  # accuracy in percent at step 0, roughly ToolCanary's untrained policy
    "irrelevance": 83.75, "live_irrelevance": 76.13, "live_relevance": 81.25,
    "simple_python": 95.0, "simple_java": 65.0, "simple_javascript": 72.0, "multiple": 94.0,
    "parallel": 91.0, "parallel_multiple": 88.0, "live_simple": 85.0, "live_multiple": 81.5,
    "live_parallel": 75.0, "live_parallel_multiple": 70.0, "multi_turn_base": 42.0,
    "multi_turn_miss_func": 33.0, "multi_turn_miss_param": 30.0, "multi_turn_long_context": 27.0,
}


@dataclass
class GoldenRun:
    """Parameters of one synthetic run; `trend` in pp per step, `shift` as (first step after, pp)."""

    steps: tuple[int, ...] = tuple(range(0, 201, 10))
    repeats: dict[int, int] = field(default_factory=lambda: {0: 3, 150: 3, 200: 3})
    categories: tuple[str, ...] = OFFLINE_CATEGORIES
    trend: dict[str, float] = field(default_factory=lambda: {"live_irrelevance": -0.02, "multi_turn_base": -0.015})
    shift: dict[str, tuple[int, float]] = field(default_factory=lambda: {"irrelevance": (70, -3.0)})
    noise_pp: float = 0.6
    seed: int = 7
    train_steps: int = 200
    share_break: int = 40
    curriculum_drop: int | None = None
    """From this step on the curriculum sits at 97, below the ceiling."""
    base: dict[str, float] = field(default_factory=dict)
    """Step-0 accuracy per category, where it differs from `BASE`."""
    reward: float | None = None
    """The same mean reward at every step, instead of a rising curve."""
    reward_std: float = 0.4

    def accuracy(self, category: str, step: int, rng: np.random.Generator) -> float:
        value = self.base.get(category, BASE[category]) + self.trend.get(category, 0.0) * step
        if category in self.shift and step >= self.shift[category][0]:
            value += self.shift[category][1]
        return float(np.clip(value + rng.normal(0.0, self.noise_pp), 0.0, 100.0))

    def write(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(self.seed)
        rows = []
        for step in self.steps:
            for pass_index in range(1, self.repeats.get(step, 1) + 1):
                for category in self.categories:
                    total = BY_NAME[category].items
                    correct = round(total * self.accuracy(category, step, rng) / 100.0)
                    rows.append(BfclRow(step, pass_index, category, correct, total))
        append_bfcl_rows(folder / "bfcl_by_category.csv", rows)
        if self.train_steps:
            self.write_training(folder / "train_metrics.csv", rng)
        return folder

    def write_training(self, path: Path, rng: np.random.Generator) -> None:
        steps = np.arange(1, self.train_steps + 1)
        level = np.minimum(1 + 3 * (steps - 1) // 2, 100).astype(float)
        if self.curriculum_drop is not None:
            level[steps >= self.curriculum_drop] = 97.0
        share = np.where(steps <= self.share_break, 0.616, 0.403) + rng.normal(0, 0.01, len(steps))
        reward = np.tanh((steps - 30) / 40) * 0.6 + rng.normal(0, 0.05, len(steps))
        if self.reward is not None:
            reward = np.full(len(steps), self.reward)
        with path.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(TRAIN_METRICS_COLUMNS)
            for i, step in enumerate(steps):
                values = {"step": int(step), "reward_mean": reward[i], "reward_std": self.reward_std,
                          "curriculum_level": level[i], "tool_call_share": share[i]}
                # the canary's columns stay empty, as in a run too short to measure it
                writer.writerow([values.get(c, "" if c in CANARY_COLUMNS else 0.5) for c in TRAIN_METRICS_COLUMNS])


@pytest.fixture
def golden(tmp_path: Path) -> Callable[..., Path]:
    """Write a golden run folder under tmp_path; keyword arguments override `GoldenRun` fields."""
    def make(name: str = "run", **overrides) -> Path:
        return GoldenRun(**overrides).write(tmp_path / name)
    return make


Outcome = Callable[[int, int, str, str], tuple]
"""(step, pass, category, id) -> (outcome, answer kind) of one item in one pass, or (outcome, answer kind, BFCL's
own verdict, output tokens) for a run written with the verdict columns of contract 1.10."""


def item_ids(category: str, size: int) -> list[str]:
    return [f"{category}_{i}" for i in range(size)]


def write_item_run(folder: Path, outcome: Outcome, passes: dict[int, int], size: int = 12,
                   unparsed_column: bool = True, overlong_counted_wrong: bool = True,
                   train_steps: int = 20, scoring: dict | None = None, verdict_columns: bool = False) -> Path:
    """A run folder with `passes[step]` passes at each step and `size` items per offline category: a pass
    folder (request.json, outcomes.jsonl, manifest.json) per pass and bfcl_by_category.csv counted from the
    outcomes with the contract's `count_outcomes` and `count_unparsed_correct`. `unparsed_column=False` writes
    the CSV as before contract 1.5, without the correct_unparsed column; `verdict_columns=True` fills the
    columns of contract 1.10 too (`count_verdicts`; else they are empty, as in a file of contract 1.5 to 1.9
    read by today's reader); `scoring` overrides fields of the pass manifests (how the passes were scored:
    bfcl_eval_version, served_max_model_len, ...)."""
    folder.mkdir(parents=True, exist_ok=True)
    ids = {c: item_ids(c, size) for c in OFFLINE_CATEGORIES}
    rows = []
    for step, count in sorted(passes.items()):
        for pass_index in range(1, count + 1):
            pass_dir = folder / "passes" / f"step_{step:04d}_pass_{pass_index}"
            pass_dir.mkdir(parents=True)
            outcomes = [ItemOutcome(**dict(zip(("outcome", "answer", "bfcl_correct", "output_tokens"),
                                               outcome(step, pass_index, c, i), strict=False)), category=c, id=i)
                        for c in OFFLINE_CATEGORIES for i in ids[c]]
            write_outcomes(pass_dir / "outcomes.jsonl", outcomes)
            write_request(pass_dir / "request.json", PassRequest(
                run=folder.name, step=step, pass_index=pass_index, served_model="m", registry_key="m",
                weights_sha256=None, categories=list(OFFLINE_CATEGORIES), ids=ids, temperature=0.0,
                overlong_counted_wrong=overlong_counted_wrong))
            (pass_dir / "manifest.json").write_text(EvalPassManifest(**{
                "contract_version": CONTRACT_VERSION, "run": folder.name, "step": step, "pass_index": pass_index,
                "served_model": "m", "base_url": "http://127.0.0.1:8000/v1", "bfcl_eval_version": "2025.10.20",
                "handler": "OpenAICompletionsHandler", "categories": list(OFFLINE_CATEGORIES), "threads": 4,
                "temperature": 0.0, "overlong_counted_wrong": overlong_counted_wrong,
                "served_max_model_len": 40960, "started_at": "2026-12-01T00:00:00Z", **(scoring or {})},
            ).model_dump_json())
            unparsed = count_unparsed_correct(outcomes)
            verdicts = count_verdicts(outcomes)
            for category, (correct, total) in count_outcomes(outcomes, overlong_counted_wrong).items():
                rows.append(BfclRow(step, pass_index, category, correct, total, unparsed[category],
                                    **(verdicts[category] if verdict_columns else {})))
    if unparsed_column:
        append_bfcl_rows(folder / "bfcl_by_category.csv", rows)
    else:
        lines = [",".join(BFCL_COLUMNS)] + [f"{r.step},{r.pass_index},{r.category},{r.correct},{r.total}"
                                            for r in rows]
        (folder / "bfcl_by_category.csv").write_text("\n".join(lines) + "\n")
    if train_steps:
        GoldenRun(train_steps=train_steps).write_training(folder / "train_metrics.csv", np.random.default_rng(0))
    return folder


@pytest.fixture
def item_run(tmp_path: Path) -> Callable[..., Path]:
    """Write an item-level run folder under tmp_path; see `write_item_run` for the arguments."""
    def make(outcome: Outcome, passes: dict[int, int], name: str = "run", **options) -> Path:
        return write_item_run(tmp_path / name, outcome, passes, **options)
    return make


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run make_figures as a user would, in a fresh interpreter of this environment."""
    command = [sys.executable, "-m", "toolcanary.analysis", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)


# --- an independent computation of the table: pandas for the aggregates, statsmodels for the statistics ---
AST_NAMES = ["simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
             "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"]


def independent_aggregates(csv_path: Path):
    """Per (step, pass) aggregates from the raw CSV, written from the issue's definitions, not the contract's."""
    import pandas as pd

    frame = pd.read_csv(csv_path)
    correct = frame.pivot_table(index=["step", "pass"], columns="category", values="correct", aggfunc="sum")
    total = frame.pivot_table(index=["step", "pass"], columns="category", values="total", aggfunc="sum")
    accuracy = 100 * correct / total

    def pooled(names: list[str]):
        return 100 * correct[names].sum(axis=1) / total[names].sum(axis=1)

    simple = accuracy[["simple_python", "simple_java", "simple_javascript"]].mean(axis=1)
    return pd.DataFrame({
        "Abstention required": pooled(["irrelevance", "live_irrelevance"]),
        "Tool call required": pooled(AST_NAMES),
        "Non-Live": (simple + accuracy["multiple"] + accuracy["parallel"] + accuracy["parallel_multiple"]) / 4,
        "Live": pooled(AST_NAMES[6:]),
        "Multi-Turn": accuracy[["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
                                "multi_turn_long_context"]].mean(axis=1),
    })


def statsmodels_trend(x, y, maxlags: int) -> tuple[float, float, float, object]:
    """(slope, OLS t, HAC t, OLS results) with statsmodels; HAC with the n/(n-k) correction, Bartlett kernel."""
    import statsmodels.api as sm

    design = sm.add_constant(np.asarray(x, dtype=float))
    ols = sm.OLS(np.asarray(y, dtype=float), design).fit()
    hac = sm.OLS(np.asarray(y, dtype=float), design).fit(
        cov_type="HAC", cov_kwds={"maxlags": maxlags, "use_correction": True}
    )
    return float(ols.params[1]), float(ols.tvalues[1]), float(hac.tvalues[1]), ols


NULL_RHOS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)


@functools.lru_cache(maxsize=8)
def null_reference(steps: tuple[float, ...], replicates: int, seed: int, min_segment: int = 3):
    """Per correlation, the |OLS t| and the sup-F of the change test's simulated null series, one series at a
    time, from the draw order documented in toolcanary.analysis.verdicts.null_statistics: per correlation, the
    first value of every replicate (none for the random walk), then per gap one shock for every replicate."""
    x = np.asarray(steps)
    gaps = np.diff(x) / np.median(np.diff(x))
    design = np.column_stack([np.ones_like(x), x])
    rng = np.random.default_rng(seed)
    out = []
    for rho in NULL_RHOS:
        first = np.zeros(replicates) if rho == 1.0 else rng.standard_normal(replicates)
        shocks = [rng.standard_normal(replicates) for _ in gaps]
        ts, fs = [], []
        for r in range(replicates):
            y = [first[r]]
            for gap, shock in zip(gaps, shocks, strict=True):
                if rho == 1.0:
                    y.append(y[-1] + math.sqrt(gap) * shock[r])
                else:
                    phi = rho ** gap
                    y.append(phi * y[-1] + math.sqrt(1 - phi ** 2) * shock[r])
            y = np.array(y)
            coef, rss, *_ = np.linalg.lstsq(design, y, rcond=None)
            ts.append(abs(coef[1]) / math.sqrt(rss[0] / (len(x) - 2) / np.sum((x - x.mean()) ** 2)))
            if len(x) >= 2 * min_segment:
                fs.append(reference_sup_f(y, min_segment))
        out.append((ts, fs))
    return tuple(out)


def reference_sup_f(y: np.ndarray, min_segment: int = 3) -> float:
    """F of the best two-level step against one level, breaks tried one by one."""
    n = len(y)
    step = min(np.var(y[:k]) * k + np.var(y[k:]) * (n - k) for k in range(min_segment, n - min_segment + 1))
    return (np.var(y) * n - step) / (step / (n - 2))


def reference_p_change(steps, values, t: float, replicates: int, seed: int = 0) -> float:
    """The change test's p (nan under three checkpoints): per statistic the largest Monte Carlo p over the null family, (1 + #{null >= observed})
    / (1 + R); then twice the smaller of the two, at most 1."""
    if len(steps) < 3:
        return math.nan
    nulls = null_reference(tuple(float(s) for s in steps), replicates, seed)
    p_t = max((1 + sum(v >= abs(t) for v in ts)) / (1 + replicates) for ts, _ in nulls)
    if len(steps) < 6:  # too short for a break on each side: the trend alone is tested
        return p_t
    f = reference_sup_f(np.asarray(values, dtype=float))
    p_f = max((1 + sum(v >= f for v in fs)) / (1 + replicates) for _, fs in nulls)
    return min(1.0, 2 * min(p_t, p_f))


def independent_table(csv_path: Path, maxlags: int, replicates: int = 4000) -> dict[str, dict[str, float]]:
    """Every column of the headline table; `replicates` is the change test's --null-replicates."""
    aggregates = independent_aggregates(csv_path)
    by_step = aggregates.groupby(level="step")
    means, counts, sds = by_step.mean(), by_step.size(), by_step.std(ddof=1)
    table = {}
    for name in aggregates.columns:
        y = means[name]
        slope, t, t_hac, ols = statsmodels_trend(y.index.to_numpy(), y.to_numpy(), maxlags)
        row = {
            "step0": y.iloc[0], "step_last": y.iloc[-1], "delta_pp": y.iloc[-1] - y.iloc[0],
            "rel_delta_pct": 100 * (y.iloc[-1] - y.iloc[0]) / y.iloc[0],
            "slope_pp_per_10": 10 * slope, "t": t, "t_hac": t_hac,
            "rho": float(np.sum(ols.resid[1:] * ols.resid[:-1]) / np.sum(ols.resid ** 2)),
            "p_change": reference_p_change(y.index.to_numpy(), y.to_numpy(), t, replicates),
        }
        row.update({f"sd_step{s}": sds[name][s] for s in counts.index if counts[s] >= 2})
        table[name] = row
    return table


@pytest.fixture
def independent():
    """The independent computations, as a fixture because test modules cannot import conftest."""
    import types

    return types.SimpleNamespace(aggregates=independent_aggregates, table=independent_table,
                                 trend=statsmodels_trend, run_cli=run_cli, p_change=reference_p_change)
