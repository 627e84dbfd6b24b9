"""Where the demo's time went: each phase's wall time, split by what the services recorded themselves.

The demo times its phases (`PhaseClock`); inside them the trainer's `train_metrics.csv` holds each GRPO
step's seconds and every evaluation pass's manifest holds its generate and evaluate seconds, so the rest of
a phase is named for what fills it (loading the policy and publishing; vLLM starts and checkpoint checks).
Passes that ran at once (`--passes-at-once`) overlap: their own times add up to more than the wall time they
covered, so the rest of the eval phase is its time less the union of the passes' spans. Printed at the end of
the demo and written to `<results>/<run>/demo_timings.json`.

    clock = PhaseClock()
    with clock.phase("train"):
        ...
    print("\\n".join(breakdown_lines(timings(clock, results_dir))))
"""

from __future__ import annotations

import contextlib
import json
import math
import statistics
import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from toolcanary.contract.csv_schemas import TRAIN_METRICS, read_train_metrics
from toolcanary.contract.errors import ContractError
from toolcanary.contract.manifests import PASS_MANIFEST, EvalPassManifest

TIMINGS_FILE = "demo_timings.json"


class PhaseClock:
    """Wall seconds of each named phase, in the order they ran."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.monotonic() - started


def _step_seconds(results: Path) -> list[float]:
    try:
        rows = read_train_metrics(results / TRAIN_METRICS)
    except ContractError:
        return []
    return [r["step_seconds"] for r in rows if math.isfinite(r["step_seconds"])]


def _finished_passes(results: Path) -> list[EvalPassManifest]:
    out = []
    for path in sorted((results / "passes").glob(f"step_*_pass_*/{PASS_MANIFEST}")):
        try:
            manifest = EvalPassManifest.model_validate(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, ValidationError):
            continue  # a pass refused before its manifest was whole has no timings to report
        if manifest.finished_at is not None:
            out.append(manifest)
    return out


def covered_seconds(spans: list[tuple[float, float]]) -> float:
    """Seconds covered by the union of (start, end) spans: overlapping passes count once."""
    covered, reached = 0.0, -math.inf
    for start, end in sorted(spans):
        if end > reached:
            covered += end - max(start, reached)
            reached = end
    return covered


def timings(clock: PhaseClock, results: Path | Sequence[Path]) -> dict:
    """The breakdown as data: phases (s), GRPO steps (s each), passes (their phase sums and the wall time
    they covered), from one run's result folder or several (the study's runs, one after another)."""
    folders = [results] if isinstance(results, Path) else list(results)
    steps = [s for folder in folders for s in _step_seconds(folder)]
    manifests = [m for folder in folders for m in _finished_passes(folder)]
    passes = [m.timings_s for m in manifests]
    spans = [(datetime.fromisoformat(m.started_at).timestamp(), datetime.fromisoformat(m.finished_at).timestamp())
             for m in manifests]
    return {
        "phases_s": {name: round(s, 1) for name, s in clock.seconds.items()},
        "grpo_steps_s": [round(s, 1) for s in steps],
        "passes": len(passes),
        "pass_phases_s": {key: round(sum(p.get(key, 0.0) for p in passes), 1)
                          for key in ("preflight", "generate", "evaluate", "total")},
        "passes_wall_s": round(covered_seconds(spans), 1),
    }


def count(number: int, noun: str) -> str:
    """'1 pass', '4 passes', '2 GRPO steps'."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}{'es' if noun.endswith('s') else 's'}"


def breakdown_lines(data: dict) -> list[str]:
    """`time` lines of the closing screen: minutes per phase, with the train and eval phases split."""
    phases, steps, passes = data["phases_s"], data["grpo_steps_s"], data["pass_phases_s"]
    total = sum(phases.values())
    lines = [f"  time ({total / 60:.1f} min in phases)"]
    for name, seconds in phases.items():
        detail = ""
        if name == "train" and steps:
            spread = f" ± {statistics.stdev(steps):.0f}" if len(steps) > 1 else ""
            detail = (f"{count(len(steps), 'GRPO step')} {sum(steps) / 60:.1f} min, "
                      f"{statistics.fmean(steps):.0f}{spread} s each; "
                      f"loading the policy and publishing {(seconds - sum(steps)) / 60:.1f} min")
        elif name == "eval" and data["passes"]:
            wall = data["passes_wall_s"]
            overlap = (f", {passes['total'] / 60:.1f} min of pass time run at once"
                       if passes["total"] > wall + 1 else "")
            detail = (f"{count(data['passes'], 'pass')} {wall / 60:.1f} min{overlap} "
                      f"(generate {passes['generate'] / 60:.1f}, score {passes['evaluate'] / 60:.1f}); "
                      f"vLLM starts and checkpoint checks {(seconds - wall) / 60:.1f} min")
        share = f"{100 * seconds / total:3.0f}%" if total else "  -"
        lines.append(f"    {name:<16} {seconds / 60:5.1f} min {share}" + (f"  ({detail})" if detail else ""))
    return lines


def write_timings(results: Path, data: dict) -> Path:
    path = results / TIMINGS_FILE
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path
