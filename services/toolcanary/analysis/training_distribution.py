"""What the simulator trained on: the distribution of tasks and of the policy's declines in a run's training
episodes, per step and per curriculum level, beside the policy's benchmark abstention per checkpoint.

    .venvs/analysis/bin/make_figures --data volumes/results/RUN --table --findings --fig all

It is part of `--table`, `--findings` and `--fig all` (figure f5) whenever the run folder holds episode
records; a run without them gets one line saying so, and nothing else.

Input: the trainer's `EpisodeRecord` lines (`toolcanary.contract.training_files`, read with its reader only):
`DIR/episodes.jsonl` (the CPU run) and `DIR/episodes/step_NNNN/<host>-<pid>.jsonl` (the GPU run; a record
counts only in its own step's folder, as the trainer folds it). Val episodes (held-out tasks, never trained
on) are left out.

Per group of episodes (a training step; a curriculum level):

- tasks (distinct `task_key`) and episodes; aborted episodes (the simulator's failures) are counted apart and
  never as declines;
- the share of tasks that expect no call, by code path: `abstention` (`call_expected` false: the curriculum
  asked for an abstention task) and `no_expected_call` (a call task whose author listed no expected call,
  `expected_calls` 0); `not_recorded`: call tasks whose records predate `expected_calls` (contract 1.8);
- among finished episodes, the share in which the policy declined (no tool-calling turn) and the mean reward
  a decline got, on abstention tasks, on call tasks, and on the no-expected-call subset of call tasks;
- the tool-call share: tool-calling turns / assistant turns summed over finished episodes, the definition of
  `tool_call_share` in `train_metrics.csv` (`toolcanary.train.step_metrics.step_row`); checked against that file
  where both exist.

The direction line compares the training tool-call share's change over the training steps between the
first and last scored checkpoint (first to last, and its OLS slope) with the change of the benchmark's
"Abstention required" over those checkpoints. Fewer tool calls in training means more declining, so a
policy whose training behaviour carries over moves the two in opposite directions; "same direction" is
the mismatch.
"""

from __future__ import annotations

import csv
import io
import logging
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any

import numpy as np

from toolcanary.analysis.credit import WITH_CREDIT_ROW
from toolcanary.analysis.data import TrainRun, finite_or_none, fmt
from toolcanary.analysis.settings import AnalysisSettings
from toolcanary.analysis.table import ChangeRow
from toolcanary.analysis.training import series_trend_json
from toolcanary.analysis.verdicts import p_text
from toolcanary.contract.training_files import (
    EPISODES_DIR,
    EPISODES_FILE,
    EpisodeRecord,
    read_episodes,
    step_episodes,
)

log = logging.getLogger(__name__)

STEP_FILE = "tables/training_distribution.csv"
LEVEL_FILE = "tables/training_distribution_by_level.csv"
STEP_FOLDER = re.compile(r"step_(\d+)")

# A task's kind. The first two are the two code paths to a task where declining is the right answer.
ABSTENTION, NO_EXPECTED_CALL = "abstention", "no_expected_call"
NOT_RECORDED, EXPECTED_CALL = "not_recorded", "expected_call"
CALL_KINDS = frozenset({NO_EXPECTED_CALL, NOT_RECORDED, EXPECTED_CALL})
# The episode groups whose declines are counted: name -> the task kinds in it.
DECLINE_GROUPS = {"abstention": frozenset({ABSTENTION}), "call": CALL_KINDS,
                  "no_expected_call": frozenset({NO_EXPECTED_CALL})}

MEASURES = (
    "tasks", "episodes", "aborted",
    "abstention_task_share", "no_expected_call_task_share", "no_call_task_share", "not_recorded_task_share",
    *(f"{what}_{group}" for group in DECLINE_GROUPS
      for what in ("ok_episodes", "declines", "decline_share", "decline_reward")),
    "declines_penalized", "tool_call_turns", "assistant_turns", "tool_call_share",
)
STEP_COLUMNS = ("step", "curriculum_level", "attempts", *MEASURES, "benchmark_abstention_pct")
LEVEL_COLUMNS = ("curriculum_level", "steps", "first_step", "last_step", *MEASURES)
# train_metrics.csv keeps six significant digits: a larger gap is a different set of episodes.
SHARE_TOLERANCE = 1e-5


@dataclass(frozen=True)
class Episode:
    """The fields of one `EpisodeRecord` this report reads (the transcript is not kept)."""

    step: int
    task_key: str
    attempt: str | None
    call_expected: bool
    expected_calls: int | None
    curriculum_level: int
    ok: bool
    reward: float
    tool_call_turns: int
    assistant_turns: int
    no_call_penalty: bool

    @classmethod
    def of(cls, record: EpisodeRecord) -> Episode:
        return cls(record.step, record.task_key, record.attempt, record.call_expected, record.expected_calls,
                   record.curriculum_level, record.outcome == "ok", record.reward, record.tool_call_turns,
                   record.assistant_turns, record.no_call_penalty)

    @property
    def declined(self) -> bool:
        return self.tool_call_turns == 0


@dataclass(frozen=True)
class EpisodeSet:
    """A run folder's training episodes and what was left out on the way."""

    folder: Path
    files: tuple[Path, ...]
    episodes: tuple[Episode, ...]
    val_episodes: int
    misfiled: int
    """GPU-layout records whose step is not their folder's: the trainer never folds them into a step."""


def episode_files(folder: Path) -> list[tuple[Path, int | None]]:
    """(file, the step its folder names, None for the single CPU file) of every episode file in a run folder."""
    found: list[tuple[Path, int | None]] = []
    if (folder / EPISODES_FILE).is_file():
        found.append((folder / EPISODES_FILE, None))
    root = folder / EPISODES_DIR
    if root.is_dir():
        for step_dir in sorted(root.iterdir()):
            match = STEP_FOLDER.fullmatch(step_dir.name)
            # only the names the trainer writes (`step_episodes`): anything else there is not a step's records
            if not (match and step_dir.is_dir() and step_episodes(root, int(match[1])) == step_dir):
                continue
            found += [(path, int(match[1])) for path in sorted(step_dir.glob("*.jsonl")) if path.is_file()]
    return found


def load_episodes(folder: Path) -> EpisodeSet:
    """The training episodes of a run folder, from both layouts.

    Raises:
        ContractError: from the contract's reader, naming the file and line that is not an `EpisodeRecord`.
    """
    kept: list[Episode] = []
    files, val, misfiled = [], 0, 0
    for path, folder_step in episode_files(folder):
        files.append(path)
        for record in read_episodes(path):
            if record.split != "train":
                val += 1
            elif folder_step is not None and record.step != folder_step:
                misfiled += 1
            else:
                kept.append(Episode.of(record))
    log.info("read %d training episodes from %d episode files under %s", len(kept), len(files), folder)
    return EpisodeSet(folder, tuple(files), tuple(kept), val, misfiled)


def task_kinds(episodes: Iterable[Episode]) -> dict[str, str]:
    """task_key -> its kind, from all its episodes in the group.

    An episode aborted before it got a task has no `expected_calls`; its group mates that got the task do,
    so a recorded count wins over a missing one, and zero over any other.
    """
    call_expected: dict[str, bool] = {}
    recorded: dict[str, set[int]] = {}
    for e in episodes:
        call_expected[e.task_key] = call_expected.get(e.task_key, True) and e.call_expected
        counts = recorded.setdefault(e.task_key, set())
        if e.expected_calls is not None:
            counts.add(e.expected_calls)
    kinds = {}
    for key, expects_call in call_expected.items():
        counts = recorded[key]
        kinds[key] = (ABSTENTION if not expects_call else NOT_RECORDED if not counts
                      else NO_EXPECTED_CALL if min(counts) == 0 else EXPECTED_CALL)
    return kinds


def _share(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def measures(episodes: Sequence[Episode]) -> dict[str, Any]:
    """The `MEASURES` of one group of episodes (None where a share or mean has nothing to count)."""
    kinds = task_kinds(episodes)
    tasks = Counter(kinds.values())
    done = [e for e in episodes if e.ok]
    row: dict[str, Any] = {
        "tasks": len(kinds), "episodes": len(episodes), "aborted": len(episodes) - len(done),
        "abstention_task_share": _share(tasks[ABSTENTION], len(kinds)),
        "no_expected_call_task_share": _share(tasks[NO_EXPECTED_CALL], len(kinds)),
        "no_call_task_share": _share(tasks[ABSTENTION] + tasks[NO_EXPECTED_CALL], len(kinds)),
        "not_recorded_task_share": _share(tasks[NOT_RECORDED], len(kinds)),
    }
    for group, members in DECLINE_GROUPS.items():
        finished = [e for e in done if kinds[e.task_key] in members]
        declines = [e.reward for e in finished if e.declined]
        row |= {f"ok_episodes_{group}": len(finished), f"declines_{group}": len(declines),
                f"decline_share_{group}": _share(len(declines), len(finished)),
                f"decline_reward_{group}": fmean(declines) if declines else None}
    turns, assistant = sum(e.tool_call_turns for e in done), sum(e.assistant_turns for e in done)
    row |= {"declines_penalized": sum(e.declined and e.no_call_penalty for e in done),
            "tool_call_turns": turns, "assistant_turns": assistant, "tool_call_share": _share(turns, assistant)}
    return row


def _levels(episodes: Iterable[Episode]) -> str:
    # One level per step in every run so far; a step that mixes levels lists them all rather than pick one.
    return ";".join(str(level) for level in sorted({e.curriculum_level for e in episodes}))


def _grouped(episodes: Iterable[Episode], key: str) -> dict[int, list[Episode]]:
    groups: dict[int, list[Episode]] = {}
    for e in episodes:
        groups.setdefault(getattr(e, key), []).append(e)
    return dict(sorted(groups.items()))


def step_rows(episodes: Sequence[Episode], benchmark: dict[int, float]) -> list[dict[str, Any]]:
    """One row per training step (`STEP_COLUMNS`); the benchmark's abstention where that step was scored."""
    return [{"step": step, "curriculum_level": _levels(group), "attempts": len({e.attempt for e in group}),
             **measures(group), "benchmark_abstention_pct": benchmark.get(step)}
            for step, group in _grouped(episodes, "step").items()]


def level_rows(episodes: Sequence[Episode]) -> list[dict[str, Any]]:
    """One row per curriculum level (`LEVEL_COLUMNS`), over every step that trained at it."""
    rows = []
    for level, group in _grouped(episodes, "curriculum_level").items():
        steps = sorted({e.step for e in group})
        rows.append({"curriculum_level": level, "steps": len(steps), "first_step": steps[0],
                     "last_step": steps[-1], **measures(group)})
    return rows


def render_csv(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    """Counts as integers, shares and means at full precision, an empty cell where there is nothing to count."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if row[c] is None else repr(row[c]) if isinstance(row[c], float) else row[c]
                         for c in columns])
    return buffer.getvalue()


def _sign(value: float) -> int:
    return (value > 0) - (value < 0)


def _verdict(training: float, benchmark: float) -> str:
    return "same direction" if _sign(training) == _sign(benchmark) else "opposite directions"


def direction(rows: list[dict[str, Any]], abstention: ChangeRow, settings: AnalysisSettings) -> dict[str, Any]:
    """The training tool-call share's change against the benchmark abstention's over the same steps.

    Checkpoint s is the policy after training step s, so the training steps between the first scored
    checkpoint b0 and the last bN are those with b0 < step <= bN.
    """
    steps = abstention.series.steps
    first, last = int(steps[0]), int(steps[-1])
    key = f"slope_per_{settings.slope_steps}_steps"
    benchmark = {"aggregate": abstention.name, "steps": [first, last], "first_pct": abstention.step0,
                 "last_pct": abstention.step_last, "delta_pp": abstention.delta_pp,
                 f"{key}_pp": finite_or_none(abstention.slope), "t": finite_or_none(abstention.trend.t),
                 "t_hac": finite_or_none(abstention.trend.t_hac), "p_change": finite_or_none(abstention.test.p)}
    window = [(r["step"], r["tool_call_share"]) for r in rows
              if first < r["step"] <= last and r["tool_call_share"] is not None]
    found: dict[str, Any] = {"benchmark": benchmark, "training": None, "verdict": "not measurable",
                             "mismatch": None, "slope_verdict": None, "not_measurable": None}
    if not window:
        found["not_measurable"] = (f"no training step between checkpoints {first} and {last} has a tool-call "
                                   "share (finished episodes with assistant turns)")
        return found
    x = np.array([s for s, _ in window], dtype=float)
    y = np.array([v for _, v in window], dtype=float)
    training = {"steps": [window[0][0], window[-1][0]], "step_count": len(window), "first": window[0][1],
                "last": window[-1][1], "delta": window[-1][1] - window[0][1],
                "trend": series_trend_json(x, y, settings)}
    found["training"] = training
    if len(window) < 2:
        found["not_measurable"] = (f"one training step with a tool-call share (step {window[0][0]}) between "
                                   f"checkpoints {first} and {last}: a change needs two")
    elif training["delta"] == 0:
        found["not_measurable"] = (f"the training tool-call share does not change ({training['first']:.3f} at "
                                   f"steps {training['steps'][0]} and {training['steps'][1]})")
    elif abstention.delta_pp == 0:
        found["not_measurable"] = (f"benchmark abstention does not change ({abstention.step0:.2f} at checkpoints "
                                   f"{first} and {last})")
    else:
        found["verdict"] = _verdict(training["delta"], abstention.delta_pp)
        found["mismatch"] = found["verdict"] == "same direction"
    slope = training["trend"][key]
    if slope and math.isfinite(abstention.slope) and abstention.slope:
        found["slope_verdict"] = _verdict(slope, abstention.slope)
    return found


def train_metrics_check(rows: list[dict[str, Any]], train: TrainRun | None) -> dict[str, Any] | None:
    """Where `train_metrics.csv` is at hand: does its tool_call_share agree with the one computed here?"""
    if train is None:
        return None
    steps, values = train.series("tool_call_share")
    theirs = dict(zip(steps.astype(int).tolist(), values.tolist(), strict=True))
    gaps = {r["step"]: abs(r["tool_call_share"] - theirs[r["step"]]) for r in rows
            if r["tool_call_share"] is not None and r["step"] in theirs}
    disagree = sorted(s for s, gap in gaps.items() if gap > SHARE_TOLERANCE)
    worst = max(gaps, key=gaps.__getitem__) if gaps else None
    return {"file": str(train.path), "steps_compared": len(gaps), "steps_that_differ": disagree,
            "max_abs_difference": gaps[worst] if worst is not None else None, "at_step": worst}


@dataclass(frozen=True)
class DistributionReport:
    """The report of one run: its two tables, its findings (JSON-ready) and the benchmark series it sits beside."""

    by_step: list[dict[str, Any]]
    by_level: list[dict[str, Any]]
    findings: dict[str, Any]
    benchmark_steps: np.ndarray
    benchmark_pct: np.ndarray

    def csv_files(self) -> dict[str, str]:
        """Relative path under the run folder -> content; none when there were no training episodes."""
        if not self.by_step:
            return {}
        return {STEP_FILE: render_csv(self.by_step, STEP_COLUMNS),
                LEVEL_FILE: render_csv(self.by_level, LEVEL_COLUMNS)}


def _not_found(episodes: EpisodeSet) -> str:
    if not episodes.files:
        return (f"no episode records in {episodes.folder} ({EPISODES_FILE}, or {EPISODES_DIR}/step_NNNN/*.jsonl): "
                "the trainer writes them beside train_metrics.csv")
    return (f"no training episode in {len(episodes.files)} episode file(s) under {episodes.folder} "
            f"({episodes.val_episodes} val episodes, {episodes.misfiled} outside their step's folder)")


def distribution_report(episodes: EpisodeSet, rows: list[ChangeRow], train: TrainRun | None,
                        settings: AnalysisSettings) -> DistributionReport:
    """The report from a run's episodes and its headline rows (the "Abstention required" row is used)."""
    abstention = next(r for r in rows if r.name == WITH_CREDIT_ROW)
    series = abstention.series
    benchmark = {int(s): float(v) for s, v in zip(series.steps, series.values, strict=True)}
    by_step = step_rows(episodes.episodes, benchmark)
    by_level = level_rows(episodes.episodes)
    found: dict[str, Any] = {
        "files": [str(p) for p in episodes.files], "val_episodes_left_out": episodes.val_episodes,
        "misfiled_episodes_left_out": episodes.misfiled,
        "benchmark_abstention": {"aggregate": abstention.name, "steps": list(benchmark),
                                 "pct": list(benchmark.values())},
    }
    if not by_step:
        found |= {"not_measurable": _not_found(episodes)}
        return DistributionReport([], [], found, series.steps, series.values)
    redone = {str(r["step"]): r["attempts"] for r in by_step if r["attempts"] > 1}
    found |= {
        "not_measurable": None, "tables": [STEP_FILE, LEVEL_FILE],
        "steps": [by_step[0]["step"], by_step[-1]["step"]], "step_count": len(by_step),
        "whole_run": measures(episodes.episodes),
        "by_level": by_level,
        "steps_with_several_attempts": redone,
        "direction": direction(by_step, abstention, settings),
        "train_metrics_check": train_metrics_check(by_step, train),
    }
    return DistributionReport(by_step, by_level, found, series.steps, series.values)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _declines(run: dict[str, Any], group: str, label: str) -> str:
    finished = run[f"ok_episodes_{group}"]
    if not finished:
        return f"{label}: no finished episode"
    reward = run[f"decline_reward_{group}"]
    paid = f" (mean reward {reward:+.3f})" if reward is not None else ""
    return f"{label} {_pct(run[f'decline_share_{group}'])} of {finished}{paid}"


def _direction_prose(found: dict[str, Any], settings: AnalysisSettings) -> str:
    bench, training = found["benchmark"], found["training"]
    key, per = f"slope_per_{settings.slope_steps}_steps", f"per {settings.slope_steps} steps"
    head = (f"Direction over checkpoints {bench['steps'][0]} -> {bench['steps'][1]}: {bench['aggregate']} "
            f"{bench['delta_pp']:+.2f} pp ({bench['first_pct']:.2f} -> {bench['last_pct']:.2f}, OLS slope "
            f"{fmt(bench[f'{key}_pp'], '+.3f')} pp {per}, t = {fmt(bench['t'], '+.2f')} descriptive, p change "
            f"{p_text(bench['p_change'])})")
    if training is not None:
        trend = training["trend"]
        head += (f", training tool-call share {training['delta']:+.3f} ({training['first']:.3f} at step "
                 f"{training['steps'][0]} -> {training['last']:.3f} at step {training['steps'][1]}, OLS slope "
                 f"{fmt(trend[key], '+.4f')} {per}, t = {fmt(trend['t'], '+.2f')} descriptive)")
    if found["not_measurable"] is not None:
        return f"{head}: not measurable ({found['not_measurable']})."
    fewer = "less" if training["delta"] < 0 else "more"
    abstains = "less" if bench["delta_pp"] < 0 else "more"
    meaning = (f"the policy calls tools {fewer} often in training yet abstains {abstains} on the benchmark "
               "(the mismatch)" if found["mismatch"] else
               f"{fewer} tool calling in training, {abstains} abstention on the benchmark (consistent)")
    slopes = "" if found["slope_verdict"] in (None, found["verdict"]) else \
        f" (the OLS slopes point in {found['slope_verdict']})"
    # The verdict compares signs; whether the benchmark moved at all is the change test's to say.
    untested = "" if bench["p_change"] is not None and bench["p_change"] <= settings.verdict_level else (
        "; the benchmark's change is not beyond a trend-free wander, so the direction is descriptive")
    return f"{head}: {found['verdict']}: {meaning}{slopes}{untested}."


def distribution_prose(found: dict[str, Any], settings: AnalysisSettings) -> list[str]:
    if found["not_measurable"] is not None:
        return [f"Training distribution: not measurable, {found['not_measurable']}."]
    run = found["whole_run"]
    lines = [
        f"Training distribution ({run['episodes']} training episodes of {run['tasks']} tasks, steps "
        f"{found['steps'][0]}-{found['steps'][1]}; {run['aborted']} aborted, counted apart): tasks that expect no "
        f"call {_pct(run['no_call_task_share'])} = {_pct(run['abstention_task_share'])} abstention tasks + "
        f"{_pct(run['no_expected_call_task_share'])} call tasks without an expected call"
        + (f"; {_pct(run['not_recorded_task_share'])} of tasks predate the expected-call count (not recorded)"
           if run["not_recorded_task_share"] else "") + ".",
        f"  Declines (finished episodes without a tool-calling turn): "
        f"{_declines(run, 'abstention', 'abstention tasks')}; {_declines(run, 'call', 'call tasks')}; of those, "
        f"{_declines(run, 'no_expected_call', 'tasks without an expected call')}.",
        f"  Tool-call share over finished episodes {_pct(run['tool_call_share'])}; per step and per curriculum "
        f"level in {found['tables'][0]} and {found['tables'][1]}.",
    ]
    if found["steps_with_several_attempts"]:
        steps = ", ".join(f"{s} ({n})" for s, n in found["steps_with_several_attempts"].items())
        lines.append(f"  Steps with episodes of several dispatch attempts, all counted here (a step redone after a "
                     f"restart; the trainer folds the last attempt only): {steps}.")
    check = found["train_metrics_check"]
    if check is not None and check["steps_that_differ"]:
        lines.append(f"  The tool-call share from the episode records differs from train_metrics.csv at "
                     f"{len(check['steps_that_differ'])} of {check['steps_compared']} steps (largest "
                     f"{check['max_abs_difference']:.4f}, at step {check['at_step']}): the two describe different "
                     "episodes.")
    lines.append("  " + _direction_prose(found["direction"], settings))
    return lines
